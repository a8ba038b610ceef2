"""The built site opened in headless Chromium from disk, with the network cut off.

Every page of the table of contents is loaded from ``file://``; any request
that would leave the machine is blocked and fails the test. Screenshots of
every page land in ``_build/screenshots/`` for review: the first screen of each page, or
the whole page with ``POSENC_SCREENSHOTS=full`` (a whole-page capture of a long chapter
takes seconds, and nothing is asserted on it).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import axe_playwright_python
import pytest
from playwright.sync_api import sync_playwright
from repo import ROOT, toc_files

HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
FULL_PAGE = os.environ.get("POSENC_SCREENSHOTS") == "full"
PAGES = toc_files()
ZH_PAGES = [f"{edition}/{name}" for edition in ("zh-hans", "zh-hant") for name in PAGES]


def largest_first(names: list[str]) -> list[str]:
    """The pages, the largest built page first: the two workers take the longest visits (the API
    page's takes over a minute) before the short ones, so that neither waits on the other's last."""
    size = {n: (HTML / f"{n}.html").stat().st_size if (HTML / f"{n}.html").exists() else 0 for n in names}
    return sorted(names, key=lambda n: -size[n])


# In a Chinese page, what is the English page's HTML: code, outputs (but the claims ledger's,
# printed in the edition's language), the API documentation and the bad-input tables.
SAME_AS_ENGLISH = [
    "div.cell_input div.highlight",
    "div.cell:not(.tag_localised-output) div.cell_output",
    "dl.py",
    "table.bad-inputs",
]
# Generous: a loaded 2-core machine can take many seconds to typeset a long chapter.
TIMEOUT_MS = 120_000
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Flags for a closed network: no background services that phone home.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-sync",
    "--disable-background-networking",
    "--disable-component-update",
]

# Text that MathJax leaves behind only when it failed to typeset, and escapes it printed literally inside a formula.
RAW_TEX_JS = """() => {
  const root = document.querySelector('article') || document.body;
  const copy = root.cloneNode(true);
  copy.querySelectorAll('pre, code, mjx-container, script, style, .highlight').forEach(e => e.remove());
  const text = copy.innerText;
  const raw = ['\\\\(', '\\\\)', '\\\\[', '\\\\]', '$$', '\\\\frac', '\\\\omega', '\\\\sin']
    .filter(s => text.includes(s));
  // inside typeset formulas (their MathML copy): a backslash escape MathJax showed as text, e.g. \\text{max\\_len}
  const math = [...root.querySelectorAll('mjx-container')].map(e => e.textContent).join(' ');
  const escapes = (math.match(/\\\\[_a-zA-Z]+/g) || []).map(s => 'in a formula: ' + s);
  return [...raw, ...new Set(escapes)];
}"""


# Boxes whose content runs past their right edge: a reader has to scroll them, or cannot
# see the end at all. Closed toggles (checks, solutions) have no width and are skipped.
OVERFLOW_JS = """(phone) => {
  const out = [];
  const doc = document.scrollingElement;
  if (doc.scrollWidth > window.innerWidth + 1) out.push(`the page: ${doc.scrollWidth} px`);
  // on a phone, code must wrap; printed output keeps its columns and scrolls in its own box
  const boxes = phone ? 'article pre:not(div.cell_output pre)'
    : 'article pre, article table, article mjx-container[display="true"]';
  const scrollers = phone ? [] : [...document.querySelectorAll('article *')].filter(
    e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX));
  for (const e of [...document.querySelectorAll(boxes), ...scrollers]) {
    if (e.clientWidth && e.scrollWidth > e.clientWidth + 1) {
      const line = (e.innerText || '').split('\\n').find(l => l.length > 60) || e.innerText;
      out.push(`${e.tagName.toLowerCase()} ${e.scrollWidth} > ${e.clientWidth} px: ${line.slice(0, 70)}`);
    }
  }
  return out;
}"""


# Figures at 390 px: each drawn figure (a PNG output) is at least its --phone-width wide, the
# width at which its smallest text, 8 points by tests/chapters/test_notebooks.py, is 9 CSS pixels
# (book/_ext/page_style.py). Figures in closed toggles are not displayed and are skipped.
SMALL_FIGURES_JS = """() => {
  const out = [];
  for (const img of document.querySelectorAll('article img')) {
    if (!/_images\\/[0-9a-f]+\\.png$/.test(img.src) || !img.offsetParent) continue;
    const want = parseFloat(getComputedStyle(img).getPropertyValue('--phone-width'));
    const shown = img.getBoundingClientRect().width;
    if (!want) out.push(`no --phone-width: ${img.src.slice(-16)}`);
    else if (shown + 0.5 < want) out.push(`${img.src.slice(-16)}: ${shown} px < ${want} px`);
  }
  return out;
}"""


# axe-core, the engine the PyData theme runs in its own CI, from the wheel that ships it.
AXE_JS = Path(axe_playwright_python.__file__).parent / "axe.min.js"
# axe-core's build turns its classes' private fields (#field) into WeakMaps, through six small
# helpers. Its contrast rule makes colour objects by the hundred thousand, and filling those
# WeakMaps takes a quarter to a half of its time on a long page (the API page: 64 s, 29 s
# without). fast_axe() writes the same helpers with one property per field, under a symbol of
# the field's own: axe's code reads and writes the same values, and only a misuse of a private
# field, which axe never makes, would no longer throw. test_the_faster_axe_reports_what_axe_reports
# compares the two. Each helper is found exactly once, or the test run stops: an axe-core
# built another way is never run half rewritten.
_NAME = r"[A-Za-z_$][\w$]*"
_PRIVATE_FIELD_HELPERS = [
    (
        "the check that a field is declared once",
        rf'function ({_NAME})\(e,t\)\{{if\(t\.has\(e\)\)throw new TypeError\("Cannot initialize the same '
        r'private elements twice on an object"\)\}',
        "function {}(e,t){{}}",
    ),
    (
        "a private method's brand",
        rf"function ({_NAME})\(e,t\)\{{{_NAME}\(e,t\),t\.add\(e\)\}}",
        "function {}(e,t){{e[__axeField(t)]=!0}}",
    ),
    (
        "a field's first value",
        rf"function ({_NAME})\(e,t,n\)\{{{_NAME}\(e,t\),t\.set\(e,n\)\}}",
        "function {}(e,t,n){{e[__axeField(t)]=n}}",
    ),
    (
        "reading a field",
        rf"function ({_NAME})\(e,t\)\{{return e\.get\({_NAME}\(e,t\)\)\}}",
        "function {}(e,t){{return t[__axeField(e)]}}",
    ),
    (
        "writing a field",
        rf"function ({_NAME})\(e,t,n\)\{{e\.set\({_NAME}\(e,t\),n\)\}}",
        "function {}(e,t,n){{t[__axeField(e)]=n}}",
    ),
    (
        "the brand check",
        rf'function ({_NAME})\(e,t,n\)\{{if\("function"==typeof e\?e===t:e\.has\(t\)\)return arguments\.length<3\?t:n;'
        r'throw new TypeError\("Private element is not present on this object"\)\}',
        "function {}(e,t,n){{return arguments.length<3?t:n}}",
    ),
]


@functools.cache
def fast_axe() -> str:
    """axe-core's script with its private-field helpers written as symbol-keyed properties."""
    text = AXE_JS.read_text(encoding="utf-8")
    for what, pattern, body in _PRIVATE_FIELD_HELPERS:
        found = list(re.finditer(pattern, text))
        if len(found) != 1:
            pytest.fail(f"{AXE_JS}: {len(found)} definitions of {what}, not 1: a new axe-core build? See fast_axe().")
        text = text[: found[0].start()] + body.format(found[0].group(1)) + text[found[0].end() :]
    # one symbol per private field, kept on the WeakMap or WeakSet that stood for it
    return "var __axeField=function(m){return m.__axeField||(m.__axeField=Symbol())};\n" + text


AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
AXE_JSON = SHOTS.parent / "axe"
# Findings accepted on every page, each with its reason. None is serious or critical.
AXE_ACCEPTED: dict[str, str] = {}


def browser_path() -> str:
    path = os.environ.get("POSENC_BROWSER") or next(filter(None, map(shutil.which, BROWSERS)), None)
    if not path:
        pytest.fail("no Chromium found: install it (Debian: apt-get install chromium) or set POSENC_BROWSER")
    return path


@pytest.fixture(scope="module")
def browser():
    assert (HTML / "index.html").exists(), "no _build/html: run `make book` first"
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=browser_path(), args=FLAGS)
        yield b
        b.close()


class Visit:
    """One page load with every request recorded and every remote one blocked."""

    def __init__(self, browser, url: str, width: int = 1280):
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.page.set_default_timeout(TIMEOUT_MS)
        self.remote, self.failed = [], []
        self.page.route("**/*", self._route)
        self.page.on("requestfailed", lambda r: self.failed.append(f"{r.url} ({r.failure})"))
        self.page.goto(url, wait_until="load")

    def _route(self, route):
        if urlparse(route.request.url).scheme in ("file", "data", "blob", "about"):
            route.continue_()
        else:
            self.remote.append(route.request.url)
            route.abort()

    def typeset(self) -> int:
        """Wait for MathJax to finish; return the number of typeset formulas."""
        if not self.page.evaluate("() => !!document.querySelector('script[src*=mathjax]')"):
            return 0  # Sphinx loads MathJax only on pages with math
        self.page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        self.page.evaluate("() => MathJax.startup.promise")
        return self.page.evaluate("() => document.querySelectorAll('mjx-container').length")


def url_of(name: str) -> str:
    return (HTML / f"{name}.html").as_uri()


def axe_violations(page, rules: list[str] | None = None, exclude: list[str] = ()) -> list[dict]:
    page.add_script_tag(content=fast_axe())
    run_only = {"type": "rule", "values": rules} if rules else {"type": "tag", "values": AXE_TAGS}
    options = {"runOnly": run_only, "resultTypes": ["violations"]}
    context = {"exclude": [[e] for e in exclude]} if exclude else None
    return page.evaluate(
        "async ([context, options]) => (await axe.run(context || document, options)).violations",
        [context, options],
    )


def check_accessibility(page, name: str, exclude: list[str] = ()) -> None:
    """axe-core (WCAG 2.1 A/AA and best practices): no serious or critical violation, in
    light mode and, for colour contrast, in dark mode; every finding is written to
    _build/axe/ for review. Images describe themselves rather than name a file, and every
    link, button, toggle and slider in the article can take the keyboard focus. axe-core
    leaves out the elements in ``exclude``."""
    found = axe_violations(page, exclude=exclude)
    alts = page.evaluate("() => [...document.querySelectorAll('article img')].map(i => i.alt)")
    named = [a for a in alts if not a.strip() or re.search(r"\.(png|svg|jpe?g)$|_images/", a)]
    assert not named, f"images whose alt text is empty or a file name: {named[:3]}"
    unreachable = page.evaluate(
        """() => [...document.querySelectorAll(
             'article a[href], article button, article input, article summary, article select')]
           .filter(e => e.offsetParent !== null && (e.tabIndex < 0 || e.disabled))
           .map(e => e.outerHTML.slice(0, 80))"""
    )
    assert not unreachable, f"not reachable by keyboard: {unreachable[:3]}"
    # no colour transitions: axe must measure the dark theme, not a colour on its way there
    page.add_style_tag(content="*, *::before, *::after { transition: none !important; }")
    page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; }")
    dark = axe_violations(page, ["color-contrast"], exclude)
    AXE_JSON.mkdir(parents=True, exist_ok=True)
    summary = {
        "light": {v["id"]: [v["impact"], len(v["nodes"])] for v in found},
        "dark": {v["id"]: [v["impact"], len(v["nodes"])] for v in dark},
    }
    (AXE_JSON / f"{name.replace('/book/', '-').removeprefix('book/')}.json").write_text(json.dumps(summary, indent=1))
    bad = [
        f"{v['id']} ({v['impact']}, {len(v['nodes'])}x): {v['nodes'][0]['target']}"
        for v in found + dark
        if v["impact"] in ("serious", "critical") and v["id"] not in AXE_ACCEPTED
    ]
    assert not bad, f"axe-core: {bad}"


# A page made to fail axe-core's contrast rule in each way it measures: faint text, text on
# stacked half-transparent backgrounds, under a shadow, faded by opacity, large and bold, a button.
FAILING_CONTRAST = """<!doctype html><html lang="en"><head><title>Contrast</title></head><body><main>
<h1>Contrast</h1>
<p style="color:#999">Faint grey on white.</p>
<div style="background:rgba(0,0,0,.5)"><div style="background:rgba(0,0,128,.3)">
<p style="color:#666">On stacked half-transparent backgrounds.</p></div></div>
<p style="color:#777;text-shadow:0 0 2px #888">Under a shadow.</p>
<p style="color:#000;opacity:.3">Faded by opacity.</p>
<p style="color:#555;background:#444;font-size:24px;font-weight:bold">Large and bold.</p>
<button style="color:#aaa;background:#eee">A faint button</button>
</main></body></html>"""

# Every node of every rule's result, with what each check measured (contrast: the colours,
# the ratio, the font), in an order of its own. Font Awesome numbers its icons' titles anew
# at each load: those numbers are left out.
AXE_REPORT_JS = """async ([rules, tags]) => {
  const r = await axe.run(document, {runOnly: rules ? {type: 'rule', values: rules} : {type: 'tag', values: tags}});
  const nodes = v => v.nodes.map(n => JSON.stringify([n.target, n.impact, ['any', 'all', 'none'].map(
    k => n[k].map(c => [c.id, c.data])), n.failureSummary || ''])).sort();
  const out = {};
  for (const kind of ['violations', 'passes', 'incomplete', 'inapplicable'])
    out[kind] = r[kind].map(v => [v.id, v.impact, nodes(v)]);
  return JSON.stringify(out).replace(/svg-inline--fa-title-[A-Za-z0-9]+/g, 'svg-inline--fa-title');
}"""


def axe_report(browser, url: str, script: str) -> dict:
    """axe-core's whole report on a page: every rule in light mode, the contrast rule in dark."""
    visit = Visit(browser, url)
    visit.typeset()
    visit.page.add_script_tag(content=script)
    light = json.loads(visit.page.evaluate(AXE_REPORT_JS, [None, AXE_TAGS]))
    visit.page.add_style_tag(content="*, *::before, *::after { transition: none !important; }")
    visit.page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; }")
    dark = json.loads(visit.page.evaluate(AXE_REPORT_JS, [["color-contrast"], AXE_TAGS]))
    visit.page.close()
    return {"light": light, "dark": dark}


@pytest.mark.parametrize("name", ["failing", "book/glossary", "book/04_learned"])
def test_the_faster_axe_reports_what_axe_reports(browser, tmp_path, name):
    """fast_axe() and axe-core as it ships give the same report, node for node and check for
    check, the contrast rule's colours and ratios among them: on a page made to fail the
    contrast rule, and on two pages of the book (prose, code, formulas, tables, a figure)."""
    if name == "failing":
        page = tmp_path / "failing.html"
        page.write_text(FAILING_CONTRAST, encoding="utf-8")
        url = page.as_uri()
    else:
        url = url_of(name)
    shipped = axe_report(browser, url, AXE_JS.read_text(encoding="utf-8"))
    faster = axe_report(browser, url, fast_axe())
    if name == "failing":
        failed = {v[0]: len(v[2]) for v in shipped["light"]["violations"]}
        assert failed.get("color-contrast", 0) >= 5, f"the page was made to fail contrast 5 times: {failed}"
    assert shipped["light"]["passes"] and shipped["dark"]["passes"]
    for mode in ("light", "dark"):
        for kind, rules in shipped[mode].items():
            assert faster[mode][kind] == rules, f"{mode}, {kind}: the faster axe-core reports otherwise"


def check_render(visit: Visit, shot: Path) -> None:
    """Offline, every formula typeset, every image loaded, nothing wider than its column."""
    page = visit.page
    formulas = visit.typeset()
    assert not visit.remote, f"requests leaving the machine: {visit.remote}"
    assert not visit.failed, f"failed requests: {visit.failed}"
    assert not page.evaluate(RAW_TEX_JS), "raw TeX left on the page: MathJax did not typeset it"
    if page.evaluate("() => document.querySelectorAll('article .math').length"):
        assert formulas > 0, "the page has math but MathJax produced no output"
    broken = page.evaluate(
        "() => [...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)"
    )
    assert not broken, f"images that did not load: {broken}"
    overflow = page.evaluate(OVERFLOW_JS, False)
    assert not overflow, f"{len(overflow)} box(es) wider than the column at 1280 px: {overflow[:5]}"
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot), full_page=FULL_PAGE)


@pytest.mark.parametrize("name", largest_first(PAGES), ids=lambda p: p.rsplit("/", 1)[-1])
def test_page_renders_offline_accessibly_and_fits_a_phone(browser, name):
    """Rendered at 1280 px, then narrowed to 390 px in the same visit: at 390 px the page never
    scrolls sideways and code wraps; wide tables, formulas, printed output and figures scroll
    inside their own box, figures at a width that keeps their text at 9 px or more."""
    visit = Visit(browser, url_of(name))
    check_render(visit, SHOTS / f"{name.rsplit('/', 1)[-1]}.png")
    check_accessibility(visit.page, name)
    visit.page.set_viewport_size({"width": 390, "height": 900})
    overflow = visit.page.evaluate(OVERFLOW_JS, True)
    assert not overflow, f"{len(overflow)} overflow(s) at 390 px: {overflow[:5]}"
    small = visit.page.evaluate(SMALL_FIGURES_JS)
    assert not small, f"figures whose text is under 9 px at 390 px: {small[:5]}"
    (SHOTS / "phone").mkdir(exist_ok=True)
    visit.page.screenshot(path=str(SHOTS / "phone" / f"{name.rsplit('/', 1)[-1]}.png"), full_page=FULL_PAGE)
    visit.page.close()


@pytest.mark.parametrize("name", largest_first(ZH_PAGES), ids=lambda p: p.replace("/book/", "-"))
def test_chinese_page_renders_offline_accessibly_and_fits_a_phone(browser, name):
    """The English checks on a Chinese page, in one visit (1280 px, then 390 px). axe-core
    checks the Simplified pages, leaving out the code and outputs that are the English
    pages' own HTML (tests/site/test_site.py checks that they are) and checked there; a
    Traditional page has the structure of its Simplified page (test_site.py again)."""
    edition = name.split("/", 1)[0]
    visit = Visit(browser, url_of(name))
    assert visit.page.evaluate("() => document.documentElement.lang").startswith("zh")
    check_render(visit, SHOTS / edition / f"{name.rsplit('/', 1)[-1]}.png")
    if edition == "zh-hans":
        check_accessibility(visit.page, name, exclude=SAME_AS_ENGLISH)
    visit.page.set_viewport_size({"width": 390, "height": 900})
    overflow = visit.page.evaluate(OVERFLOW_JS, True)
    assert not overflow, f"{len(overflow)} overflow(s) at 390 px: {overflow[:5]}"
    small = visit.page.evaluate(SMALL_FIGURES_JS)
    assert not small, f"figures whose text is under 9 px at 390 px: {small[:5]}"
    phone = SHOTS / edition / "phone" / f"{name.rsplit('/', 1)[-1]}.png"
    phone.parent.mkdir(parents=True, exist_ok=True)
    visit.page.screenshot(path=str(phone), full_page=FULL_PAGE)
    visit.page.close()


@pytest.mark.parametrize("name", ["book/02_sinusoidal", "book/05_relative", "book/06_rope"])
def test_explorable_figures_answer_the_keyboard_offline(browser, name):
    """Each explorable figure's slider moves with the arrow keys and its readout follows,
    with no script error and no request leaving the machine."""
    visit = Visit(browser, url_of(name))
    errors = []
    visit.page.on("pageerror", lambda e: errors.append(str(e)))
    figures = visit.page.locator("figure[id^=explore-]")
    assert figures.count() >= 1
    for index in range(figures.count()):
        figure = figures.nth(index)
        slider, readout = figure.locator("input[type=range]").first, figure.locator("output")
        before = readout.inner_text()
        slider.focus()
        visit.page.keyboard.press("ArrowRight" if slider.get_attribute("value") == "0" else "ArrowLeft")
        assert readout.inner_text() != before, f"{figure.get_attribute('id')}: the readout did not change"
        assert slider.get_attribute("aria-valuetext")
    assert not errors and not visit.remote, (errors, visit.remote)
    visit.page.close()


def test_one_search_box(browser):
    visit = Visit(browser, url_of(PAGES[0]))
    shown = visit.page.evaluate(
        "() => [...document.querySelectorAll('.search-button-field, form.bd-search')]"
        ".filter(e => e.offsetParent !== null).length"
    )
    assert shown == 1, f"{shown} search boxes on the page"
    visit.page.close()


def test_equations_are_typeset_on_the_formula_chapter(browser):
    visit = Visit(browser, url_of("book/02_sinusoidal"))
    assert visit.typeset() >= 20
    visit.page.close()


SEARCHES = [
    ("", "rotary", "06_rope"),
    ("", "sinusoidal", "02_sinusoidal"),
    ("", "旋转位置编码", "06_rope"),  # the English chapter names it in Chinese
    ("", "位置编码", "glossary"),
    ("zh-hans/", "旋转位置编码", "06_rope"),
    ("zh-hans/", "位置编码", "01_motivation"),
    ("zh-hans/", "正弦位置编码", "02_sinusoidal"),
    ("zh-hant/", "旋轉位置編碼", "06_rope"),
    ("zh-hant/", "位置編碼", "01_motivation"),
    ("zh-hans/", "外推", "11_experiments"),  # inside 长度外推
    ("zh-hant/", "旋轉", "06_rope"),  # inside 旋轉位置編碼
]


@pytest.mark.parametrize("edition, term, page", SEARCHES)
def test_search_finds(browser, edition, term, page):
    """Search finds each term in the chapter that introduces it; in a Chinese edition the
    text is segmented into words (book/_ext/editions.py), so a word inside a longer run of
    characters is found."""
    visit = Visit(browser, (HTML / edition / "search.html").as_uri() + f"?q={term}")
    visit.page.wait_for_function("() => (document.querySelector('p.search-summary') || {}).innerText")
    links = visit.page.eval_on_selector_all("#search-results li a", "els => els.map(e => e.href)")
    assert any(page in link for link in links), f"searching {term!r} did not find {page}: {links[:10]}"
    visit.page.close()


def test_previous_and_next_links_walk_the_table_of_contents(browser):
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    # only the links matter here: nothing but the pages themselves is loaded (no script,
    # file, stylesheet, font, formula or figure: the tests above load those)
    page.route("**/*", lambda route: route.continue_() if route.request.resource_type == "document" else route.abort())
    page.goto(url_of(PAGES[0]))
    for here, there in zip(PAGES, PAGES[1:], strict=False):
        assert page.url == url_of(here)
        page.click("a.right-next")
        page.wait_for_load_state("load")
        assert page.url == url_of(there), f"next from {here} went to {page.url}"
    for here, there in zip(PAGES[::-1], PAGES[-2::-1], strict=False):
        page.click("a.left-prev")
        page.wait_for_load_state("load")
        assert page.url == url_of(there), f"previous from {here} went to {page.url}"
    page.close()
