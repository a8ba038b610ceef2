"""``python -m posenc.hf path/to/config.json``: see :mod:`posenc.hf.cli`.

Ctrl-C while it reads or prints exits with status 130 and one line (:func:`posenc._entry.run`).
"""

from .._entry import run

if __name__ == "__main__":
    run("posenc.hf.cli", "python -m posenc.hf")
