"""``python -m posenc.experiments``: the command line of :mod:`posenc.experiments.cli`.

Ctrl-C while the command line loads, before any run, exits with status 130 and one line, as
:func:`posenc.experiments.cli.main` does during the runs (no ``KeyboardInterrupt`` traceback).
Python imports the package ``posenc`` (and torch with it) before this module runs: a Ctrl-C in
that first second is Python's own, a traceback and status 130 by signal, as for any ``-m`` tool.
"""

import sys

if __name__ == "__main__":
    try:
        from .cli import main

        status = main()
    except KeyboardInterrupt:
        print("python -m posenc.experiments interrupted; nothing was written", file=sys.stderr)
        status = 130
    sys.exit(status)
