"""Regenerate everything derived from the book's sources, in order; or say what is stale.

    python scripts/generate.py           # every step below, in this order (make notebooks)
    python scripts/generate.py --check   # each step's --check; exit 1 naming the stale steps

Each generated file has one writer, one of these steps:

1. ``claim_tests.py``: the ``test:`` fields of ``claims.yaml``, from the tests' claim markers;
2. ``sync_repo_url.py``: what derives from the repository URL (README, the install cells);
3. ``fold_checks.py``: assert-only cells and plotting code folded in the MyST twins;
4. ``run_notebooks.py``: each chapter run top to bottom, its notebook and twin in sync, and
   ``sections.json`` (the headings the ledger links to);
5. ``editions.py``: the translated editions, their configs, sections and ledgers.

A step runs only after the ones before it succeeded: a later step reads what an earlier
one wrote (the ledger's tests, the twins, the English notebooks).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: (script, what it writes), in the order they run.
STEPS = (
    ("claim_tests.py", "the ledger's test fields"),
    ("sync_repo_url.py", "what derives from the repository URL"),
    ("fold_checks.py", "folded checks and plotting code"),
    ("run_notebooks.py", "the chapters' outputs and sections.json"),
    ("editions.py", "the translated editions"),
)


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("usage: python scripts/generate.py [--check]", file=sys.stderr)
        return 2
    stale = []
    for script, what in STEPS:
        command = [sys.executable, str(ROOT / "scripts" / script), *argv]
        done = subprocess.run(command, cwd=ROOT, env=os.environ, capture_output=bool(argv), text=True)
        if done.returncode != 0:
            if not argv:
                print(f"scripts/{script} failed (status {done.returncode}); the steps after it did not run")
                return done.returncode
            stale.append(f"scripts/{script} ({what}): {(done.stdout + done.stderr).strip()[-1500:]}")
    if argv:
        print("\n".join(stale) or "nothing generated is stale")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
