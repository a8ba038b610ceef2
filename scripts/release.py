"""Versions and releases: the book and the package share one version number.

Usage:
  python scripts/release.py prepare X.Y.Z [--date YYYY-MM-DD]   before tagging vX.Y.Z
  python scripts/release.py check vX.Y.Z                        the release workflow's first step
  python scripts/release.py notes X.Y.Z                         the changelog's section, for the release

The version follows Semantic Versioning and lives in ``posenc/_version.py`` (the package),
``pyproject.toml``, ``CITATION.cff`` (with its release date) and the changelog's heading
``## X.Y.Z (YYYY-MM-DD)``; ``.zenodo.json`` gives Zenodo the rest of the metadata, and
Zenodo takes the version from the release, so each release gets its own DOI. ``prepare``
writes the version into all of them, turns the changelog's "Unreleased" section into the
release's and the errata's ``since: unreleased`` into the version. ``check`` exits 1,
naming each file that disagrees with the tag.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSION = re.compile(r"\d+\.\d+\.\d+")


def versions(root: Path = ROOT) -> dict[str, str | None]:
    """{file: the version it states}."""

    def find(path: str, pattern: str) -> str | None:
        found = re.search(pattern, (root / path).read_text(encoding="utf-8"), re.M)
        return found.group(1) if found else None

    return {
        "posenc/_version.py": find("posenc/_version.py", r'^__version__ = "([^"]+)"'),
        "pyproject.toml": find("pyproject.toml", r'^version = "([^"]+)"'),
        "CITATION.cff": find("CITATION.cff", r'^version: "([^"]+)"'),
        "CHANGELOG.md": find("CHANGELOG.md", r"^## (\d+\.\d+\.\d+) \(\d{4}-\d\d-\d\d\)$"),
    }


def check(tag: str, root: Path = ROOT) -> list[str]:
    """What disagrees with the tag ``vX.Y.Z``; empty when the release may go ahead."""
    if not re.fullmatch(r"v\d+\.\d+\.\d+", tag):
        return [f"the tag {tag!r} is not vX.Y.Z"]
    wanted = tag[1:]
    problems = [f"{path} says {found}, the tag {wanted}" for path, found in versions(root).items() if found != wanted]
    zenodo = json.loads((root / ".zenodo.json").read_text(encoding="utf-8"))
    if "version" in zenodo:
        problems.append(".zenodo.json names a version: Zenodo takes it from the release")
    if re.search(r"^  since: unreleased$", (root / "posenc_book/data/errata.yaml").read_text(encoding="utf-8"), re.M):
        problems.append("posenc_book/data/errata.yaml has corrections since 'unreleased'")
    return problems


def notes(version: str, root: Path = ROOT) -> str:
    """The changelog's section of ``version``, without its heading."""
    text = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    found = re.search(rf"^## {re.escape(version)} \(.*?\)\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not found:
        raise SystemExit(f"CHANGELOG.md has no section '## {version} (date)'")
    return found.group(1).strip() + "\n"


def prepare(version: str, date: str, root: Path = ROOT) -> None:
    """Write ``version`` (released on ``date``) everywhere it is stated."""
    if not VERSION.fullmatch(version):
        raise SystemExit(f"{version!r} is not X.Y.Z")
    edits = {
        "posenc/_version.py": [(r'^__version__ = "[^"]+"', f'__version__ = "{version}"')],
        "pyproject.toml": [(r'^version = "[^"]+"', f'version = "{version}"')],
        "CITATION.cff": [
            (r'^version: "[^"]+"', f'version: "{version}"'),
            (r'^date-released: "[^"]+"', f'date-released: "{date}"'),
        ],
        "CHANGELOG.md": [(r"^## Unreleased$", f"## Unreleased\n\n## {version} ({date})")],
        "posenc_book/data/errata.yaml": [(r"^  since: unreleased$", f'  since: "{version}"')],
    }  # fmt: skip
    for path, subs in edits.items():
        text = (root / path).read_text(encoding="utf-8")
        for pattern, new in subs:
            text = re.sub(pattern, new, text, flags=re.M)
        (root / path).write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare")
    prep.add_argument("version")
    prep.add_argument("--date", default=datetime.date.today().isoformat())
    sub.add_parser("check").add_argument("tag")
    sub.add_parser("notes").add_argument("version")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.version, args.date)
        print(f"{args.version} written; then python scripts/editions.py, commit, and tag v{args.version}")
        return 0
    if args.command == "notes":
        sys.stdout.write(notes(args.version))
        return 0
    problems = check(args.tag)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
