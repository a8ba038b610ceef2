"""``python -m posenc.experiments``: the command line of :mod:`posenc.experiments.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
