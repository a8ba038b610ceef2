"""The weekly check against the newest torch and transformers, and of the site's external links.

Usage:
  python scripts/upstream_check.py run --out DIR        run the checks, leave their reports in DIR
  python scripts/upstream_check.py report DIR --out ISSUE.md   the issue's body, from DIR
  python scripts/upstream_check.py publish ISSUE.md     open or update the one issue (gh CLI)

``.github/workflows/upstream.yml`` runs it every week, never on a pull request, in the pinned
environment with torch and transformers upgraded to their newest releases. ``run`` executes
the English chapters under nbval and every test file that imports transformers (the tests
that compare with it), each with a JUnit report, and checks every external link of the site
built beforehand (``_build/html``). ``report`` writes what broke: the versions tested against
the pinned ones, each failing cell with nbval's message, each failing test, each broken link.
``publish`` keeps one open issue with that title up to date: it opens it when something
broke, edits its body when it is open, and closes it with a comment once everything passes.
Exit status: ``run`` 0; ``report`` 0; ``publish`` 1 when something broke (the run shows red).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import html.parser
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urldefrag, urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from run_status import parse_junit  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling scripts
import manifest  # noqa: E402

TITLE = "Weekly check: the book against the newest torch and transformers, and its external links"
MARK = "<!-- posenc-upstream-check -->"
UPGRADED = ("torch", "transformers")
IMPORTS_TRANSFORMERS = re.compile(r'^\s*(import transformers|from transformers\b)|importorskip\("transformers"\)', re.M)
MESSAGE_LINES = 40  # lines of nbval's or pytest's message kept per failure in the issue
USER_AGENT = "posenc-book-link-check"


def pinned(name: str, requirements: Path = ROOT / "requirements.txt") -> str | None:
    for line in requirements.read_text(encoding="utf-8").splitlines():
        found = re.match(rf"^{re.escape(name)}==([^\s;]+)", line, re.I)
        if found:
            return found.group(1)
    return None


def versions() -> dict[str, dict[str, str | None]]:
    """{package: {"pinned": ..., "tested": ...}} for torch and transformers."""
    out = {}
    for name in UPGRADED:
        try:
            tested = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            tested = None
        out[name] = {"pinned": pinned(name), "tested": tested}
    return out


def transformers_tests(folder: Path = ROOT / "tests") -> list[Path]:
    """The test files that compare with transformers: those that import it."""
    return sorted(p for p in folder.rglob("test_*.py") if IMPORTS_TRANSFORMERS.search(p.read_text(encoding="utf-8")))


class Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        href = dict(attrs).get("href") if tag == "a" else None
        if href and urlparse(href).scheme in ("http", "https"):
            self.urls.append(urldefrag(href)[0])


def external_links(site: Path) -> dict[str, list[str]]:
    """{url: pages that link to it} over every page of the built site."""
    found: dict[str, list[str]] = {}
    for page in sorted(site.rglob("*.html")):
        parser = Links()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        for url in dict.fromkeys(parser.urls):
            found.setdefault(url, []).append(page.relative_to(site).as_posix())
    return found


def check_link(url: str, timeout: float = 20.0) -> dict:
    """``{"url", "status", "error"}``: HEAD first, GET where a server refuses HEAD."""
    for method in ("HEAD", "GET"):
        request = urllib.request.Request(url, method=method, headers={"User-Agent": USER_AGENT})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return {"url": url, "status": response.status, "error": None}
        except urllib.error.HTTPError as error:
            if method == "HEAD" and error.code in (403, 405, 501):
                continue
            return {"url": url, "status": error.code, "error": str(error.reason)}
        except (urllib.error.URLError, OSError, ValueError) as error:
            return {"url": url, "status": None, "error": str(getattr(error, "reason", error))}
    return {"url": url, "status": None, "error": "no answer"}


def check_links(site: Path, workers: int = 8, check=check_link) -> list[dict]:
    links = external_links(site)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(check, links))
    return [{**r, "pages": links[r["url"]][:5]} for r in results]


def run(out: Path, python: str = sys.executable) -> None:
    """Every check, each leaving its report in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "versions.json").write_text(json.dumps(versions(), indent=1) + "\n", encoding="utf-8")
    chapters = [str(p.relative_to(ROOT)) for p in manifest.chapters()]
    pytest = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--rootdir", str(ROOT)]
    nbval = ["--dist", "loadfile", "--nbval", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg"]
    # the kernel-start retry of make's chapter runs (tests/plugins/nbval_kernels.py)
    plugins = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "plugins")}
    chapter_run = [*pytest, "-p", "nbval_kernels", *nbval, f"--junitxml={out / 'chapters.xml'}", *chapters]
    subprocess.run(chapter_run, cwd=ROOT, check=False, env=plugins)
    tests = [str(p.relative_to(ROOT)) for p in transformers_tests()]
    subprocess.run([*pytest, f"--junitxml={out / 'transformers.xml'}", *tests], cwd=ROOT, check=False)
    site = ROOT / "_build" / "html"
    built = (site / "index.html").exists() and os.environ.get("SITE_BUILD", "success") == "success"
    links = check_links(site) if built else []
    (out / "links.json").write_text(json.dumps({"built": built, "links": links}, indent=1) + "\n", encoding="utf-8")


def _quote(message: str) -> list[str]:
    lines = message.strip().splitlines()
    if len(lines) > MESSAGE_LINES:
        lines = [*lines[:MESSAGE_LINES], f"... ({len(lines) - MESSAGE_LINES} more lines)"]
    return ["```text", *(line.replace("```", "ʼʼʼ") for line in lines), "```"]


def _failures(report: Path, what: str) -> tuple[list[str], int]:
    """(Markdown lines, number of failures) for one JUnit report."""
    if not report.is_file():
        return [f"- **{what}: no report** (the run stopped before pytest wrote one)."], 1
    _, notebooks = parse_junit(report)
    failed = [n for n in notebooks if n["result"] == "failed"]
    if not failed:
        return [f"- {what}: all {len(notebooks)} passed."], 0
    lines = [f"- **{what}: {len(failed)} of {len(notebooks)} failed.**", ""]
    for entry in failed:
        for cell in entry["failed"]:
            where = f"cell {cell['cell']}" if isinstance(cell["cell"], int) else cell["cell"]
            lines += [
                f"<details><summary><code>{entry['notebook']}</code>, {where}</summary>",
                "",
                *_quote(cell["message"]),
            ]
            lines += ["", "</details>", ""]
    return lines, sum(len(n["failed"]) for n in failed)


def report(folder: Path, run_url: str | None = None) -> tuple[str, int]:
    """(the issue's body, how many things broke) from the reports ``run`` left in ``folder``."""
    found = json.loads((folder / "versions.json").read_text(encoding="utf-8"))
    lines = [MARK, "", "Tested against:", "", "| package | pinned | tested |", "|---|---|---|"]
    lines += [f"| {name} | {v['pinned']} | {v['tested']} |" for name, v in found.items()]
    lines += ["", "### Chapters (English, nbval)", ""]
    chapter_lines, broken = _failures(folder / "chapters.xml", "chapters")
    lines += chapter_lines
    lines += ["", "### Tests that compare with transformers", ""]
    test_lines, test_broken = _failures(folder / "transformers.xml", "test files")
    lines += test_lines
    broken += test_broken
    lines += ["", "### External links of the site", ""]
    links_file = folder / "links.json"
    links = json.loads(links_file.read_text(encoding="utf-8")) if links_file.is_file() else {"built": False}
    if not links.get("built"):
        lines.append("- **The site did not build**, so its links were not checked.")
        broken += 1
    else:
        bad = [r for r in links["links"] if r["status"] is None or r["status"] >= 400]
        lines.append(f"- {len(links['links']) - len(bad)} of {len(links['links'])} links answered.")
        if bad:
            lines += ["", "| link | answer | linked from |", "|---|---|---|"]
            for r in bad:
                answer = str(r["status"] or r["error"]).replace("|", "/")
                lines.append(f"| <{r['url']}> | {answer} | {', '.join(r['pages'])} |")
        broken += len(bad)
    if run_url:
        lines += ["", f"The run: {run_url}"]
    head = "Nothing broke." if not broken else f"{broken} failures."
    return "\n".join([lines[0], "", head, *lines[1:]]) + "\n", broken


def gh(*args: str) -> str:
    return subprocess.run(["gh", *args], check=True, capture_output=True, text=True).stdout


def publish(body_file: Path) -> int:
    """Open, update or close the one issue; 1 when something broke."""
    body = body_file.read_text(encoding="utf-8")
    broke = not body.split("\n", 3)[2].startswith("Nothing broke")
    issues = json.loads(
        gh("issue", "list", "--state", "open", "--search", f'"{TITLE}" in:title', "--json", "number,title")
    )
    issue = next((i["number"] for i in issues if i["title"] == TITLE), None)
    if broke and issue is None:
        print(gh("issue", "create", "--title", TITLE, "--body-file", str(body_file)).strip())
    elif broke:
        gh("issue", "edit", str(issue), "--body-file", str(body_file))
        print(f"issue #{issue} updated")
    elif issue is not None:
        gh("issue", "close", str(issue), "--comment", "This week's check passed:\n\n" + body)
        print(f"issue #{issue} closed")
    return 1 if broke else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run").add_argument("--out", type=Path, required=True)
    rep = sub.add_parser("report")
    rep.add_argument("folder", type=Path)
    rep.add_argument("--out", type=Path, required=True)
    sub.add_parser("publish").add_argument("body", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.out)
        return 0
    if args.command == "report":
        server, repo, run_id = (os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
        run_url = f"{server}/{repo}/actions/runs/{run_id}" if server and repo and run_id else None
        body, broken = report(args.folder, run_url)
        args.out.write_text(body, encoding="utf-8")
        print(f"{broken} failures; the issue's body is {args.out}")
        return 0
    return publish(args.body)


if __name__ == "__main__":
    sys.exit(main())
