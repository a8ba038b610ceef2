"""Checks of the built site in _build/html (run after `make book`)."""

import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from repo import ROOT, extension, manifest, toc_files

HTML = ROOT / "_build" / "html"
EDITIONS = ("", "zh-hans", "zh-hant")  # English at the root, the Chinese editions in folders
PAGES = [HTML / edition / f"{f}.html" for edition in EDITIONS for f in toc_files()]
IDS = [f"{p.parent.parent.name}-{p.stem}".removeprefix("html-") for p in PAGES]


class Refs(HTMLParser):
    """Collects script sources, stylesheet links, image sources and link targets of a page."""

    def __init__(self):
        super().__init__()
        self.scripts, self.links, self.images, self.anchors = [], [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.scripts.append(a["src"])
        elif tag == "link" and a.get("rel") in ("stylesheet", "preload") and a.get("href"):
            self.links.append(a["href"])
        elif tag == "img" and a.get("src"):
            self.images.append(a["src"])
        elif tag == "a" and a.get("href"):
            self.anchors.append(a["href"])


def refs(page: Path) -> Refs:
    parser = Refs()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def is_remote(url: str) -> bool:
    return urlparse(url).scheme in ("http", "https") or url.startswith("//")


def local_target(page: Path, url: str) -> Path:
    return (page.parent / unquote(urlparse(url).path)).resolve()


def test_site_was_built():
    assert (HTML / "index.html").exists(), "no _build/html/index.html: run `make book` first"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_toc_entry_has_a_page(page):
    assert page.exists(), f"{page.relative_to(ROOT)} was not built"


# A Markdown table left as text: its separator row, "|:--|--:|" or "|---|---|", outside code.
RAW_TABLE = re.compile(r"\|\s*:?[-–]{1,}:?\s*\|")


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_tables_are_tables_not_pipes(page):
    """Every table a page or a cell shows is an HTML table: no Markdown table source, its
    pipes and separator row, is left in the page's text."""
    html = page.read_text(encoding="utf-8")
    html = re.sub(r"<(pre|code|script|style)\b.*?</\1>", "", html, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", html)
    raw = RAW_TABLE.findall(text)
    assert not raw, f"{page.name}: Markdown table source shown as text: {raw[:3]}"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_no_script_or_style_from_a_cdn(page):
    r = refs(page)
    remote = [u for u in r.scripts + r.links if is_remote(u)]
    assert not remote, f"{page.name} loads {remote}"
    for url in r.scripts + r.links:
        assert local_target(page, url).exists(), f"{page.name}: {url} does not exist"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_image_exists(page):
    for url in refs(page).images:
        if url.startswith("data:"):
            continue
        assert not is_remote(url), f"{page.name} loads the image {url} from the network"
        target = local_target(page, url)
        assert target.exists() and target.stat().st_size > 0, f"{page.name}: missing image {url}"


def test_mathjax_is_shipped_locally():
    page = HTML / "book" / "02_sinusoidal.html"
    scripts = refs(page).scripts
    mathjax = [s for s in scripts if "mathjax" in s.lower() or "tex-" in s.lower()]
    assert mathjax, f"no MathJax script on {page.name}: {scripts}"
    assert all(local_target(page, s).stat().st_size > 100_000 for s in mathjax)
    assert re.search(r"\\\(|\\\[|\$\$", page.read_text(encoding="utf-8")), "no math on the page"


def test_chapters_show_their_figures():
    for name in ("01_motivation", "02_sinusoidal"):
        images = [u for u in refs(HTML / "book" / f"{name}.html").images if "_images" in u]
        assert images, f"{name} shows no figure"


# Every subpackage and module a reader imports from, with what it offers: its __all__, or
# (for posenc_book's modules, which have none) the public functions and classes it defines.
DOCUMENTED = [
    "posenc",
    "posenc.benchmark",
    "posenc.triton_rope",
    "posenc.experiments",
    "posenc.rope.scaling",
    "posenc.hf",
    "posenc_book",
    "posenc_book.style",
    "posenc_book.diagnostics",
    "posenc_book.tutorial",
    "posenc_book.ledger",
    "posenc_book.tables",
    "posenc_book.benchmark_plots",
    "posenc_book.experiment_plots",
    "posenc_book.explore",
]


def public_names(module) -> list[str]:
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == module.__name__
    ]


def chapter_imports() -> set[tuple[str, str]]:
    """``(module, name)`` for every name a chapter's code imports from posenc or posenc_book."""
    import ast

    found = set()
    for twin in sorted((ROOT / "book" / "md_src").glob("*.md")):
        cells = re.findall(
            r"```\{code-cell\}[^\n]*\n((?:---\n.*?\n---\n|:tags:[^\n]*\n)?)(.*?)```", twin.read_text(), re.S
        )
        for header, cell in cells:
            if "remove-cell" in header:  # a check the site does not show
                continue
            try:
                tree = ast.parse(cell)
            except SyntaxError:  # a cell with IPython magics
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("posenc", "posenc_book"):
                    found |= {(node.module, alias.name) for alias in node.names}
    return found


def test_api_page_documents_every_name_a_chapter_imports():
    """What the pages use is on the API page: each name a chapter imports from the library or the
    book's helpers has an entry there (under its module, or under the package that exports it)."""
    page = (HTML / "book" / "api.html").read_text(encoding="utf-8")
    imported = chapter_imports()
    assert len(imported) > 50, imported
    import importlib.util

    def documented(module: str, name: str) -> bool:
        package = importlib.import_module(module)
        if hasattr(package, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None:
            return True  # a module (posenc.benchmark): its names are checked where it is documented
        packages = [".".join(module.split(".")[:n]) for n in range(1, module.count(".") + 2)]
        return any(f'id="{where}.{name}"' in page for where in packages)

    missing = sorted(f"{module}.{name}" for module, name in imported if not documented(module, name))
    assert not missing, f"names the chapters import, missing from book/api.md: {missing}"


@pytest.mark.parametrize("module_name", DOCUMENTED)
def test_api_page_documents_every_public_name(module_name):
    import importlib

    module = importlib.import_module(module_name)
    page = (HTML / "book" / "api.html").read_text(encoding="utf-8")
    names = public_names(module)
    assert names, f"{module_name} offers nothing"
    top = module_name.split(".")[0]
    missing = [n for n in names if f'id="{module_name}.{n}"' not in page and f'id="{top}.{n}"' not in page]
    assert not missing, f"public names of {module_name} missing from book/api.md: {missing}"


def test_chapters_link_to_the_api_page():
    chapters = [p for p in PAGES if p.stem in manifest.chapter_stems()]
    assert len(chapters) >= 10
    for page in chapters:
        assert 'href="api.html#posenc.' in page.read_text(encoding="utf-8"), f"{page.stem} never links to the API"


def page_weight(page: Path) -> int:
    """Bytes of a page's HTML plus the images it shows (shared theme assets excluded)."""
    images = [local_target(page, u) for u in refs(page).images if not u.startswith("data:")]
    return page.stat().st_size + sum(p.stat().st_size for p in images if p.exists())


def test_site_size_budgets():
    """English 25 MiB; each Chinese edition 12 MiB of its own, since it uses the English
    edition's theme, MathJax and figures (scripts/share_assets.py). The PDF is a download
    with its own budget (tests/site/test_pdf.py)."""

    def size(folder: Path, skip=()) -> int:
        files = (p for p in folder.rglob("*") if p.is_file() and p.suffix != ".pdf")
        return sum(p.stat().st_size for p in files if not any(s in p.relative_to(folder).parts[:1] for s in skip))

    total = size(HTML, skip=EDITIONS[1:])
    assert total < 25 * 2**20, f"the English site is {total / 2**20:.1f} MiB (budget 25 MiB)"
    for edition in EDITIONS[1:]:
        own = size(HTML / edition)
        assert own < 12 * 2**20, f"{edition} is {own / 2**20:.1f} MiB (budget 12 MiB)"
        assert not (HTML / edition / "_static" / "mathjax").exists(), f"{edition} has its own MathJax"
    heaviest = max(PAGES, key=page_weight)
    assert page_weight(heaviest) < 2 * 2**20, f"{heaviest.name} weighs {page_weight(heaviest) / 2**20:.1f} MiB"


def test_no_source_maps_are_published():
    """The theme's source maps are for its own developers; the site ships neither them nor
    comments that send a browser looking for them (scripts/share_assets.py)."""
    static = [root / "_static" for root in (HTML, *(HTML / e for e in EDITIONS[1:])) if (root / "_static").is_dir()]
    assert static
    for folder in static:
        assert not list(folder.rglob("*.map")), folder
        for bundle in (*folder.rglob("*.js"), *folder.rglob("*.css")):
            assert "sourceMappingURL" not in bundle.read_text(encoding="utf-8", errors="replace"), bundle


def test_api_page_shows_no_borrowed_help():
    """Constants without a doc comment show no docstring, not their type's (tuple's, str's),
    and methods show their own docstring or none, not torch's."""
    api = (HTML / "book" / "api.html").read_text(encoding="utf-8")  # the Chinese editions' is the same
    for borrowed in ("Built-in immutable sequence", "str(object=", "re-implement this method"):
        assert borrowed not in api, f"the API page shows borrowed help: {borrowed!r}"


class Skeleton(HTMLParser):
    """A page without its words: each tag with its attributes' names, its id and classes."""

    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, tuple(sorted(a)), a.get("id"), a.get("class")))


def skeleton(page: Path) -> list:
    parser = Skeleton()
    parser.feed(re.sub(r'<nav class="posenc-languages".*?</nav>', "", page.read_text(encoding="utf-8"), flags=re.S))
    return parser.tags


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_page_links_to_itself_in_the_other_editions(page):
    text = page.read_text(encoding="utf-8")
    nav = re.search(r'<nav class="posenc-languages".*?</nav>', text, re.S)
    assert nav, f"{page.relative_to(HTML)} has no language links"
    hrefs = re.findall(r'href="([^"]+)"', nav.group(0))
    assert len(hrefs) == 2 and 'aria-current="page"' in nav.group(0)
    for href in hrefs:
        target = local_target(page, href)
        assert target.is_file(), f"{page.relative_to(HTML)} links to {href}, which is missing"
        assert target.relative_to(HTML).parts[-2:] == page.relative_to(HTML).parts[-2:]
    assert text.count('<link rel="alternate" hreflang=') == 3


@pytest.mark.parametrize("name", toc_files())
def test_traditional_pages_have_the_simplified_pages_structure(name):
    """The Traditional edition is the Simplified one, converted character by character: the
    same elements with the same attributes, so the browser checks that depend on structure
    (axe-core's) hold for both once they hold for one. (Counted, not in order: the glossary
    sorts its terms by their characters.)"""
    hans, hant = skeleton(HTML / "zh-hans" / f"{name}.html"), skeleton(HTML / "zh-hant" / f"{name}.html")
    assert Counter(hant) == Counter(hans)
    if not name.endswith("glossary"):
        assert hant == hans


def cells(page: Path) -> list[str]:
    """The rendered code cells of a page that are the same in every edition: code and
    outputs, with the image paths, alt texts and captions (translated) left out."""
    text = re.sub(r"(\.\./)+_images/", "_images/", page.read_text(encoding="utf-8"))
    text = re.sub(r' alt="[^"]*"| id="id\d+"|<figcaption>.*?</figcaption>', "", text, flags=re.S)
    found = re.findall(r'<div class="cell_output docutils container">.*?</div>\n</div>', text, re.S)
    found += re.findall(r'<div class="highlight-ipython3 notranslate">.*?</pre></div>', text, re.S)
    return found


@pytest.mark.parametrize("name", [f for f in toc_files() if f.split("/")[-1] in manifest.chapter_stems()])
def test_chinese_pages_show_the_english_code_and_outputs(name):
    """What the Chinese pages' browser checks leave to the English ones (code and outputs)
    is the same HTML on every edition's page; the claims ledger is in its language."""
    english = cells(HTML / f"{name}.html")
    assert english
    for edition in EDITIONS[1:]:
        ours = cells(HTML / edition / f"{name}.html")
        if name.endswith("13_claims"):
            assert len(ours) == len(english) and ours != english
        else:
            assert ours == english, f"{edition}/{name}: the code or outputs differ from English"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_link_on_the_site_leads_to_a_file(page):
    """Each link to another file of the site (a page, the PDF, a notebook) finds it; the
    Chinese editions' links into the English one included."""
    hrefs = [h for h in refs(page).anchors if not is_remote(h) and not h.startswith(("#", "mailto:", "data:"))]
    missing = sorted({h for h in hrefs if not local_target(page, h).exists()})
    if "posenc-book.pdf" in " ".join(missing) and not (HTML / "posenc-book.pdf").exists():
        missing = [h for h in missing if not h.endswith("posenc-book.pdf")]  # `make book` without `make pdf`
    assert not missing, f"{page.relative_to(HTML)} links to files that do not exist: {missing[:5]}"


@pytest.mark.parametrize("name", toc_files())
def test_chinese_sections_keep_the_english_ids(name):
    """Every section of an English page has its id on the same section of the Chinese pages
    (contents, heading links and the language links all use it), and every in-page link of
    a Chinese page finds its target."""
    english = set(re.findall(r'<section id="([^"]+)"', (HTML / f"{name}.html").read_text(encoding="utf-8")))
    for edition in EDITIONS[1:]:
        text = (HTML / edition / f"{name}.html").read_text(encoding="utf-8")
        ids = set(re.findall(r' id="([^"]+)"', text))
        assert english <= ids, f"{edition}/{name}: English sections without their id: {sorted(english - ids)[:5]}"
        assert 'class="en-anchor"' not in text
        missing = {h for h in re.findall(r'href="#([^"]+)"', text) if h not in ids}
        assert not missing, f"{edition}/{name}: links to missing anchors {sorted(missing)[:5]}"


def _checked_module():

    module = extension("checked")
    return module


CHAPTER_PAGES = [p for p in PAGES if p.stem in manifest.chapter_stems()]
NOTE = re.compile(r'<p class="checked-note">(.*?)</p>', re.S)


CHAPTER_IDS = [i for i, p in zip(IDS, PAGES, strict=True) if p.stem in manifest.chapter_stems()]


@pytest.mark.parametrize("page", CHAPTER_PAGES, ids=CHAPTER_IDS)
def test_checks_run_but_the_page_does_not_show_them(page):
    """No check cell on the page (no fold to open either); one line at the end counts them and links to them."""
    html = page.read_text(encoding="utf-8")
    source = page.relative_to(HTML).with_suffix(".ipynb")  # the same path in the repository
    notebook = ROOT / source
    asserts, cells = _checked_module().count_checks(notebook)
    assert asserts > 0 and cells > 0
    for prompt in ("Show the checks", "显示检查", "顯示檢查"):
        assert prompt not in html
    notes = NOTE.findall(html)
    assert len(notes) == 1, f"{len(notes)} check notes"
    assert str(asserts) in notes[0] and str(cells) in notes[0]
    if "/blob/main/" in notes[0]:  # built by the publishing workflow: the repository's pages
        assert f"/blob/main/{source.as_posix()}" in notes[0] and "/tree/main/tests" in notes[0]
    else:  # any other build: the notebook served with the site, and tests/ named
        target = re.search(r'href="([^"]*_sources/[^"]*\.ipynb)"', notes[0])
        assert target and target.group(1).endswith(f"book/{source.name}"), notes[0]
        assert (page.parent / target.group(1)).is_file() and "tests/" in notes[0]
    assert html.rfind('class="checked-note"') > html.rfind("cell_input")  # after the last cell shown


class ReadingText(HTMLParser):
    """The text of a page's article that a reader sees without opening anything: prose,
    visible code and outputs. Folds (code shown on request, exercise solutions), formulas'
    TeX source, scripts and styles are left out."""

    SKIP = {"script", "style", "details"}
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack: list[bool] = []  # per open element: is its text left out?
        self.in_article = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        skip = tag in self.SKIP or "math" in classes or (bool(self.stack) and self.stack[-1])
        self.stack.append(skip)
        self.in_article += tag == "article"

    def handle_endtag(self, tag):
        if tag in self.VOID or not self.stack:
            return
        self.stack.pop()
        self.in_article -= tag == "article"

    def handle_data(self, data):
        if self.in_article and not (self.stack and self.stack[-1]):
            self.parts.append(data)


# A word: letters and digits, joined by apostrophes, dots, hyphens or underscores
# ("don't", "torch.arange", "rope_cos_sin", "1.5"); "=", "|" or "#" alone are not words.
WORD = re.compile(r"\w+(?:[.'’-]\w+)*")


def reading_words(page: Path) -> int:
    parser = ReadingText()
    parser.feed(page.read_text(encoding="utf-8"))
    return len(WORD.findall(" ".join(parser.parts)))


ENGLISH_CHAPTERS = [p for p in CHAPTER_PAGES if p.parent == HTML / "book"]
WORD_LIMIT = 7000


@pytest.mark.parametrize("page", ENGLISH_CHAPTERS, ids=[p.stem for p in ENGLISH_CHAPTERS])
def test_no_chapter_is_longer_than_a_sitting(page):
    """At most 7,000 words a reader sees on a chapter's page (prose, visible code and its
    outputs; not the folds), except the claims ledger, which is looked up, not read."""
    words = reading_words(page)
    assert words > 1000, f"{page.name}: {words} words: the counter missed the article"
    if page.stem != "13_claims":
        assert words <= WORD_LIMIT, f"{page.name}: {words} words on the page (at most {WORD_LIMIT:,})"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_inline_code_has_no_span_per_word(page):
    """The build unwraps Sphinx's per-word spans (book/_ext/page_style.py) on every page."""
    assert '<span class="pre">' not in page.read_text(encoding="utf-8")
