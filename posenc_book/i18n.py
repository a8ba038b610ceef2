"""The book's editions and the language of the few strings its code prints in prose.

The book is published in English (``en``), Simplified Chinese (``zh-hans``) and Traditional
Chinese (``zh-hant``). The three editions run the same code cells and show the same outputs,
with one exception: the claims ledger (``13_claims``), whose verdicts and reasons are prose and are
printed in the edition's language.

:func:`language` decides which: the environment variable ``POSENC_BOOK_LANG`` if it is set,
otherwise the edition folder the notebook runs in (``zh-hans/book/`` or ``zh-hant/book/``,
the kernel's working directory in Jupyter and under nbval), otherwise English. On Colab, where
a notebook runs in ``/content``, set ``os.environ["POSENC_BOOK_LANG"] = "zh-hans"`` first.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import yaml

from .data import data_path

_EDITIONS = yaml.safe_load(data_path("editions.yaml").read_text(encoding="utf-8"))
#: The editions, in the order the language links list them (posenc_book/data/editions.yaml).
LANGUAGES = tuple(e["folder"] or "en" for e in _EDITIONS)
#: Each edition's name in its own language.
LANGUAGE_NAMES = {e["folder"] or "en": e["name"] for e in _EDITIONS}

#: The ledger's words, per edition (verdicts, labels).
WORDS = {
    "en": {
        "correct": "correct",
        "wrong": "wrong",
        "imprecise": "imprecise",
        "untestable": "untestable",
        "claim": "Claim:",
        "why": "why",
        "decided by": "Decided by",
        "chapter": "chapter {number}: ",
        "ledger": "this page: ",
        "line": "line {n}",
        "lines": "lines {n}",
        "pending": "{stem}, a chapter still to be written",
        "test": "test",
        "source": "source:",
    },
    "zh-hans": {
        "correct": "正确",
        "wrong": "错误",
        "imprecise": "不精确",
        "untestable": "无法检验",
        "claim": "论断：",
        "why": "理由",
        "decided by": "判定依据：",
        "chapter": "第 {number} 章：",
        "ledger": "本页：",
        "line": "第 {n} 行",
        "lines": "第 {n} 行",
        "pending": "{stem}（尚未写成的一章）",
        "test": "测试",
        "source": "文献：",
    },
    "zh-hant": {
        "correct": "正確",
        "wrong": "錯誤",
        "imprecise": "不精確",
        "untestable": "無法檢驗",
        "claim": "論斷：",
        "why": "理由",
        "decided by": "判定依據：",
        "chapter": "第 {number} 章：",
        "ledger": "本頁：",
        "line": "第 {n} 行",
        "lines": "第 {n} 行",
        "pending": "{stem}（尚未寫成的一章）",
        "test": "測試",
        "source": "文獻：",
    },
}


#: The short names the introduction gives the five source documents, per edition.
SOURCE_NAMES = {
    "en": {
        "000": "the primer",
        "001": "the textbook section",
        "002": "the survey",
        "003": "the short note",
        "004": "the walkthrough",
    },
    "zh-hans": {
        "000": "《入门短文》",
        "001": "《教材章节》",
        "002": "《综述》",
        "003": "《短笔记》",
        "004": "《实现讲解》",
    },
    "zh-hant": {
        "000": "《入門短文》",
        "001": "《教材章節》",
        "002": "《綜述》",
        "003": "《短筆記》",
        "004": "《實現講解》",
    },
}
#: The ledger's table headings, per edition.
TABLE_WORDS = {
    "en": {"document": "document", "total": "total", "all": "All five"},
    "zh-hans": {"document": "文档", "total": "合计", "all": "五份合计"},
    "zh-hant": {"document": "文檔", "total": "合計", "all": "五份合計"},
}


def source_name(document: str, lang: str | None = None, *, capital: bool = False) -> str:
    """The short name of source document ``document`` (``"000"`` to ``"004"``) in ``lang``.

    Raises:
        ValueError: If ``document`` is not one of the five, or ``lang`` is not an edition.
    """
    names = SOURCE_NAMES[check_language(lang or language())]
    if document not in names:
        raise ValueError(f"document must be one of {', '.join(names)}; got {document!r}")
    name = names[document]
    return name[0].upper() + name[1:] if capital else name


#: The quotation marks of the Chinese editions: the Simplified “…”, the Traditional (Taiwan) 「…」.
QUOTE_MARKS = {"zh-hans": ("“", "”"), "zh-hant": ("「", "」")}


def source_quotes(text: str, lang: str) -> list[tuple[str, re.Match]]:
    """Where a Chinese edition's ``text`` quotes a source document: ``[(document, match)]``.

    A quotation is a “…” (「…」 in Taiwan usage) that follows the document's name (《…》) in
    the same sentence, within 40 characters; ``match.group("quote")`` is the quoted text, which
    is the document's own sentence as written (in its own script) in both Chinese editions.
    """
    names = SOURCE_NAMES[check_language(lang)]
    if lang == "en":
        raise ValueError("lang must be a Chinese edition (zh-hans or zh-hant); English quotes are translations")
    by_name = {name: document for document, name in names.items()}
    opens, closes = QUOTE_MARKS[lang]
    pattern = re.compile(
        "(?P<name>"
        + "|".join(map(re.escape, by_name))
        + f")[^{opens}{closes}。\\n]{{0,40}}?"
        + f"{opens}(?P<quote>[^{closes}\\n]+){closes}"
    )
    return [(by_name[m.group("name")], m) for m in pattern.finditer(text)]


def check_language(lang: str, argument: str = "lang") -> str:
    """``lang`` itself if it names an edition; otherwise a ``ValueError`` naming the editions."""
    if lang not in LANGUAGES:
        raise ValueError(f"{argument} must be one of {', '.join(LANGUAGES)}; got {lang!r}")
    return lang


def language() -> str:
    """The edition the running notebook belongs to: ``en``, ``zh-hans`` or ``zh-hant``."""
    chosen = os.environ.get("POSENC_BOOK_LANG")
    if chosen:
        return check_language(chosen, "POSENC_BOOK_LANG")
    for part in reversed(Path.cwd().parts):
        if part in LANGUAGES[1:]:
            return part
    return "en"


def word(key: str, lang: str | None = None) -> str:
    """One of the ledger's words (:data:`WORDS`) in ``lang`` (default: :func:`language`)."""
    return WORDS[check_language(lang or language())][key]


@cache
def claim_texts(lang: str) -> dict[str, dict[str, str]]:
    """``{claim id: {"claim": …, "reason": …}}`` in a Chinese edition's language.

    English texts are the ledger's own (``data/claims.yaml``); the Chinese ones are
    ``data/claims.zh-hans.yaml`` and, converted from it, ``data/claims.zh-hant.yaml``.
    """
    if check_language(lang) == "en":
        raise ValueError("lang must be a Chinese edition (zh-hans or zh-hant); the English texts are in claims.yaml")
    return yaml.safe_load(data_path(f"claims.{lang}.yaml").read_text(encoding="utf-8"))
