"""The PDF edition (``make pdf``, scripts/build_pdf.py): every page of the book, with its
bookmarks, figures and formulas, and no line that runs off the page."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pypdfium2
import pytest
from repo import ROOT, toc_files

HTML = ROOT / "_build" / "html"
PDF = HTML / "posenc-book.pdf"
REPORT = ROOT / "_build" / "pdf" / "report.json"


class _Title(HTMLParser):
    def __init__(self):
        super().__init__()
        self.depth, self.title = 0, ""

    def handle_starttag(self, tag, attrs):
        if tag == "h1" and not self.title:
            self.depth = 1

    def handle_endtag(self, tag):
        if tag == "h1":
            self.depth = 0

    def handle_data(self, data):
        if self.depth:
            self.title += data


def page_titles() -> list[str]:
    titles = []
    for name in toc_files():
        parser = _Title()
        parser.feed((HTML / f"{name}.html").read_text(encoding="utf-8"))
        titles.append(" ".join(parser.title.replace("#", "").split()))
    return titles


@pytest.fixture(scope="module")
def pdf():
    assert PDF.exists(), "no PDF: run `make pdf`"
    document = pypdfium2.PdfDocument(PDF)
    yield document
    document.close()


@pytest.fixture(scope="module")
def text(pdf):
    return "\n".join(page.get_textpage().get_text_range() for page in pdf)


def test_report_says_no_code_is_wider_than_the_page():
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    assert report["too_wide"] == [], report["too_wide"][:5]
    assert report["bytes"] < 40 * 2**20, f"PDF of {report['bytes'] / 2**20:.1f} MiB (budget 40 MiB)"


def test_page_count(pdf):
    assert 250 <= len(pdf) <= 800, f"{len(pdf)} pages"


def test_every_page_title_is_in_the_text_and_the_bookmarks(pdf, text):
    """Each page's title is a heading and a bookmark, and each chapter is in the contents
    too. Spaces are ignored: a heading that wraps loses its space in the bookmark."""

    def squeeze(s):
        return re.sub(r"\s+", "", s)

    flat = squeeze(text)
    bookmarks = squeeze(" ".join(item.get_title() for item in pdf.get_toc()))
    for index, title in enumerate(page_titles()):
        bare = squeeze(re.sub(r"^[\d.]+\s*", "", title))  # chapter numbers vary with the layout
        assert flat.count(bare) >= (1 if index == 0 else 2), f"{title!r}: not in the contents and as a heading"
        assert bare in bookmarks, f"{title!r} has no bookmark"


def test_figures_are_in_the_pdf(pdf):
    images = sum(
        1 for page in pdf for obj in page.get_objects(max_depth=2) if obj.type == pypdfium2.raw.FPDF_PAGEOBJ_IMAGE
    )
    figures = json.loads(REPORT.read_text(encoding="utf-8"))["figures"]
    assert figures >= 35 and images >= figures, f"{images} images in the PDF for {figures} figures"


def test_formulas_are_typeset():
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    assert report["formulas"] > 500 and report["raw_tex"] == [], report["raw_tex"][:5]


def test_nothing_runs_off_the_page(pdf):
    """No character lies in the side margins, as a line too long for the page would.
    MathJax draws rules and stretched glyphs as zero-height characters: those are skipped."""
    strip = 14 * 72 / 25.4 - 4  # the 14 mm margins, less 4 pt
    off = []
    for number, page in enumerate(pdf, start=1):
        width, height = page.get_size()
        textpage = page.get_textpage()
        sides = [(0, strip), (width - strip, width)]
        if not any(textpage.get_text_bounded(left=a, bottom=40, right=b, top=height - 40).strip() for a, b in sides):
            continue
        for i in range(textpage.count_chars()):
            left, bottom, right, top = textpage.get_charbox(i)
            if top - bottom > 2 and (left < strip or right > width - strip):
                off.append(f"page {number}: {textpage.get_text_range(i, 1)!r}")
    assert not off, f"text in the margins: {off[:5]}"


def test_the_site_links_to_the_pdf():
    """Every edition's introduction links to the PDF beside the site's home page by a relative
    address (the site's root is _build/html), so the link works wherever the site is served,
    and never names a host the book may not be published on; the workflow publishes that folder."""
    assert PDF == HTML / "posenc-book.pdf" and PDF.exists()
    for edition in ("", "zh-hans/", "zh-hant/"):
        page = HTML / edition / "book" / "intro.html"
        links = re.findall(r'href="([^"]*posenc-book\.pdf)"', page.read_text(encoding="utf-8"))
        assert links and all((page.parent / link).resolve() == PDF.resolve() for link in links), (edition, links)
    workflow = (ROOT / ".github" / "workflows" / "book.yml").read_text(encoding="utf-8")
    assert re.search(r"upload-pages-artifact@\S+[^\n]*\s+with:\s+path: _build/html", workflow)
