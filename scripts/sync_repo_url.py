"""Write everything derived from the repository URL, which is set once, in ``_config.yml``.

Usage: python scripts/sync_repo_url.py [--check | --publish]

``repository.url`` (``https://github.com/OWNER/REPO``) is where the publishing workflow
publishes the book; the site's address follows, ``https://OWNER.github.io/REPO/`` (GitHub
Pages). Neither exists until the book is published there, so no committed file presents them
as live: the README names both as what the workflow will produce, and the site links to the
repository only in a build made by that workflow on that repository
(``book/_ext/publication.py``). This script writes:

- the two addresses in ``README.md``;
- the first code cell of every chapter, which installs the book's package where it is
  missing (on Colab, say) from ``git+URL``, with the ``book`` extra; on the site it is
  folded away (tag ``hide-cell``).

Chapters are edited in their MyST twins (``book/md_src/``); ``make notebooks`` carries the
change into the notebooks. ``--check`` writes nothing and exits 1 if any file is out of
date (the test suite runs it). ``--publish``, for the release workflow only (in its own
checkout, never committed), adds the project URLs to ``pyproject.toml`` and the addresses to
``CITATION.cff``, so that the wheel and the citation it publishes carry them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling scripts
import manifest  # noqa: E402

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
    """The source of every chapter's first code cell.

    Where the notebook sits in the book's sources (a clone, a release's source archive), it
    installs those; elsewhere (Colab, a notebook on its own) the repository the book is
    published from, and if that cannot be reached it says where to get the sources."""
    url = repository()[0]
    return f"""{INSTALL_MARK} install it first.
import importlib
import importlib.util
import pathlib
import subprocess
import sys

if importlib.util.find_spec("posenc_book") is None:
    # the sources this notebook is in, if any; else the book's repository
    here = pathlib.Path.cwd().resolve()
    tops = [f for f in (here, *here.parents) if (f / "posenc_book" / "data").is_dir()]
    package = "posenc[book] @ git+{url}"
    if tops:
        package = f"{{tops[0]}}[book]"
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    if subprocess.run([*pip, package]).returncode != 0:
        raise RuntimeError(
            f"pip could not install {{package}}. Get the book's sources (a clone or a "
            "release's source archive) and run this notebook from its folder in them."
        )
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
    for md in (ROOT / "book" / "md_src" / f"{stem}.md" for stem in manifest.chapter_stems()):
        files[md] = with_install_cell(md.read_text(encoding="utf-8"))
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    text = re.sub(r"`https://github\.com/[\w.-]+/[\w.-]+`", f"`{url}`", text)
    text = re.sub(r"`https://[\w.-]+\.github\.io/[\w.-]+/`", f"`{site_url()}`", text)
    files[readme] = text
    return files


def published_files() -> dict[Path, str]:
    """``pyproject.toml`` and ``CITATION.cff`` as the release workflow publishes them: with the
    project URLs and the repository's and site's addresses."""
    url = repository()[0]
    pyproject = ROOT / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    text = re.sub(r"\n\[project\.urls\]\n(?:.+\n)*", "\n", text)
    urls = (
        "[project.urls]\n"
        f'Homepage = "{site_url()}"\n'
        f'Documentation = "{site_url()}book/api.html"\n'
        f'Repository = "{url}"\n'
        f'Issues = "{url}/issues"\n'
        f'Changelog = "{url}/blob/main/CHANGELOG.md"\n'
        f'Errata = "{site_url()}book/errata.html"\n'
    )
    text = text.replace("\n[tool.setuptools", f"\n{urls}\n[tool.setuptools", 1)
    citation = ROOT / "CITATION.cff"
    cff = re.sub(r"^(repository-code|url): .*\n", "", citation.read_text(encoding="utf-8"), flags=re.M)
    cff = cff.replace("\nlicense:", f'\nrepository-code: "{url}"\nurl: "{site_url()}"\nlicense:', 1)
    return {pyproject: text, citation: cff}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    if "--publish" in argv:
        for path, text in published_files().items():
            path.write_text(text, encoding="utf-8")
            print(f"written: {path.relative_to(ROOT).as_posix()} (for publication; do not commit)")
        return 0
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
