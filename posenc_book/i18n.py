"""The book's editions and the language of the few strings its code prints in prose.

The book is published in English (``en``), Simplified Chinese (``zh-hans``) and Traditional
Chinese (``zh-hant``). The three editions run the same code cells and show the same outputs,
with one exception: chapter 11's claims ledger, whose verdicts and reasons are prose and are
printed in the edition's language.

:func:`language` decides which: the environment variable ``POSENC_BOOK_LANG`` if it is set,
otherwise the edition folder the notebook runs in (``zh-hans/book/`` or ``zh-hant/book/``,
the kernel's working directory in Jupyter and under nbval), otherwise English. On Colab, where
a notebook runs in ``/content``, set ``os.environ["POSENC_BOOK_LANG"] = "zh-hans"`` first.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import yaml

from .data import data_path

#: The editions, in the order the language links list them.
LANGUAGES = ("en", "zh-hans", "zh-hant")
#: Each edition's name in its own language.
LANGUAGE_NAMES = {"en": "English", "zh-hans": "简体中文", "zh-hant": "繁體中文"}

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
        "line": "line {n}",
        "lines": "lines {n}",
        "pending": "chapter {number} (pending)",
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
        "line": "第 {n} 行",
        "lines": "第 {n} 行",
        "pending": "第 {number} 章（待写）",
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
        "line": "第 {n} 行",
        "lines": "第 {n} 行",
        "pending": "第 {number} 章（待寫）",
        "test": "測試",
        "source": "文獻：",
    },
}


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
