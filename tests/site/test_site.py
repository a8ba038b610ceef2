"""Checks of the built site in _build/html (run after `make book`)."""

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from chapters import ROOT, toc_files

HTML = ROOT / "_build" / "html"
PAGES = [HTML / f"{f}.html" for f in toc_files()]


class Refs(HTMLParser):
    """Collects script sources, stylesheet links and image sources of a page."""

    def __init__(self):
        super().__init__()
        self.scripts, self.links, self.images = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.scripts.append(a["src"])
        elif tag == "link" and a.get("rel") in ("stylesheet", "preload") and a.get("href"):
            self.links.append(a["href"])
        elif tag == "img" and a.get("src"):
            self.images.append(a["src"])


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


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_every_toc_entry_has_a_page(page):
    assert page.exists(), f"{page.relative_to(ROOT)} was not built"


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_no_script_or_style_from_a_cdn(page):
    r = refs(page)
    remote = [u for u in r.scripts + r.links if is_remote(u)]
    assert not remote, f"{page.name} loads {remote}"
    for url in r.scripts + r.links:
        assert local_target(page, url).exists(), f"{page.name}: {url} does not exist"


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
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
    "posenc.rope_scaling",
    "posenc_book",
    "posenc_book.style",
    "posenc_book.diagnostics",
    "posenc_book.tutorial",
    "posenc_book.ledger",
    "posenc_book.benchmark_plots",
]


def public_names(module) -> list[str]:
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == module.__name__
    ]


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
    chapters = [p for p in PAGES if p.stem[:2].isdigit()]
    assert len(chapters) >= 10
    for page in chapters:
        assert 'href="api.html#posenc.' in page.read_text(encoding="utf-8"), f"{page.stem} never links to the API"


def page_weight(page: Path) -> int:
    """Bytes of a page's HTML plus the images it shows (shared theme assets excluded)."""
    images = [local_target(page, u) for u in refs(page).images if not u.startswith("data:")]
    return page.stat().st_size + sum(p.stat().st_size for p in images if p.exists())


def test_site_size_budgets():
    # the PDF edition is a download with its own budget (tests/site/test_pdf.py)
    total = sum(p.stat().st_size for p in HTML.rglob("*") if p.is_file() and p.suffix != ".pdf")
    assert total < 25 * 2**20, f"site is {total / 2**20:.1f} MiB (budget 25 MiB)"
    heaviest = max(PAGES, key=page_weight)
    assert page_weight(heaviest) < 2 * 2**20, f"{heaviest.name} weighs {page_weight(heaviest) / 2**20:.1f} MiB"


def test_api_page_shows_no_borrowed_help():
    """Constants without a doc comment show no docstring, not their type's (tuple's, str's),
    and methods show their own docstring or none, not torch's."""
    api = (HTML / "book" / "api.html").read_text(encoding="utf-8")
    for borrowed in ("Built-in immutable sequence", "str(object=", "re-implement this method"):
        assert borrowed not in api, f"the API page shows borrowed help: {borrowed!r}"
