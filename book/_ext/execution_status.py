"""The ``execution-status`` directive: what the last runs of the chapters did, from the
records that ``scripts/run_status.py`` writes after each run of ``make test``
(``_build/status/*.json``, or the folder ``POSENC_STATUS`` names).

Two tables: every chapter of every edition with its last run's result and wall time, then
the runs themselves (date, versions, CPU kernel set). Nothing is typed by hand; without a
record the page says so. The page is read again at every build, so it never shows an
older build's records.

In a translated edition the directive's content gives the page's words, one ``key = text``
per line (the keys of ``WORDS``); a key left out is a build warning, which fails ``-W``.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from repository import script
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]
LOGGER = logging.getLogger(__name__)

#: The page's words in English; a translated page gives all of them.
WORDS = {
    "none": (
        "This copy of the site was built by `make book` alone, which builds the pages without "
        "running the tests, so there is no run to show. `make test` runs every chapter of every "
        "edition, records each run and builds the site again; the published site is built that "
        "way and shows its results here."
    ),
    "chapter": "chapter",
    "passed": "passed",
    "failed": "failed",
    "not run": "not run",
    "cells": "cells",
    "run": "run",
    "edition": "edition",
    "date": "started (UTC)",
    "kernels": "CPU kernels",
    "result": "result",
    "native": "native",
    "forced": "forced",
    "no report": "left no report",
    "check": "chapter 12 with Triton hidden",
    "notebooks": "notebooks",
    "versions": "versions",
}


#: Each edition's name, a column of the chapter table (editions.yaml; a translated page gives its own).
WORDS.update({e.key: e.english for e in script("manifest").editions()})


def status_folder() -> Path:
    return Path(os.environ.get("POSENC_STATUS") or ROOT / "_build" / "status")


def load_records(folder: Path) -> list[dict]:
    return script("run_status").load_records(folder)


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def when(iso: str) -> str:
    try:
        moment = datetime.datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return str(iso)
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M")


VERSIONS = (("Python", "python"), ("torch", "torch"), ("transformers", "transformers"), ("Triton", "triton"))


def kernels(record: dict, words: dict) -> str:
    k = record.get("kernels", {})
    used = k.get("used", "?")
    # forced: set by ATEN_CPU_CAPABILITY (the page says how each run sets it); no code span, which
    # would not wrap and would widen the table past the column
    return f"{used} ({words['forced'] if k.get('forced') else words['native']})"


def latest(records: list[dict]) -> dict[tuple[str, str], tuple[dict, dict]]:
    """{(edition, chapter): (notebook entry, its run)} from the newest full run of each."""
    found = {}
    for run in records:  # oldest first: a newer run replaces an older one
        if run.get("kind", "chapters") != "chapters":
            continue
        for entry in run.get("notebooks", []):
            found[entry["edition"], entry["notebook"]] = (entry, run)
    return found


def outcome(entry: dict, words: dict) -> str:
    if entry["result"] == "passed":
        return f"{words['passed']}, {duration(entry['seconds'])}"
    cells = ", ".join(str(f["cell"]) for f in entry["failed"])
    return f"**{words['failed']}** ({words['cells']} {cells}), {duration(entry['seconds'])}"


def chapter_table(chapters: list[str], records: list[dict], words: dict) -> list[str]:
    found = latest(records)
    editions = [e.key for e in script("manifest").editions()]
    lines = [
        "| " + " | ".join([words["chapter"], *(words[e] for e in editions)]) + " |",
        "|" + "---|" * (1 + len(editions)),
    ]
    for stem in chapters:
        cells = []
        for edition in editions:
            entry = found.get((edition, stem))
            cells.append(outcome(entry[0], words) + f" ({entry[1]['run']})" if entry else words["not run"])
        lines.append(f"| [{script('manifest').chapter_number(stem)}]({stem}) | " + " | ".join(cells) + " |")
    return lines


def run_table(records: list[dict], words: dict) -> list[str]:
    # six columns, the versions in one cell that wraps, so that the table fits the column at 1280 px
    heads = ("run", "edition", "result", "date", "kernels", "versions")
    lines = ["| " + " | ".join(words[h] for h in heads) + " |", "|" + "---|" * len(heads)]
    for run in records:
        notebooks = run.get("notebooks", [])
        failed = [n["notebook"] for n in notebooks if n["result"] == "failed"]
        if "error" in run:
            result = f"**{words['no report']}**"
        elif failed:
            result = f"**{words['failed']}**: " + ", ".join(failed)
        else:
            result = words["passed"]
        name = f"`{run['run']}`" + (f" ({words['check']})" if run.get("kind") == "check" else "")
        row = [
            name,
            words.get(run.get("edition") or "", run.get("edition") or ""),
            f"{result} ({len(notebooks)} {words['notebooks']})",
            when(run.get("date")),
            kernels(run, words),
            ", ".join(f"{name} {run.get(k, '?')}" for name, k in VERSIONS),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines


class ExecutionStatus(SphinxDirective):
    has_content = True

    def run(self):
        self.env.posenc_status_docs = getattr(self.env, "posenc_status_docs", set()) | {self.env.docname}
        words = dict(WORDS)
        given = dict(line.split(" = ", 1) for line in self.content if " = " in line)
        if given:
            for key in WORDS.keys() - given.keys():
                LOGGER.warning("execution-status: no translation of %r", key, location=self.get_location())
            words.update(given)
        records = load_records(status_folder())
        if not records:
            lines = [words["none"]]
        else:
            chapters = script("manifest").chapter_stems()
            lines = [*chapter_table(chapters, records, words), "", *run_table(records, words)]
        container = nodes.container(classes=["execution-status"])
        self.state.nested_parse(StringList(lines, source="execution-status"), self.content_offset, container)
        return [container]


def _always_read(app, env, added, changed, removed):
    """The page shows the newest records: read it again at every build."""
    return sorted(getattr(env, "posenc_status_docs", set()) - removed)


def _merge(app, env, docnames, other):
    env.posenc_status_docs = getattr(env, "posenc_status_docs", set()) | getattr(other, "posenc_status_docs", set())


def setup(app):
    app.add_directive("execution-status", ExecutionStatus)
    app.connect("env-get-outdated", _always_read)
    app.connect("env-merge-info", _merge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
