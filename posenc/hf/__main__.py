"""``python -m posenc.hf path/to/config.json``: see :mod:`posenc.hf.cli`.

Ctrl-C while it reads or prints exits with status 130 and one line, no traceback.
"""

import sys

if __name__ == "__main__":
    try:
        from .cli import main

        status = main()
    except KeyboardInterrupt:
        print("python -m posenc.hf interrupted", file=sys.stderr)
        status = 130
    sys.exit(status)
