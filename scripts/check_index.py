"""Check that every requirements file resolves from the public package index alone.

Usage: python scripts/check_index.py

This machine may have its own pip configuration, local wheel directories or mirrors; a
reader's machine has only the public index. pip's resolver runs in dry-run mode with all
of those switched off (no PIP_* variables, PIP_CONFIG_FILE=/dev/null), for each file and
for each Python the book supports: 3.11, the version the pins are made with, and 3.12, the
version of Colab and of the second CI job. Colab's own install, ``posenc[book]`` from the
repository, is resolved too. Exits 1 and prints pip's error if any fails. How pip is run
is in ``public_index.py``.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

from public_index import dry_run

FILES = ["requirements.txt", "requirements-test.txt", "binder/requirements.txt"]
PYTHONS = ["3.11", "3.12"]


def resolve(label: str, args: list[str], python: str) -> tuple[str, bool, str, float]:
    start = time.perf_counter()
    proc = dry_run(args, python)
    errors = [line for line in proc.stderr.splitlines() if "WARNING" not in line and "Retrying" not in line]
    return f"{label} on Python {python}", proc.returncode == 0, "\n".join(errors), time.perf_counter() - start


def main() -> int:
    jobs = [(f, ["-r", f], py) for f in FILES for py in PYTHONS]
    # what a chapter's first cell installs on Colab (the package is built from this checkout)
    jobs.append(("posenc[book] (Colab)", [".[book]"], "3.12"))
    # the largest set first and alone: it fills the download cache the others then read
    results = [resolve(*jobs[2])]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results += list(pool.map(lambda job: resolve(*job), jobs[:2] + jobs[3:]))
    failed = 0
    for label, ok, errors, seconds in results:
        print(f"{'ok  ' if ok else 'FAIL'} {label} ({seconds:.0f} s)")
        if not ok:
            failed += 1
            print("\n".join("     " + line for line in errors.splitlines()[-15:]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
