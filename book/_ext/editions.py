"""Language links between the book's editions, and Chinese search.

The book is built three times: English at the site's root, Simplified Chinese under
``zh-hans/`` and Traditional Chinese under ``zh-hant/`` (``scripts/editions.py`` keeps them in
step). Every page starts with links to the same page in the other editions (the fragment
of the address is kept, since the Chinese pages carry the English headings' anchors), and
its head names them as alternates for search engines.

In a Chinese edition the English parts of a page are marked ``lang="en"`` (the API
documentation, generated from English docstrings), so that a screen reader switches voice,
and the search index is built by :class:`SearchChinese`: Sphinx's Chinese search with the
text segmented by jieba's Rust port (``rjieba``, which ships wheels; ``jieba`` does not),
taught the book's terms from the edition's glossary, so that a term such as 旋转位置编码 is
indexed whole as well as in its parts. The English edition's search segments the Chinese
words its pages quote the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

from repository import script
from sphinx.search.en import SearchEnglish as _SphinxEnglish
from sphinx.search.zh import SearchChinese as _SphinxChinese

manifest = script("manifest")

#: Edition folder, the language tag of its pages, and its name in its own language.
EDITIONS = tuple((e.folder, e.tag, e.name) for e in manifest.editions())
_BY_LANGUAGE = {None: "", **{e.sphinx: e.folder for e in manifest.editions()}}
_TERMS: list[str] = []
#: Words of the book that jieba's dictionary lacks, so that they are found inside the terms
#: (长度外推, 位置插值, 置换等变性, 相对位置分桶), in both scripts.
WORDS = "外推 插值 内插 等变 分桶 掩码 词元 偏移量 底数 波长 外插 內插 等變 掩碼 詞元 底數 波長".split()


def edition_of(app) -> str:
    """The edition's folder ("" for English), from Sphinx's ``language`` setting."""
    return _BY_LANGUAGE[app.config.language]


def language_links(pagename: str, here: str) -> str:
    """The HTML of the language links at the top of a page."""
    to_root = "../" * pagename.count("/") + ("../" if here else "")
    links = []
    for folder, tag, name in EDITIONS:
        if folder == here:
            links.append(f'<span lang="{tag}" aria-current="page">{name}</span>')
            continue
        href = f"{to_root}{folder + '/' if folder else ''}{pagename}.html"
        links.append(f'<a href="{href}" lang="{tag}" hreflang="{tag}">{name}</a>')
    return (
        '<nav class="posenc-languages" aria-label="Language · 语言 · 語言">'
        + " · ".join(links)
        + "</nav><script>document.querySelectorAll('.posenc-languages a').forEach(a => "
        "a.addEventListener('click', () => { a.href = a.href.split('#')[0] + location.hash; }));"
        "</script>"
    )


def _page_context(app, pagename, templatename, context, doctree) -> None:
    if "body" not in context:
        return
    here = edition_of(app)
    context["body"] = language_links(pagename, here) + context["body"]
    to_root = "../" * pagename.count("/") + ("../" if here else "")
    context["metatags"] = context.get("metatags", "") + "".join(
        f'\n<link rel="alternate" hreflang="{tag}" href="{to_root}{folder + "/" if folder else ""}{pagename}.html">'
        for folder, tag, _ in EDITIONS
    )
    if here:  # English docstrings and error messages inside a Chinese page
        body = context["body"].replace('<dl class="py ', '<dl lang="en" class="py ')
        context["body"] = re.sub(r'<table class="([^"]*bad-inputs)', r'<table lang="en" class="\1', body)


def _segmenter():
    """rjieba, taught the book's terms."""
    import rjieba

    jieba = rjieba.Jieba()
    for word in [*_TERMS, *WORDS]:
        jieba.add_word(word, None, None)
    return jieba


def chinese_words(jieba, text: str) -> list[str]:
    """Each word, every known longer word inside it and every two characters in it:
    旋转位置编码 gives 旋转位置编码, 位置编码, 旋转, 转位, 位置, 置编, 编码. (jieba's search
    mode gives only the two-character words its dictionary knows, which is mostly
    Simplified: 旋轉 would be lost in 旋轉位置編碼.)"""
    words = []
    for token in jieba.cut(text):
        if not token.strip():
            continue
        words.append(token)
        words += [
            token[i : i + n]
            for n in range(2, len(token))
            for i in range(len(token) - n + 1)
            if n == 2 or jieba.has_word(token[i : i + n])
        ]
    return words


class SearchChinese(_SphinxChinese):
    """Sphinx's Chinese search, segmenting with rjieba and the book's glossary terms."""

    def init(self, options: dict[str, str]) -> None:
        super().init({})
        self.jieba = _segmenter()
        # Sphinx keeps the Latin words seen so far in a list, shared by the class, and its
        # stem() asks whether each word is in it: a scan of hundreds of thousands of
        # entries per word, most of a Chinese edition's build time (about 3 of its 5
        # minutes). A set of this index's own answers the same question at once.
        self.latin_terms = set()

    def split(self, input: str) -> list[str]:
        latin = [term.strip() for term in self.latin1_letters.findall(input)]
        self.latin_terms.update(latin)
        return chinese_words(self.jieba, input) + latin


class SearchEnglish(_SphinxEnglish):
    """Sphinx's English search; the Chinese words the English pages quote (the glossary's,
    the ledger's) are segmented too, so that 位置编码 is found inside 旋转位置编码."""

    def init(self, options: dict[str, str]) -> None:
        super().init(options)
        self.jieba = None

    def split(self, input: str) -> list[str]:
        words = super().split(input)
        runs = re.findall(r"[\u4e00-\u9fff]+", input)
        if runs:
            self.jieba = self.jieba or _segmenter()
            words += [w for run in runs for w in chinese_words(self.jieba, run)]
        return words


def glossary_terms(path: Path) -> list[str]:
    """The Chinese terms of an edition's glossary: the unindented lines of its glossary
    directive that have Han characters."""
    block = re.search(r"^```\{glossary\}\n(.*?)^```", path.read_text(encoding="utf-8"), re.S | re.M).group(1)
    return [line.strip() for line in block.splitlines() if re.match(r"^[^\s:].*[\u4e00-\u9fff]", line)]


ANCHOR = re.compile(r'<div id="([^"]+)" class="en-anchor"></div>')


def _english_ids(app, doctree) -> None:
    """In a Chinese edition, each section takes the id of the English heading it translates
    (``scripts/editions.py`` puts it in front of the heading), first, so that the contents,
    the heading links and a language switch all use the English edition's anchors."""
    from docutils import nodes

    if not edition_of(app):
        return
    for raw in list(doctree.findall(nodes.raw)):
        found = ANCHOR.fullmatch(raw.astext().strip())
        if not found:
            continue
        section = raw.next_node(nodes.section, include_self=False, descend=False, siblings=True, ascend=True)
        name = found.group(1)
        if section is not None and doctree.ids.get(name, section) is section:
            if name in section["ids"]:  # the Chinese title made the same id (bfloat16)
                section["ids"].remove(name)
            section["ids"].insert(0, name)
            doctree.ids[name] = section
        raw.parent.remove(raw)


def _builder_inited(app) -> None:
    srcdir = Path(app.srcdir)
    if edition_of(app):
        _TERMS[:] = glossary_terms(srcdir / "book" / "glossary.md")
    else:  # the English edition quotes terms in both scripts
        _TERMS[:] = [
            t for lang in ("zh-hans", "zh-hant") for t in glossary_terms(srcdir / lang / "book" / "glossary.md")
        ]


def setup(app):
    app.add_search_language(SearchChinese)
    app.add_search_language(SearchEnglish)
    app.connect("builder-inited", _builder_inited)
    app.connect("html-page-context", _page_context)
    app.connect("doctree-read", _english_ids, priority=400)  # before the contents are collected
    return {"parallel_read_safe": True, "parallel_write_safe": True}
