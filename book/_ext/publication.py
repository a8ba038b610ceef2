"""Where the site was built from, and the links that exist only once the book is published.

Every page's footer names the version of the book and the package (``posenc/_version.py``)
and, in a git checkout, the commit the site was built from, and links to the errata.

The repository's address is set once, as ``repository.url`` in ``_config.yml``. It exists
only once the book is published there, so the links that lead to it (the repository and
issue buttons, Binder and Colab, the chapters' links to their notebooks and to the tests
on GitHub) are shown only in a build made by the publishing workflow on that repository:
``.github/workflows/book.yml`` sets ``POSENC_PUBLISHED_FROM`` to the repository it runs in
(``github.server_url/github.repository``), and the links appear when that is
``repository.url``. Any other build (``make book`` on a clone, a fork's workflow, a
release's source archive) leaves them out and links to the notebook served with the site.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOOTER = {  # (version, commit, errata) in the edition's language
    "en": ("Version {version}", "built from commit {commit}", "Errata"),
    "zh_CN": ("版本 {version}", "构建自提交 {commit}", "勘误"),
    "zh_TW": ("版本 {version}", "建置自提交 {commit}", "勘誤"),
}


def book_version() -> str:
    text = (ROOT / "posenc" / "_version.py").read_text(encoding="utf-8")
    return re.search(r'__version__ = "([^"]+)"', text).group(1)


def commit() -> str | None:
    """The commit checked out, with ``+`` when the tree differs from it; None outside git."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=20
        )
        if head.returncode:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def published(repository_url: str, published_from: str | None = None) -> bool:
    """Whether this build is the publishing workflow's, on the repository ``repository.url`` names."""
    where = os.environ.get("POSENC_PUBLISHED_FROM", "") if published_from is None else published_from
    norm = lambda url: url.strip().rstrip("/").lower()  # noqa: E731
    return bool(where.strip()) and norm(where) == norm(repository_url)


def _config_inited(app, config) -> None:
    options = config.html_theme_options
    app.env_published = published(options.get("repository_url", ""))
    if not app.env_published:
        options["repository_url"] = ""
        options["use_repository_button"] = False
        options["use_issues_button"] = False
        options["use_edit_page_button"] = False
        options["launch_buttons"] = {**options.get("launch_buttons", {}), "binderhub_url": "", "colab_url": ""}
    config.posenc_version = book_version()
    config.posenc_commit = commit()


def _footer(app, pagename, templatename, context, doctree) -> None:
    version_text, commit_text, errata_text = FOOTER.get(app.config.language or "en", FOOTER["en"])
    parts = [html.escape(version_text.format(version=app.config.posenc_version))]
    if app.config.posenc_commit:
        parts.append(html.escape(commit_text.format(commit=app.config.posenc_commit)))
    errata = context["pathto"]("book/errata")
    parts.append(f'<a href="{html.escape(errata)}">{html.escape(errata_text)}</a>')
    context["theme_extra_footer"] = '<p class="posenc-version">' + " · ".join(parts) + "</p>"


def setup(app):
    app.add_config_value("posenc_version", "", "html")
    app.add_config_value("posenc_commit", None, "html")
    app.connect("config-inited", _config_inited, priority=100)
    app.connect("html-page-context", _footer)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
