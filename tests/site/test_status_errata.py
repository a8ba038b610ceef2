"""The execution status and errata pages of the built site, in every edition, and the footer
that names the version (run after `make book`)."""

import html
import os
import re
from pathlib import Path

import pytest
import yaml
from repo import ROOT, chapter_notebooks, extension, manifest
from run_status import load_records  # noqa: E402

HTML = ROOT / "_build" / "html"
EDITIONS = ("", "zh-hans/", "zh-hant/")
STATUS = Path(os.environ.get("POSENC_STATUS") or ROOT / "_build" / "status")


def text(page: Path) -> str:
    body = page.read_text(encoding="utf-8")
    body = body[body.find("<article") : body.find("</article>")]
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_status_page_shows_the_recorded_runs(edition):
    """Every chapter of every edition, with its newest recorded result and wall time, and
    every run with its versions, from _build/status; or a plain sentence when none is there."""
    page = text(HTML / edition / "book" / "status.html")
    records = load_records(STATUS)
    if not records:
        assert "make test" in page and "|" not in page
        return
    chapters = [p.stem for p in chapter_notebooks()]
    table = page.split(str(manifest.chapter_number(chapters[0])), 1)[1]
    rows = re.findall(r"\b(\d+) ((?:(?!\b\d+ ).)*?)(?= \d+ |$)", table)
    assert len(rows) >= len(chapters) - 1
    for run in records:
        assert run["run"] in page and run["torch"] in page and run["transformers"] in page and run["python"] in page
        for entry in run["notebooks"]:
            if run.get("kind", "chapters") == "chapters" and entry["result"] == "passed":
                assert f"{entry['seconds']:.1f} s ({run['run']})" in page or " min " in page


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_errata_page_lists_every_correction(edition):
    quotes = str.maketrans({"\u2019": "'", "\u201c": '"', "\u201d": '"'})  # typographic quotes, as rendered
    page = text(HTML / edition / "book" / "errata.html").translate(quotes)
    data = "errata.zh-hant.yaml" if edition == "zh-hant/" else "errata.yaml"
    entries = yaml.safe_load((ROOT / "posenc_book" / "data" / data).read_text(encoding="utf-8"))
    assert entries
    for entry in entries:
        said, right = (entry["zh"]["said"], entry["zh"]["right"]) if edition else (entry["said"], entry["right"])
        for words in (said, right):
            probe = " ".join(words.split())[:16].translate(quotes)
            assert probe in page, probe
    pending = {
        "": "the next release (in this build)",
        "zh-hans/": "下一版本（本次构建已包含）",
        "zh-hant/": "下一版本（本次建構已包含）",
    }[edition]
    assert page.count(pending) >= sum(e["since"] == "unreleased" for e in entries)


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_page_names_its_version_and_links_to_the_errata(edition):
    version = re.search(r'"([^"]+)"', (ROOT / "posenc" / "_version.py").read_text().split("__version__")[1]).group(1)
    for name in ("intro", "01_motivation", "status"):
        page = HTML / edition / "book" / f"{name}.html"
        footer = re.search(r'<p class="posenc-version">(.*?)</p>', page.read_text(encoding="utf-8"))
        assert footer and version in footer.group(1)
        link = re.search(r'href="([^"]+)"', footer.group(1)).group(1)
        assert (page.parent / link).resolve() == (HTML / edition / "book" / "errata.html").resolve()


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_intro_links_to_both_pages(edition):
    page = (HTML / edition / "book" / "intro.html").read_text(encoding="utf-8")
    assert 'href="status.html"' in page and 'href="errata.html"' in page


def test_no_link_to_the_repository_unless_the_publishing_workflow_built_the_site():
    """The repository and the site named in _config.yml exist once the book is published there:
    any other build links to neither (book/_ext/publication.py)."""
    from sync_repo_url import repository, site_url

    published = extension("publication").published

    url = repository()[0]
    if published(url):
        pytest.skip("the publishing workflow's build links to its own repository")
    for page in sorted(HTML.rglob("*.html")):
        body = page.read_text(encoding="utf-8")
        assert f'href="{url}' not in body and f'href="{site_url()}' not in body, page.relative_to(HTML)
        assert "mybinder.org/v2/gh/" not in body and "colab.research.google.com/github/" not in body
