"""The claims ledger (``13_claims``): the section index it links into, and its rendering.

The ledger links every claim to the chapter section that decides it, with the section's
heading as the link text. The headings are read from the chapters' MyST sources when the
chapters are executed (``make notebooks``) and saved as ``data/sections.json``, so that the
ledger renders the same from any directory, on Colab or Binder, where the sources of the
other chapters are not at hand. A test checks the file against the sources.

Each claim is rendered as one block (:func:`claim_block`): the document's own words and their
translation, the claim as checked, the verdict, the reason, and what decides it: a chapter
section, a test, a cited source.
"""

from __future__ import annotations

import html
import json
import re
from functools import partial

from .data import data_path
from .i18n import TABLE_WORDS, claim_texts, language, source_name, word

#: HTML-escape ``&``, ``<`` and ``>`` (quotes are left alone).
_escape = partial(html.escape, quote=False)

# TeX in headings, and what the link text shows instead
TEX = [("\\pi", "π"), ("\\cdot", "·"), ("\\text{base}", "base"), ("\\times", "×"), ("$", ""), ("`", "")]


#: The ledger's own page (a reference page since the chapters became twelve).
LEDGER = "13_claims"


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


def chapter_sections(lang: str | None = None) -> dict[str, dict[str, str]]:
    """``{chapter stem: {section id: heading}}`` for every chapter, as recorded.

    The headings are in the language of the edition (``posenc_book.i18n.language()``);
    the section ids are the English edition's, which the Chinese editions keep as anchors.
    """
    lang = lang or language()
    name = "sections.json" if lang == "en" else f"sections.{lang}.json"
    return json.loads(data_path(name).read_text(encoding="utf-8"))


# The claims ledger, rendered: one block per claim -------------------------------------------------------

#: Author-and-year labels of the sources the ledger's ``source`` fields name (keys of book/references.bib).
SOURCES = {
    "bengio1994learning": "Bengio et al., 1994",
    "brown2020gpt3": "Brown et al., 2020",
    "dai2019transformerxl": "Dai et al., 2019",
    "gehring2017convs2s": "Gehring et al., 2017",
    "haviv2022nope": "Haviv et al., 2022",
    "press2022alibi": "Press et al., 2022",
    "shaw2018self": "Shaw et al., 2018",
    "tfmodelgarden2024positionalencoding": "TensorFlow Model Garden documentation, 2024",
    "vaswani2017attention": "Vaswani et al., 2017",
}

#: The colour of each verdict, in the blocks' borders and in the ledger's bar chart.
VERDICT_COLOURS = {"correct": "#4d9221", "wrong": "#c51b7d", "imprecise": "#e08214", "untestable": "#8c8c8c"}
#: The verdict's word in these colours has a contrast of at least 4.5:1 (WCAG AA for text)
#: on white and on the light grey that the site puts behind HTML output in dark mode
#: (#ced6dd). The word itself says the verdict, so colour is never the only sign of it.
VERDICT_TEXT_COLOURS = {"correct": "#2f5a12", "wrong": "#a0155f", "imprecise": "#7f3d00", "untestable": "#555555"}
#: The backgrounds the verdict words appear on (light mode, and HTML output in dark mode).
VERDICT_BACKGROUNDS = ("#ffffff", "#ced6dd")


#: The source documents written in Traditional characters; the others are Simplified.
TRADITIONAL_SEEDS = ("000", "001")


def _location(text: str) -> str:
    """A claim's place in its document, with "line 3" / "lines 14-17" in the edition's words."""
    return re.sub(
        r"\b(lines?) (\d+(?:[-–]\d+)?)", lambda m: word(m.group(1)).format(n=m.group(2).replace("-", "–")), text
    )


def first_line(claim: dict) -> int:
    """The line of the seed file where a claim's quote starts, read from its ``location``."""
    return int(re.search(r"lines? (\d+)", claim["location"]).group(1))


def decided_by(claim: dict, sections: dict[str, dict[str, str]]) -> str:
    """HTML: the chapter section that decides a claim, linked, then its test and its source."""
    stem, _, anchor = claim["chapter"].partition("#")
    if claim.get("pending"):
        return word("pending").format(stem=stem)  # not in the table of contents yet: no number
    number = list(sections).index(stem) + 1  # its place in the book: sections.json is in the manifest's order
    title = _escape(sections[stem].get(anchor, ""))
    # the ledger is a reference page, not a numbered chapter: its own sections are "this page"
    label = word("ledger") if stem == LEDGER else word("chapter").format(number=number)
    parts = [f'<a href="{stem}.html#{anchor}">{label}{title}</a>']
    if claim["test"]:
        test = _escape(claim["test"]).replace("_", "_<wbr>").replace("::", "::<wbr>")
        parts.append(f"{word('test')} <code>{test}</code>")
    if claim.get("source"):
        parts.append(f"{word('source')} {_escape(SOURCES.get(claim['source'], claim['source']))}")
    return " · ".join(parts)


def claim_block(claim: dict, sections: dict[str, dict[str, str]]) -> str:
    """HTML for one claim: the quote and its translation, the claim checked, the verdict, why, what decides it.

    In a Chinese edition the claim, the reason and the labels are in its language, and the
    English translation of the quote is left out.
    """
    lang = language()
    texts = claim if lang == "en" else claim_texts(lang)[claim["id"]]
    colour = VERDICT_COLOURS[claim["verdict"]]
    head = (
        f"<b>{claim['id']}</b> · <small>{_escape(_location(claim['location']))}</small> · "
        f'<b class="verdict verdict-{claim["verdict"]}" '
        f'style="color: {VERDICT_TEXT_COLOURS[claim["verdict"]]}">{word(claim["verdict"])}</b>'
    )
    text = _escape(claim["quote"])
    if "\\" in claim["quote"] or "$" in claim["quote"]:  # the seed's TeX source, shown as written
        text = f"<code>{text}</code>"
    script = "zh-Hant" if claim.get("seed") in TRADITIONAL_SEEDS else "zh-Hans"  # its own script's glyphs
    quote = f'<div lang="{script}" style="margin: 0.3em 0; font-size: 1.05em">「{text}」</div>'
    translation = ""
    if lang == "en":
        translation = f'<div style="margin-bottom: 0.3em"><i>{_escape(claim["translation"])}</i></div>'
    checked = f"<div><b>{word('claim')}</b> {_escape(texts['claim'])}</div>"
    why = f"<details><summary>{word('why')}</summary>{_escape(texts['reason'])}</details>"
    where = f'<div style="font-size: 0.85em">{word("decided by")} {decided_by(claim, sections)}</div>'
    style = f"border-left: 4px solid {colour}; padding: 0.1em 0 0.1em 0.8em; margin: 0 0 1em 0"
    return f'<div id="claim-{claim["id"]}" style="{style}">{head}{quote}{translation}{checked}{why}{where}</div>'


def ledger_html(claims: list[dict], seed: str, sections: dict[str, dict[str, str]]) -> str:
    """HTML for one document's claims, in the order of its text."""
    ours = sorted((c for c in claims if c["seed"] == seed), key=lambda c: (first_line(c), c["id"]))
    return "".join(claim_block(c, sections) for c in ours)


def counts_table_html(claims: list[dict], lang: str | None = None) -> str:
    """The verdicts of ``claims`` counted per source document, as an HTML table in ``lang``.

    One row per document (by its short name), one column per verdict and the row's total,
    and a last row over all five documents.
    """
    lang = lang or language()
    verdicts = ["correct", "wrong", "imprecise", "untestable"]
    documents = sorted({c["seed"] for c in claims})
    words = TABLE_WORDS[lang]
    head = "".join(f"<th scope='col'>{_escape(word(v, lang))}</th>" for v in verdicts)
    rows = [f"<tr><th scope='col'>{words['document']}</th>{head}<th scope='col'>{words['total']}</th></tr>"]

    def row(label: str, picked: list[dict]) -> str:
        cells = [sum(c["verdict"] == v for c in picked) for v in verdicts]
        body = "".join(f"<td>{n}</td>" for n in [*cells, sum(cells)])
        return f"<tr><th scope='row'>{_escape(label)}</th>{body}</tr>"

    for document in documents:
        rows.append(row(source_name(document, lang, capital=True), [c for c in claims if c["seed"] == document]))
    rows.append(row(words["all"], claims))
    return "<table class='ledger-counts'>" + "".join(rows) + "</table>"
