"""The config reader page's script (book/_ext/static/config_reader.js) against ``python -m posenc.describe``.

The script runs in Chromium on a blank page, without the built site: every configuration of
``helpers.config_reader_cases`` (the book's models, a small and an empty configuration per
family, each shipped configuration with odd values in each field, files that are not JSON)
goes through it in one call, and each text it prints must be the command's, character for
character, table or error message.
"""

from __future__ import annotations

import base64
import shutil

import pytest
from helpers import config_reader_cases, describe_command_output
from repo import EXTENSIONS

playwright = pytest.importorskip("playwright.sync_api")

SCRIPT = EXTENSIONS / "static" / "config_reader.js"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

#: In the page: what the script prints for each [base64 bytes, file name].
DESCRIBE_ALL = """(cases) => cases.map(([data, name]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  return window.posencConfigReader.describeBytes(bytes, name).text;
})"""


def script_outputs(cases: dict[str, bytes]) -> dict[str, str]:
    """What the script prints for each case, from one blank page in Chromium."""
    path = next(filter(None, map(shutil.which, BROWSERS)), None)
    if not path:
        pytest.fail("no Chromium found: install it (Debian: apt-get install chromium)")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.add_script_tag(path=str(SCRIPT))
        encoded = [[base64.b64encode(data).decode(), "config.json"] for data in cases.values()]
        texts = page.evaluate(DESCRIBE_ALL, encoded)
        browser.close()
    assert not errors, errors
    return dict(zip(cases, texts, strict=True))


#: The cases are compared in this many parts, each a test of its own, so that the test workers
#: share them (together they take about 20 s of Python and 5 s of Chromium).
PARTS = 4


@pytest.mark.parametrize("part", range(PARTS))
def test_the_script_prints_what_the_command_prints(part, tmp_path):
    everything = config_reader_cases()
    cases = {name: data for i, (name, data) in enumerate(everything.items()) if i % PARTS == part}
    got = script_outputs(cases)
    want = {name: describe_command_output(data, tmp_path) for name, data in cases.items()}
    wrong = [
        f"{name}:\n  python: {want[name]!r:.400}\n  script: {got[name]!r:.400}"
        for name in cases
        if got[name] != want[name]
    ]
    assert not wrong, f"{len(wrong)} of {len(cases)} differ:\n" + "\n".join(wrong[:10])
    tables = sum(not text.startswith("error: ") for text in want.values())
    assert tables >= 100 and len(cases) - tables >= 100  # both tables and errors are compared


def test_a_dropped_file_keeps_its_name_in_the_messages(tmp_path):
    """A file is named as the command names it: its name in the messages about the file."""
    data = b'{"model_type": "llama",}'
    page_text = script_outputs({"bad": data})["bad"]
    assert page_text == describe_command_output(data, tmp_path)
    assert "'config.json' is not JSON: Expecting property name enclosed in double quotes" in page_text
