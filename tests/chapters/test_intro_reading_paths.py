"""The intro's reading paths: each stated time is the reading time of the chapters it lists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from reading_time import ROOT, reading_minutes

ROW = re.compile(r"^\| (?P<path>[^|]+) \| (?P<chapters>[^|]+) \| about (?P<time>[^|]+) \| [^|]+ \|$", re.M)


def _minutes(text: str) -> int:
    hours = re.search(r"(\d+) h", text)
    minutes = re.search(r"(\d+) min", text)
    return (int(hours.group(1)) * 60 if hours else 0) + (int(minutes.group(1)) if minutes else 0)


def numbered_chapters() -> list[str]:
    """The chapters of the toc's core part, "Chapters" (the ledger is a reference page, and the
    "Going further" chapters lie outside the reading paths)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [
        Path(c["file"]).name for part in toc["parts"] if part.get("caption") == "Chapters" for c in part["chapters"]
    ]


def _paths(page: str) -> list[tuple[str, list[str], int]]:
    text = (ROOT / page).read_text(encoding="utf-8")
    section = text.split("## Reading paths", 1)[1].split("\n## ", 1)[0]
    chapters = numbered_chapters()
    rows = []
    for row in ROW.finditer(section):
        named = [n for n in re.findall(r"\]\((\w+)\)", row["chapters"]) if n in chapters]
        rows.append((row["path"], named or chapters, _minutes(row["time"])))
    return rows


def test_the_intro_has_three_paths_each_ending_with_everything():
    paths = _paths("book/intro.md")
    assert [p for p, _, _ in paths] == ["RoPE only", "practitioner", "everything"]
    assert paths[-1][1] == numbered_chapters() and len(paths[-1][1]) >= 12


@pytest.mark.parametrize("path, chapters, stated", _paths("book/intro.md"))
def test_each_stated_time_is_the_chapters_reading_time(path, chapters, stated):
    measured = sum(reading_minutes(stem) for stem in chapters)
    assert abs(stated - measured) <= max(5, 0.05 * measured), f"{path}: stated {stated} min, measured {measured:.0f}"
