"""Where the book's recorded data lives: ``posenc_book/data/``, shipped with the package."""

from __future__ import annotations

from pathlib import Path

#: The folder of the recorded data, shipped with the package.
DATA = Path(__file__).resolve().parent / "data"


def data_path(name: str) -> Path:
    """The path of a recorded data file, ``name`` being its file name (``"claims.yaml"``).

    Raises:
        FileNotFoundError: if no such file ships with the package; the message lists those that do.
    """
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise ValueError(f"name must be a plain file name such as 'claims.yaml', got {name!r}")
    path = DATA / name
    if not path.is_file():
        available = ", ".join(sorted(p.name for p in DATA.iterdir() if p.is_file()))
        raise FileNotFoundError(f"no data file {name!r} in {DATA}; available: {available}")
    return path


def recorded(pattern: str) -> list[Path]:
    """The data files whose names match the glob ``pattern`` (``"gpu_rope_*.json"``), sorted."""
    return sorted(DATA.glob(pattern))


def bad_input_namespace() -> dict:
    """What a call of the bad-input catalogue (``bad_inputs.yaml``) can see: ``torch``, the
    library's public names (``posenc.__all__``) and the experiments' (``posenc.experiments.__all__``)."""
    import torch

    import posenc
    from posenc import experiments

    names = {name: getattr(posenc, name) for name in posenc.__all__}
    names.update({name: getattr(experiments, name) for name in experiments.__all__})
    return {"torch": torch, **names}
