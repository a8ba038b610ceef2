"""``python -m posenc.hf path/to/config.json``: print how a model encodes positions, layer by layer.

Reads a Hugging Face ``config.json`` with :func:`posenc.hf.reader.describe` and prints
:func:`posenc.hf.reader.format_description`'s table. Exit status 0, or 2 with the error's
message on one line of standard error for a file that cannot be read, a model type posenc
does not know, or any other failure (never a traceback). ``python -m posenc.describe`` is
the same command under its older name.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .reader import describe, format_description

USAGE = "usage: python -m posenc.hf path/to/config.json"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the per-layer table of the configuration named in ``argv``; return the exit status.

    Args:
        argv: The arguments after the program name (default ``sys.argv[1:]``): one path.

    Returns:
        0 on success, 2 on a usage error or a configuration that cannot be described.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if len(args) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        text = format_description(describe(args[0]))
    except (ValueError, TypeError) as error:  # bad file, unknown model type, missing or invalid field
        print(_one_line(f"error: {error}"), file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001  a value the checks let through: one line, never a traceback
        print(_one_line(f"error: {args[0]} cannot be described: {type(error).__name__}: {error}"), file=sys.stderr)
        return 2
    print(text)
    return 0


def _one_line(message: str, limit: int = 1000) -> str:
    """``message`` on one line (newlines become spaces), cut to ``limit`` characters."""
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 3] + "..."
