"""Write everything derived from the repository URL, which is set once, in ``_config.yml``.

Usage: python scripts/sync_repo_url.py [--check]

From ``repository.url`` (``https://github.com/OWNER/REPO``) follow:

- the site's address, ``https://OWNER.github.io/REPO/`` (GitHub Pages);
- the clone command and the site's address in ``README.md``;
- the project URLs in ``pyproject.toml`` and the addresses in ``CITATION.cff``;
- the introduction's link to the published PDF (``SITE/posenc-book.pdf``), in the English
  and Simplified editions (the Traditional one is generated); a Simplified introduction that
  was current with the English one stays current (its ``% en-sha:`` line follows);
- the first code cell of every chapter, which installs the book's package where it is
  missing (on Colab, say) from ``git+URL``, with the ``book`` extra; on the site it is
  folded away (tag ``hide-cell``).

Chapters are edited in their MyST twins (``book/md_src/``); ``make notebooks`` carries the
change into the notebooks. ``--check`` writes nothing and exits 1 if any file is out of
date (the test suite runs it).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
INSTALL_MARK = "# Colab, or any Python without the book's package:"
# On the site the cell is folded away ("Show code cell"); in a notebook it runs first.
INSTALL_HEADER = (
    "```{code-cell} ipython3\n---\nmystnb:\n  code_prompt_hide: Hide the install cell\n"
    "  code_prompt_show: Show the install cell (for Colab)\ntags: [hide-cell]\n---\n"
)


def repository() -> tuple[str, str, str]:
    """``(url, owner, name)`` of the repository, from ``_config.yml``."""
    url = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"].rstrip("/")
    match = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+)", url)
    if not match:
        raise SystemExit(f"_config.yml: repository.url must be https://github.com/OWNER/REPO, got {url!r}")
    return url, match.group(1), match.group(2)


def site_url() -> str:
    _, owner, name = repository()
    return f"https://{owner.lower()}.github.io/{name}/"


def install_cell() -> str:
    """The source of every chapter's first code cell."""
    url = repository()[0]
    return f"""{INSTALL_MARK} install it first.
import importlib
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("posenc_book") is None:
    package = "posenc[book] @ git+{url}"
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, package], check=True)
    importlib.invalidate_caches()"""


def with_install_cell(markdown: str) -> str:
    """A chapter's MyST source whose first code cell is the install cell."""
    head, sep, rest = markdown.partition("```{code-cell} ipython3\n")
    if not sep:
        raise ValueError("a chapter without code cells")
    first, _, after = rest.partition("```\n")
    cell = INSTALL_HEADER + install_cell() + "\n```\n"
    if any(line.startswith(INSTALL_MARK) for line in first.splitlines()[:12]):  # header, then the mark
        return head + cell + after
    return head + cell + "\n" + sep + rest


def expected_files() -> dict[Path, str]:
    """{path: its text as it should be} for every file derived from the URL."""
    url, owner, name = repository()
    files = {}
    for md in sorted((ROOT / "book" / "md_src").glob("[0-9][0-9]_*.md")):
        files[md] = with_install_cell(md.read_text(encoding="utf-8"))
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    text = re.sub(r"git clone https://github\.com/\S+", f"git clone {url}.git", text)
    text = re.sub(r"https://[\w.-]+\.github\.io/[\w.-]+/", site_url(), text)
    files[readme] = text
    pyproject = ROOT / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    text = re.sub(r'^Homepage = ".*"$', f'Homepage = "{site_url()}"', text, flags=re.M)
    text = re.sub(r'^Documentation = ".*"$', f'Documentation = "{site_url()}book/api.html"', text, flags=re.M)
    text = re.sub(r'^Repository = ".*"$', f'Repository = "{url}"', text, flags=re.M)
    text = re.sub(r'^Issues = ".*"$', f'Issues = "{url}/issues"', text, flags=re.M)
    text = re.sub(r'^Changelog = ".*"$', f'Changelog = "{url}/blob/main/CHANGELOG.md"', text, flags=re.M)
    files[pyproject] = text
    pdf_link = re.compile(r'<a href="[^"]*posenc-book\.pdf">')
    intro, zh_intro = ROOT / "book" / "intro.md", ROOT / "zh-hans" / "book" / "intro.md"
    old_intro = intro.read_text(encoding="utf-8")
    new_intro = pdf_link.sub(f'<a href="{site_url()}posenc-book.pdf">', old_intro)
    files[intro] = new_intro
    text = pdf_link.sub(f'<a href="{site_url()}posenc-book.pdf">', zh_intro.read_text(encoding="utf-8"))
    sys.path.insert(0, str(ROOT / "scripts"))
    from editions import sha

    text = text.replace(f"% en-sha: {sha(old_intro)}\n", f"% en-sha: {sha(new_intro)}\n", 1)
    files[zh_intro] = text
    citation = ROOT / "CITATION.cff"
    text = citation.read_text(encoding="utf-8")
    text = re.sub(r"^repository-code: .*$", f'repository-code: "{url}"', text, flags=re.M)
    text = re.sub(r"^url: .*$", f'url: "{site_url()}"', text, flags=re.M)
    files[citation] = text
    return files


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in expected_files().items():
        if path.read_text(encoding="utf-8") != text:
            stale.append(path.relative_to(ROOT).as_posix())
            if not check:
                path.write_text(text, encoding="utf-8")
    if check and stale:
        print(
            "out of date with _config.yml's repository.url: "
            + ", ".join(stale)
            + "; run python scripts/sync_repo_url.py",
            file=sys.stderr,
        )
        return 1
    print("\n".join(f"written: {p}" for p in stale) or "everything derived from the repository URL is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
