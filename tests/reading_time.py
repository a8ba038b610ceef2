"""Reading time of a chapter, as the intro's reading paths state it: prose at 180 words a
minute and visible code at 20 lines a minute, up to the exercises (which are not timed)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE = 180
CODE_LINES_PER_MINUTE = 20
HIDDEN = {"remove-cell", "remove-input", "hide-cell", "hide-input"}
CELL = re.compile(r"^```\{code-cell\} ipython3\n(.*?)^```\n", re.S | re.M)
MATH = re.compile(r"^\$\$\n.*?^\$\$\n", re.S | re.M)


def reading_minutes(stem: str) -> float:
    """Minutes to read chapter ``stem`` (``"06_rope"``) from its MyST twin, exercises excluded."""
    text = (ROOT / "book" / "md_src" / f"{stem}.md").read_text(encoding="utf-8")
    text = text.split("\n---\n", 1)[1]  # the jupytext header
    text = text.split("\n## Exercises\n", 1)[0]
    code_lines = 0
    for cell in CELL.finditer(text):
        body = cell.group(1)
        tags = set(re.findall(r"[\w-]+", "".join(re.findall(r"^(?::tags:|tags:) \[(.*)\]$", body, re.M))))
        body = re.sub(r"^---\n.*?^---\n", "", body, flags=re.S | re.M)
        body = re.sub(r"^:tags:.*\n", "", body, flags=re.M)
        if not tags & HIDDEN:
            code_lines += sum(1 for line in body.splitlines() if line.strip())
    prose = MATH.sub("", CELL.sub("", text))
    prose = re.sub(r"^```\{[^}]+\}.*$|^```$|^\+\+\+$", "", prose, flags=re.M)
    words = len(re.findall(r"[A-Za-z0-9][\w'’.-]*", prose))
    return words / WORDS_PER_MINUTE + code_lines / CODE_LINES_PER_MINUTE
