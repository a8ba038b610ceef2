"""pip as a reader's machine runs it: the public package index only, for a given Python.

Shared by ``lock_requirements.py`` (which pins) and ``check_index.py`` (which checks the
pins). This machine's pip configuration, local wheel directories and mirrors are switched
off: no ``PIP_*`` variables and ``PIP_CONFIG_FILE=/dev/null``. The resolver is asked about
an x86-64 Linux machine with the given Python version (``3.11`` means 3.11.0, so a pin
that needs 3.11.5 is caught), wheels only. Downloads are cached in ``_build/pip-cache``,
since this index serves no separate metadata and pip must fetch a wheel to read its
dependencies.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / "pip-cache"
# Every manylinux baseline up to glibc 2.28, as on any current x86-64 Linux.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(5, 29)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
]


def public_index_env() -> dict[str, str]:
    """The environment of a machine that knows only the public index."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_CACHE_DIR=str(CACHE),
        # an extra index that cannot be reached (PyTorch's CPU index, from here) is skipped at once
        PIP_RETRIES="0",
    )
    return env


def dry_run(args: list[str], python: str, report: Path | None = None) -> subprocess.CompletedProcess:
    """``pip install --dry-run`` of ``args`` for Python ``python`` (``"3.11"``) on x86-64 Linux."""
    with tempfile.TemporaryDirectory() as target:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--python-version",
            python,
            "--only-binary=:all:",
            *(f"--platform={p}" for p in PLATFORMS),
            "--target",
            target,
            *(["--report", str(report)] if report else []),
            *args,
        ]
        return subprocess.run(cmd, cwd=ROOT, env=public_index_env(), capture_output=True, text=True)
