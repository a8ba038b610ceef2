"""The ``python -m`` entry points' one rule: Ctrl-C exits with status 130 and one line.

:func:`run` imports the command line's module and calls its ``main`` inside one ``try``, so
that a Ctrl-C while the command line loads (it imports the rest of the package) ends as
one during the work does, without a ``KeyboardInterrupt`` traceback. Python imports the
package ``posenc`` (and torch with it) before the entry point runs: a Ctrl-C in that first
second is Python's own, a traceback and status 130 by signal, as for any ``-m`` tool.
"""

from __future__ import annotations

import importlib
import sys


def run(module: str, prog: str, after: str = "") -> None:
    """Exit with ``module.main()``'s status, or 130 and ``"<prog> interrupted<after>"`` on Ctrl-C."""
    try:
        status = importlib.import_module(module).main()
    except KeyboardInterrupt:
        print(f"{prog} interrupted{after}", file=sys.stderr)
        status = 130
    sys.exit(status)
