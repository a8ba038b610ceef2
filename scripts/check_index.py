"""Check that every requirements file resolves from the public package index alone.

Usage: python scripts/check_index.py

This machine may have its own pip configuration, local wheel directories or mirrors; a
reader's machine has only the public index. pip's resolver runs in dry-run mode with all
of those switched off (``public_index.py``), on ``requirements-test.txt`` for each Python
the book supports: 3.11.0, the oldest, and 3.12, Colab's and the second CI job's.

``requirements.txt`` and ``binder/requirements.txt`` pin subsets of the same versions. For
them, and for Colab's install (``posenc[book]`` next to Colab's own torch), the check uses
the dependency metadata pip just read from the index: every dependency of every pinned
package (for that Python, on x86-64 Linux) must itself be pinned in the same file, at a
version that satisfies it. A file closed in this way resolves to exactly its pins, with no
download: each resolver run here fetches about 3 GB of torch's CUDA wheels to read their
metadata, since the index serves no separate metadata files. torch's CUDA runtime
(``nvidia-*``, ``cuda-*``, Triton) comes from the torch build and was resolved in step one.

Exits 1 and says what is wrong if anything fails.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from public_index import ROOT, dry_run

PYTHONS = ["3.11", "3.12"]
FULL = "requirements-test.txt"
SUBSETS = ["requirements.txt", "binder/requirements.txt"]
TORCH_RUNTIME = re.compile(r"^(nvidia-.*|cuda-.*|triton)$")


def pins(path: Path) -> dict[str, str]:
    """``{canonical name: version}`` of a requirements file's ``name==version`` lines."""
    found = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if match:
            found[canonicalize_name(match.group(1))] = match.group(2)
    return found


def environment(python: str) -> dict[str, str]:
    """Marker values of an x86-64 Linux machine with the given Python."""
    env = default_environment()
    env.update(
        python_version=python,
        python_full_version=f"{python}.0",
        sys_platform="linux",
        platform_system="Linux",
        platform_machine="x86_64",
        os_name="posix",
        implementation_name="cpython",
        platform_python_implementation="CPython",
    )
    return env


def applies(req: Requirement, env: dict[str, str], extras: tuple[str, ...] = ("",)) -> bool:
    return req.marker is None or any(req.marker.evaluate({**env, "extra": extra}) for extra in extras)


def resolve(python: str) -> tuple[str, dict | None, str, float]:
    """Dry-run ``requirements-test.txt`` for ``python``; the report's metadata, or pip's error."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        proc = dry_run(["-r", FULL], python, report)
        metadata = None
        if proc.returncode == 0:
            metadata = {
                canonicalize_name(item["metadata"]["name"]): item["metadata"]
                for item in json.loads(report.read_text())["install"]
            }
    errors = "\n".join(line for line in proc.stderr.splitlines() if "WARNING" not in line)
    return python, metadata, errors, time.perf_counter() - start


def unmet(requirements: list[Requirement], pinned: dict[str, str], env: dict[str, str], extras=("",)) -> list[str]:
    """The requirements that the pins leave open: not pinned, or pinned at a version outside the range."""
    problems = []
    for req in requirements:
        name = canonicalize_name(req.name)
        if not applies(req, env, extras) or TORCH_RUNTIME.match(name) or name == "posenc":
            continue
        if name not in pinned:
            problems.append(f"{req} is not pinned")
        elif not req.specifier.contains(pinned[name], prereleases=True):
            problems.append(f"{req} but {name}=={pinned[name]} is pinned")
    return problems


def closed(path: str, metadata: dict, python: str) -> list[str]:
    """Why ``path`` would not resolve to its pins on ``python``, from the resolved metadata."""
    env, pinned, problems = environment(python), pins(ROOT / path), []
    for name, version in pinned.items():
        meta = metadata.get(name)
        if meta is None:
            problems.append(f"{name}=={version} is not part of the resolved test environment")
            continue
        if meta["version"] != version:
            problems.append(f"{name}=={version}, while the resolver chose {meta['version']}")
        reqs = [Requirement(r) for r in meta.get("requires_dist", [])]
        problems += [f"{name} requires {p}" for p in unmet(reqs, pinned, env)]
    return problems


def colab(metadata: dict) -> list[str]:
    """posenc[book] next to Colab's torch: its requirements met by Binder's pins (the book extra) on 3.12."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        return []
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["book"]]
    return unmet(reqs, pins(ROOT / "binder/requirements.txt"), environment("3.12"), ("", "book"))


def main() -> int:
    with ThreadPoolExecutor(max_workers=len(PYTHONS)) as pool:
        results = list(pool.map(resolve, PYTHONS))
    failed = 0
    for python, metadata, errors, seconds in results:
        label = f"{FULL} on Python {python}"
        if metadata is None:
            failed += 1
            print(f"FAIL {label}: pip's resolver ({seconds:.0f} s)")
            print("\n".join("     " + line for line in errors.splitlines()[-15:]))
            continue
        print(f"ok   {label}: pip's resolver, {len(metadata)} distributions ({seconds:.0f} s)")
        checks = [(f"{path} on Python {python}", closed(path, metadata, python)) for path in SUBSETS]
        if python == "3.12":
            checks.append(("posenc[book] with Colab's torch, on Python 3.12", colab(metadata)))
        for what, problems in checks:
            print(f"{'FAIL' if problems else 'ok  '} {what}: every dependency pinned and met")
            failed += bool(problems)
            for problem in problems[:15]:
                print("     " + problem)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
