"""The section index the claims ledger (chapter 10) links into.

Chapter 10 links every claim to the chapter section that decides it, with the section's
heading as the link text. The headings are read from the chapters' MyST sources when the
chapters are executed (``make notebooks``) and saved as ``data/sections.json``, so that the
ledger renders the same from any directory, on Colab or Binder, where the sources of the
other chapters are not at hand. A test checks the file against the sources.
"""

from __future__ import annotations

import json
import re

from .data import data_path

# TeX in headings, and what the link text shows instead
TEX = [("\\pi", "π"), ("\\cdot", "·"), ("\\text{base}", "base"), ("\\times", "×"), ("$", ""), ("`", "")]


def section_id(title: str) -> str:
    """The id Sphinx gives a heading: lower case, other characters turned into hyphens."""
    text = re.sub(r"[^a-z0-9]+", "-", title.replace("$", "").replace("`", "").lower())
    return re.sub(r"^[-0-9]+|-+$", "", text)


def section_titles(markdown: str) -> dict[str, str]:
    """``{section id: heading without TeX}`` of a chapter's MyST source, code cells left out."""
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    titles = {}
    for title in re.findall(r"^#{1,6} (.+)$", prose, re.M):
        plain = title
        for tex, text in TEX:
            plain = plain.replace(tex, text)
        titles[section_id(title)] = plain
    return titles


def chapter_sections() -> dict[str, dict[str, str]]:
    """``{chapter stem: {section id: heading}}`` for every chapter, as recorded."""
    return json.loads(data_path("sections.json").read_text(encoding="utf-8"))
