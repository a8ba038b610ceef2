"""``python -m posenc.hf path/to/config.json``: see :mod:`posenc.hf.cli`."""

import sys

from .cli import main

sys.exit(main())
