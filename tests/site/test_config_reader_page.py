"""The config reader page in the built site (book/config_reader.md, in its three editions).

One visit per edition, from disk, with the network cut off: the page loads its own copy of
the script (the file in the site is book/_ext/static/config_reader.js), prints the table of
its example as soon as it loads, and each configuration the book ships, pasted or chosen as a
file, gives what ``python -m posenc.describe`` prints for it. The accessibility, the phone
width and the dark theme of the page are checked with every other page (test_browser.py).
"""

from __future__ import annotations

import base64
import json
import os
import shutil

import pytest
from helpers import config_reader_cases, describe_command_output
from repo import EXTENSIONS, ROOT

playwright = pytest.importorskip("playwright.sync_api")

HTML = ROOT / "_build" / "html"
EDITIONS = ("book", "zh-hans/book", "zh-hant/book")
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

#: In the page: what its script prints for each [base64 bytes, file name].
DESCRIBE_ALL = """(cases) => cases.map(([data, name]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  return window.posencConfigReader.describeBytes(bytes, name).text;
})"""


def _shipped_and_bad() -> dict[str, bytes]:
    """The book's own models, each family's configurations and the bad files, not the odd values
    (tests/chapters/test_config_reader.py sends those through the same script)."""
    return {name: data for name, data in config_reader_cases().items() if ": " not in name}


@pytest.fixture(scope="module")
def page():
    assert (HTML / "index.html").exists(), "no _build/html: run `make book` first"
    path = os.environ.get("POSENC_BROWSER") or next(filter(None, map(shutil.which, BROWSERS)), None)
    if not path:
        pytest.fail("no Chromium found: install it (Debian: apt-get install chromium) or set POSENC_BROWSER")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
        yield page
        browser.close()


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_page_prints_what_the_command_prints(page, edition, tmp_path):
    errors = []  # the script's own (the theme's inline scripts report theirs on every page)
    page.on("pageerror", lambda e: errors.append(e.stack or "") if "config_reader" in (e.stack or "") else None)
    page.goto((HTML / edition / "config_reader.html").as_uri(), wait_until="load")
    scripts = page.evaluate("() => [...document.scripts].map((s) => new URL(s.src || location.href).pathname)")
    assert len([path for path in scripts if path.endswith("/_static/config_reader.js")]) == 1
    output = page.locator(".config-reader-output")
    # the example, described on load
    example = page.locator("textarea").input_value().encode()
    assert output.inner_text() == describe_command_output(example, tmp_path)
    # every configuration the book ships, in one call of the page's own script
    cases = _shipped_and_bad()
    encoded = [[base64.b64encode(data).decode(), "config.json"] for data in cases.values()]
    got = dict(zip(cases, page.evaluate(DESCRIBE_ALL, encoded), strict=True))
    wrong = [name for name, data in cases.items() if got[name] != describe_command_output(data, tmp_path)]
    assert not wrong, wrong[:10]
    assert not errors, errors


def test_pasting_and_choosing_a_file_print_the_table(page, tmp_path):
    """Through the form as a reader uses it: typed text, then a file from the file input."""
    page.goto((HTML / "book" / "config_reader.html").as_uri(), wait_until="load")
    config = json.loads(next(data for name, data in config_reader_cases().items() if name == "Llama-4-Scout"))
    text = json.dumps(config, indent=1)
    page.locator("textarea").fill(text)
    output = page.locator(".config-reader-output")
    assert output.inner_text() == describe_command_output(text.encode(), tmp_path)
    bad = tmp_path / "mine.json"
    bad.write_bytes(b'{"model_type": "llama", "hidden_size": 64,}')
    page.locator("input[type=file]").set_input_files(str(bad))
    page.wait_for_function("() => document.querySelector('.config-reader-output').textContent.includes('mine.json')")
    assert output.inner_text() == describe_command_output(bad.read_bytes(), tmp_path, "mine.json")


def test_the_site_serves_the_script_as_written():
    copies = sorted(HTML.rglob("config_reader.js"))
    assert copies
    assert [c for c in copies if c.read_bytes() != (EXTENSIONS / "static" / "config_reader.js").read_bytes()] == []
