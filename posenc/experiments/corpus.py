"""Real text for the tiny Transformer, with no download: the Python standard library's own source files.

Characters become ids over a fixed vocabulary (:data:`VOCAB`: newline and
the 95 printable ASCII characters; anything else, a tab or a non-ASCII
letter, is one shared id :data:`OTHER`). :func:`stdlib_corpus` reads the
top-level ``*.py`` modules of the running Python's standard library in name
order and keeps every ``holdout_every``-th file apart as validation text, so
that a model is evaluated on files it never saw. The text differs a little
between Python versions; the corpus records the version and a SHA-256 of
what it read. :class:`TextTask` draws training windows from it for
:func:`posenc.experiments.train_tiny`: at every position, predict the next character.
"""

from __future__ import annotations

import hashlib
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

from .._checks import check_positive_int
from .tasks import Task, TaskBatch

__all__ = ["OTHER", "VOCAB", "VOCAB_SIZE", "TextCorpus", "TextTask", "decode_text", "encode_text", "stdlib_corpus"]

#: The characters with an id of their own: newline, then printable ASCII from space to "~".
VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))
#: The id shared by every other character.
OTHER = len(VOCAB)
#: Number of ids, ``len(VOCAB) + 1``.
VOCAB_SIZE = OTHER + 1

_LOOKUP = torch.full((128,), OTHER, dtype=torch.uint8)
_LOOKUP[torch.tensor([ord(c) for c in VOCAB])] = torch.arange(len(VOCAB), dtype=torch.uint8)


def encode_text(text: str) -> torch.Tensor:
    """The ids of ``text``'s characters, ``torch.uint8 [len(text)]``.

    Raises:
        TypeError: If ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    codes = torch.tensor([min(ord(c), 127) for c in text], dtype=torch.long)  # 127 (DEL) maps to OTHER too
    return _LOOKUP[codes]


def decode_text(ids: torch.Tensor) -> str:
    """The characters of ``ids``; :data:`OTHER` shows as ``"\\ufffd"``.

    Raises:
        TypeError: If ``ids`` is not an integer tensor.
        ValueError: If an id lies outside ``[0, VOCAB_SIZE)``.
    """
    if not isinstance(ids, torch.Tensor) or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise TypeError(f"ids must be an integer tensor, got {type(ids).__name__}")
    values = ids.flatten().tolist()
    bad = [v for v in values if not 0 <= v < VOCAB_SIZE]
    if bad:
        raise ValueError(f"ids must lie in [0, VOCAB_SIZE = {VOCAB_SIZE}), got {bad[0]}")
    return "".join(VOCAB[v] if v < OTHER else "\ufffd" for v in values)


@dataclass(frozen=True)
class TextCorpus:
    """Training and validation text as ids.

    Attributes:
        train: Ids of the training text, ``torch.uint8``.
        validation: Ids of the validation text, from other files.
        train_files, validation_files: The files read, by name.
        description: Where the text comes from, with the Python version.
        sha256: Digest of the ids of both parts, to compare corpora across machines.
    """

    train: torch.Tensor
    validation: torch.Tensor
    train_files: tuple[str, ...]
    validation_files: tuple[str, ...]
    description: str
    sha256: str

    def summary(self) -> dict:
        """JSON-ready facts about the corpus, as stored with results."""
        return {
            "description": self.description,
            "python": platform.python_version(),
            "train_files": len(self.train_files),
            "validation_files": len(self.validation_files),
            "train_chars": len(self.train),
            "validation_chars": len(self.validation),
            "sha256": self.sha256,
        }


def stdlib_corpus(
    *, train_chars: int = 2_000_000, validation_chars: int = 65_537, holdout_every: int = 8, folder=None
) -> TextCorpus:
    """The standard library's top-level modules as a :class:`~posenc.experiments.TextCorpus`.

    Files are read in name order (UTF-8; an undecodable byte becomes
    :data:`~posenc.experiments.OTHER`) and joined by blank lines; every ``holdout_every``-th
    file, starting with the first, goes to the validation text. Each part is
    cut to its length.

    Args:
        train_chars: Characters of training text kept.
        validation_chars: Characters of validation text kept.
        holdout_every: One file in this many is validation text, >= 2.
        folder: Where to read ``*.py`` files; default the standard library of
            the running Python (``sysconfig.get_paths()["stdlib"]``).

    Raises:
        ValueError: On a non-positive length or ``holdout_every < 2``.
        FileNotFoundError: If the folder has too little text for the lengths
            asked (a Python installed without its sources).
    """
    check_positive_int("train_chars", train_chars)
    check_positive_int("validation_chars", validation_chars)
    check_positive_int("holdout_every", holdout_every)
    if holdout_every < 2:
        raise ValueError(f"holdout_every must be >= 2, got {holdout_every}")
    folder = Path(sysconfig.get_paths()["stdlib"] if folder is None else folder)
    files = sorted(folder.glob("*.py"))
    parts: dict[str, list[Path]] = {"train": [], "validation": []}
    for i, path in enumerate(files):
        parts["validation" if i % holdout_every == 0 else "train"].append(path)
    wanted = {"train": train_chars, "validation": validation_chars}
    texts, used = {}, {}
    for part, paths in parts.items():
        chunks, size, used[part] = [], 0, []
        for path in paths:
            if size >= wanted[part]:
                break
            chunk = path.read_text(encoding="utf-8", errors="replace") + "\n\n"
            chunks.append(chunk)
            size += len(chunk)
            used[part].append(path.name)
        if size < wanted[part]:
            raise FileNotFoundError(
                f"{folder} holds {size} characters of {part} text in *.py files, fewer than the "
                f"{wanted[part]} asked; this Python may lack its standard library's sources"
            )
        texts[part] = encode_text("".join(chunks)[: wanted[part]])
    digest = hashlib.sha256(texts["train"].numpy().tobytes() + texts["validation"].numpy().tobytes()).hexdigest()
    return TextCorpus(
        train=texts["train"],
        validation=texts["validation"],
        train_files=tuple(used["train"]),
        validation_files=tuple(used["validation"]),
        description=f"Python {platform.python_version()} standard library, top-level modules",
        sha256=digest,
    )


class TextTask(Task):
    """Next-character prediction on windows of a text.

    ``sample(b, n, generator)`` draws ``b`` windows of ``n + 1`` characters
    at uniformly random places; the inputs are the first ``n``, the targets
    the last ``n`` (every position is answered).

    Args:
        ids: The text's ids (:func:`encode_text`), longer than any window drawn.
    """

    name = "text"

    def __init__(self, ids: torch.Tensor) -> None:
        if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype != torch.uint8:
            raise TypeError(f"ids must be a 1-D torch.uint8 tensor (encode_text), got {type(ids).__name__}")
        self.ids = ids
        self.num_symbols = VOCAB_SIZE

    def __repr__(self) -> str:
        return f"TextTask({len(self.ids)} characters)"

    def seq_len(self, length: int) -> int:
        return check_positive_int("length", length)

    def sample(self, batch_size: int, length: int, generator: torch.Generator | None = None) -> TaskBatch:
        """``batch_size`` windows of ``length + 1`` characters as a
        :class:`~posenc.experiments.TaskBatch` of inputs and targets.

        Raises:
            ValueError: If a size is not an int >= 1 or the window is longer than the text.
        """
        check_positive_int("batch_size", batch_size)
        check_positive_int("length", length)
        if length + 1 > len(self.ids):
            raise ValueError(f"length must be < the text's {len(self.ids)} characters, got {length}")
        starts = torch.randint(0, len(self.ids) - length, (batch_size,), generator=generator)
        windows = self.ids[starts[:, None] + torch.arange(length + 1)].long()  # [b, length + 1]
        return TaskBatch(windows[:, :-1], windows[:, 1:])
