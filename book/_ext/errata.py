"""The ``errata`` directive: every correction to a published statement, from one data file
(``posenc_book/data/errata.yaml``; the Traditional edition reads its converted copy).

One row per correction: the page, what was said, what is right, and the first version that
carries the correction. ``:lang: zh`` takes each entry's ``zh`` texts; the directive's
content then gives the page's words, one ``key = text`` per line (the keys of ``WORDS``), and
a key left out is a build warning, which fails ``-W``. So is an entry without its texts or
with a page that does not exist.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml
from docutils import nodes
from docutils.statemachine import StringList
from repository import script
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]
LOGGER = logging.getLogger(__name__)

WORDS = {
    "page": "page",
    "said": "what it said",
    "right": "what is right",
    "since": "corrected in",
    "unreleased": "the next release (in this build)",
    "chapter": "chapter {n}",
    "intro": "introduction",
    "13_claims": "claims ledger",
    "glossary": "glossary",
    "none": "No published statement has been corrected.",
}


def one_line(text: str) -> str:
    return " ".join(str(text).split())


class Errata(SphinxDirective):
    required_arguments = 1  # the data file, relative to the repository root
    has_content = True
    option_spec = {"lang": lambda text: text.strip()}

    def run(self):
        path = ROOT / self.arguments[0]
        self.env.note_dependency(str(path))
        lang = self.options.get("lang")
        words = dict(WORDS)
        given = dict(line.split(" = ", 1) for line in self.content if " = " in line)
        if lang:
            for key in WORDS.keys() - given.keys():
                LOGGER.warning("errata: no translation of %r", key, location=self.get_location())
        words.update(given)
        entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        lines = [
            "| " + " | ".join(words[k] for k in ("page", "said", "right", "since")) + " |",
            "|---|---|---|---|",
        ]
        for entry in entries:
            texts = entry.get(lang, {}) if lang else entry
            said, right = texts.get("said"), texts.get("right")
            page = entry.get("page", "")
            if not said or not right or f"book/{page}" not in self.env.found_docs:
                LOGGER.warning("errata: entry %r lacks its texts or its page", entry, location=self.get_location())
                continue
            if "|" in said + right:
                LOGGER.warning("errata: '|' in an entry breaks the table: %r", entry, location=self.get_location())
            manifest = script("manifest")
            number = manifest.chapter_number(page) if page in manifest.chapter_stems() else None
            title = words.get(page) or (words["chapter"].format(n=number) if number else page)
            since = words["unreleased"] if entry["since"] == "unreleased" else entry["since"]
            lines.append(f"| [{title}]({page}) | {one_line(said)} | {one_line(right)} | {since} |")
        if len(lines) == 2:
            lines = [words["none"]]
        container = nodes.container(classes=["errata"])
        self.state.nested_parse(StringList(lines, source=str(path)), self.content_offset, container)
        return [container]


def setup(app):
    app.add_directive("errata", Errata)
    # a change to this file's words or rendering re-reads every page that uses it
    version = int(hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:8], 16)
    return {"env_version": version, "parallel_read_safe": True, "parallel_write_safe": True}
