"""The ledger's tests, found by their marker: ``@pytest.mark.claim("004-19")`` on the test decides claim 004-19.

The marker is where a claim's test is declared; the ``test:`` field of each claim in
``posenc_book/data/claims.yaml`` (the node id the ledger page shows) is written from the
markers by this script, so that a test can move to another file, or be renamed, and the
ledger follows::

    python scripts/claim_tests.py           # rewrite the test: fields from the markers
    python scripts/claim_tests.py --check   # exit 1, naming them, if any field is stale

A claim is decided by one test at most; a marker that names no claim of the ledger, or a claim
marked by two tests, is an error (exit 2). Claims without a marked test keep ``test: null``.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ROOT / "posenc_book" / "data" / "claims.yaml"
ID_LINE = re.compile(r'^- id: "([^"]+)"$')
TEST_LINE = re.compile(r"^  test: .*$")


def _claim_ids(decorator: ast.expr) -> list[str] | None:
    """The ids of ``pytest.mark.claim("a", "b")``, or None for any other decorator."""
    if not isinstance(decorator, ast.Call):
        return None
    name = decorator.func
    parts = []
    while isinstance(name, ast.Attribute):
        parts.append(name.attr)
        name = name.value
    if not (isinstance(name, ast.Name) and [name.id, *reversed(parts)] == ["pytest", "mark", "claim"]):
        return None
    return [arg.value for arg in decorator.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]


def marked_tests(root: Path = ROOT) -> dict[str, list[str]]:
    """``{claim id: [node ids of the tests marked with it]}`` for every test module under ``tests/``."""
    found: dict[str, list[str]] = {}
    for path in sorted((root / "tests").rglob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    for claim in _claim_ids(decorator) or ():
                        found.setdefault(claim, []).append(f"{path.relative_to(root).as_posix()}::{node.name}")
    return found


def written(text: str, marked: dict[str, list[str]]) -> str:
    """``claims.yaml``'s text with every claim's ``test:`` line set from ``marked``."""
    out, claim = [], None
    for line in text.splitlines(keepends=True):
        match = ID_LINE.match(line.rstrip("\n"))
        if match:
            claim = match.group(1)
        elif claim is not None and TEST_LINE.match(line.rstrip("\n")):
            line = f"  test: {marked[claim][0] if claim in marked else 'null'}\n"
        out.append(line)
    return "".join(out)


def problems(text: str, marked: dict[str, list[str]]) -> list[str]:
    """What no rewrite can fix: a claim marked by two tests, a marker naming no claim of the ledger."""
    ids = set(re.findall(r'^- id: "([^"]+)"$', text, re.M))
    found = [f"claim {c} is marked by {len(t)} tests: {', '.join(t)}" for c, t in marked.items() if len(t) > 1]
    found += [f"{t[0]} is marked with claim {c}, not in the ledger" for c, t in marked.items() if c not in ids]
    return found


def outcome_problems(outcomes: dict[str, set[str]], marked: dict[str, list[str]]) -> list[str] | None:
    """For a test run: ``outcomes`` maps each claim test's node id (parameters dropped) to the outcomes
    its cases reported. None if the run left out a marked test (a partial run says nothing), else one
    line per marked test that did not pass every case (a skipped one decides nothing)."""
    expected = {test for tests in marked.values() for test in tests}
    if not expected <= outcomes.keys():
        return None
    return [
        f"{test}: {', '.join(sorted(outcomes[test] - {'passed'}))}"
        for test in sorted(expected)
        if outcomes[test] != {"passed"}
    ]


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("usage: python scripts/claim_tests.py [--check]", file=sys.stderr)
        return 2
    text = CLAIMS.read_text(encoding="utf-8")
    marked = marked_tests()
    errors = problems(text, marked)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2
    new = written(text, marked)
    if new == text:
        print("the ledger's tests agree with their markers")
        return 0
    if argv == ["--check"]:
        stale = [a for a, b in zip(text.splitlines(), new.splitlines(), strict=True) if a != b]
        print(f"{len(stale)} test: field(s) of claims.yaml differ from the markers; run python scripts/claim_tests.py")
        return 1
    CLAIMS.write_text(new, encoding="utf-8")
    print(f"{CLAIMS.relative_to(ROOT)} written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
