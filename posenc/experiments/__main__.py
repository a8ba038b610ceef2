"""``python -m posenc.experiments``: the command line of :mod:`posenc.experiments.cli`.

Ctrl-C while the command line loads, before any run, exits with status 130 and one line, as
:func:`posenc.experiments.cli.main` does during the runs (:func:`posenc._entry.run`).
"""

from .._entry import run

if __name__ == "__main__":
    run("posenc.experiments.cli", "python -m posenc.experiments", "; nothing was written")
