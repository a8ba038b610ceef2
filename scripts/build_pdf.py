"""Build the whole book as one PDF: ``make pdf``.

Sphinx's ``singlehtml`` builder writes every page of the table of contents into one HTML
file; Chromium (the one the site tests use) typesets its formulas with the site's own
MathJax and prints it with the book's print stylesheet: A4, page numbers, the headings as
the PDF's bookmarks, a tagged (accessible) PDF. Jupyter Book's ``pdfhtml`` builder would
download its own Chromium, which cannot work offline; LaTeX would need several hundred MB
of TeX packages and a second rendering of every notebook output, and would set the code
and outputs differently from the site. Printing the site's own HTML keeps one rendering.

Before printing, every code block and output is measured in print layout with its lines
unwrapped: one wider than the page fails the build. The PDF lands next to the site
(``_build/html/posenc-book.pdf``), so the site can link to it, with a report of pages,
figures and time in ``_build/pdf/report.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SINGLE = ROOT / "_build" / "singlehtml"
OUT = ROOT / "_build" / "html" / "posenc-book.pdf"
REPORT = ROOT / "_build" / "pdf" / "report.json"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MARGIN = {"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"}
FOOTER = '<div style="font-size:8px;width:100%;text-align:center"><span class="pageNumber"></span></div>'
# Code and outputs measured with their lines unwrapped: wider than their box means a line
# would run off the page (or be folded by the print stylesheet's wrapping).
TOO_WIDE_JS = """() => {
  const wide = [];
  for (const pre of document.querySelectorAll('article pre')) {
    if (!pre.offsetParent) continue;  // folded away (checks, solutions): not printed
    const old = pre.style.whiteSpace;
    pre.style.whiteSpace = 'pre';
    if (pre.scrollWidth > pre.clientWidth + 1) {
      const line = pre.innerText.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '');
      wide.push(`${pre.scrollWidth} > ${pre.clientWidth} px: ${line.slice(0, 80)}`);
    }
    pre.style.whiteSpace = old;
  }
  return wide;
}"""


# Formulas MathJax did not typeset: their TeX delimiters left in the text (code excluded).
RAW_TEX_JS = """() => {
  const copy = document.querySelector('main').cloneNode(true);
  copy.querySelectorAll('pre, code, mjx-container, script, style').forEach(e => e.remove());
  return ['\\\\(', '\\\\[', '$$', '\\\\frac'].filter(s => copy.innerText.includes(s));
}"""


def build_single_html() -> Path:
    """The book as one HTML page, at the root of _build/singlehtml so its links resolve."""
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    command = [str(jupyter_book), "build", str(ROOT), "--builder", "singlehtml", "-n", "-W", "--keep-going"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    page = SINGLE / "print.html"
    shutil.copyfile(SINGLE / "book" / "intro.html", page)
    return page


def browser() -> str:
    path = os.environ.get("POSENC_BROWSER") or next(filter(None, map(shutil.which, BROWSERS)), None)
    if not path:
        sys.exit("no Chromium found: install it (Debian: apt-get install chromium) or set POSENC_BROWSER")
    return path


def print_pdf(page: Path) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=browser(), args=["--no-sandbox", "--disable-gpu"])
        tab = chromium.new_page(viewport={"width": 1000, "height": 1400})
        tab.set_default_timeout(300_000)
        tab.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:")) else r.abort())
        tab.goto(page.as_uri(), wait_until="load")
        tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        tab.evaluate("() => MathJax.startup.promise")
        tab.emulate_media(media="print")
        # the printable width of A4 with these margins, so the layout measured is the one printed
        tab.set_viewport_size({"width": round((210 - 28) / 25.4 * 96), "height": 1400})
        too_wide = tab.evaluate(TOO_WIDE_JS)
        figures = tab.evaluate("() => document.querySelectorAll('article img').length")
        formulas = tab.evaluate("() => document.querySelectorAll('mjx-container').length")
        raw_tex = tab.evaluate(RAW_TEX_JS)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        tab.pdf(
            path=str(OUT),
            format="A4",
            margin=MARGIN,
            print_background=True,
            outline=True,
            tagged=True,
            display_header_footer=True,
            header_template="<span></span>",
            footer_template=FOOTER,
        )
        chromium.close()
    return {"too_wide": too_wide, "figures": figures, "formulas": formulas, "raw_tex": raw_tex}


def main() -> int:
    start = time.perf_counter()
    report = print_pdf(build_single_html())
    import pypdfium2

    report.update(pages=len(pypdfium2.PdfDocument(OUT)), seconds=round(time.perf_counter() - start, 1))
    report["bytes"] = OUT.stat().st_size
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {report['pages']} pages, {report['bytes'] / 2**20:.1f} MiB, {report['seconds']} s")
    if report["too_wide"]:
        print(f"{len(report['too_wide'])} code block(s) wider than the page:", *report["too_wide"][:10], sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
