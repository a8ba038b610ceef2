"""The Chinese editions: one set of code, one set of outputs, prose kept in step.

``scripts/editions.py`` builds ``zh-hans/`` from the English chapters and the Simplified
translation, and ``zh-hant/`` from ``zh-hans/``. These tests hold the editions to that: the
same cells in the same order, code and outputs byte for byte (the claims ledger's, printed
in the edition's language, aside), every page translated, every translated text made from
the current English, and the generated files up to date.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import editions  # scripts/editions.py
import nbformat
import pytest
import yaml
from repo import ROOT, chapter_notebooks, extension, toc_files

from posenc_book import i18n
from posenc_book.ledger import chapter_sections, ledger_html

EDITIONS = ("zh-hans", "zh-hant")
CHAPTERS = [p.name for p in chapter_notebooks()]
HAN = re.compile(r"[\u4e00-\u9fff]")


def read(path):
    return nbformat.read(path, as_version=4)


def kept(markdown: str) -> Counter:
    """What a translation must carry over unchanged: roles' targets, links' targets, math,
    inline code and directive lines (a caption's text aside)."""
    text = editions.ANCHOR.sub("", markdown)
    found = Counter()
    for line in text.splitlines():
        if line.startswith(("```{", ":::{")) or re.match(r"^:(?!caption)[a-z-]+:", line):
            found["line " + line.split(" ", 1)[0] if line.startswith(("```{", ":::{")) else "line " + line] += 1
    for role, target in re.findall(r"\{(cite[:a-z]*|py:[a-z]+|doc|ref)\}`([^`]*)`", text):
        found[f"{role} {target}"] += 1
    for target in re.findall(r"\{term\}`(?:[^`<]*<)?([^`>]*)>?`", text):
        found[f"term {target}"] += 1
    found.update("link " + t for t in re.findall(r"\]\(([^)\s]+)\)", text))
    found.update(
        "math " + re.sub(r"\\text\{[^}]*\}|\s", "", m) for m in re.findall(r"\$\$.*?\$\$|\$[^$]+\$", text, re.S)
    )
    return found


@pytest.mark.parametrize("lang", EDITIONS)
def test_every_english_page_has_its_counterpart(lang):
    toc = yaml.safe_load((ROOT / lang / "_toc.yml").read_text(encoding="utf-8"))
    english = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    assert toc["root"] == english["root"]
    assert [[c["file"] for c in p["chapters"]] for p in toc["parts"]] == [
        [c["file"] for c in p["chapters"]] for p in english["parts"]
    ]
    for page in toc_files():
        suffix = ".ipynb" if (ROOT / f"{page}.ipynb").exists() else ".md"
        assert (ROOT / lang / f"{page}{suffix}").exists(), f"{lang}/{page}{suffix} is missing"


@pytest.mark.parametrize("lang", EDITIONS)
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_same_code_cells_and_outputs(lang, chapter):
    """Cell for cell: code, tags and outputs identical; only localised cells' outputs differ,
    and those in language, not in kind (nbval runs them in their edition's folder)."""
    en, zh = read(ROOT / "book" / chapter), read(ROOT / lang / "book" / chapter)
    assert [(c.id, c.cell_type) for c in zh.cells] == [(c.id, c.cell_type) for c in en.cells]
    for ours, theirs in zip(zh.cells, en.cells, strict=True):
        if theirs.cell_type != "code":
            continue
        assert ours.source == theirs.source, f"{lang}/{chapter} {ours.id}: code differs"
        assert ours.metadata.get("tags") == theirs.metadata.get("tags"), ours.id
        assert ours.execution_count == theirs.execution_count, ours.id
        if editions.LOCALISED in theirs.metadata.get("tags", []):
            assert [o.output_type for o in ours.outputs] == [o.output_type for o in theirs.outputs], ours.id
            assert ours.outputs != theirs.outputs, f"{ours.id}: the ledger is not in {lang}"
        else:
            assert ours.outputs == theirs.outputs, f"{lang}/{chapter} {ours.id}: outputs differ"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_prose_is_translated_and_complete(chapter):
    """Every Markdown cell is in Chinese and keeps each formula, role, link and directive of
    the English cell (it may repeat one, as Chinese sometimes does); every figure's alt text
    is translated."""
    en, zh = read(ROOT / "book" / chapter), read(ROOT / "zh-hans" / "book" / chapter)
    for ours, theirs in zip(zh.cells, en.cells, strict=True):
        if theirs.cell_type == "markdown":
            assert HAN.search(ours.source), f"{chapter} {ours.id} is not translated"
            lost = set(kept(theirs.source)) - set(kept(ours.source))
            assert not lost, f"{chapter} {ours.id} lost {sorted(lost)}"
        alt = ours.metadata.get("mystnb", {}).get("image", {}).get("alt")
        if alt is not None:
            assert HAN.search(alt) and alt != theirs.metadata["mystnb"]["image"]["alt"], ours.id


def test_translations_follow_the_current_english():
    """Each translated cell and page records the English it translates; an English edit
    makes it stale until the translation is updated (scripts/editions.py --mark-current)."""
    stale = []
    for chapter in CHAPTERS:
        en, zh = read(ROOT / "book" / chapter), read(ROOT / "zh-hans" / "book" / chapter)
        for ours, theirs in zip(zh.cells, en.cells, strict=True):
            if "posenc" not in ours.metadata:
                continue
            key = theirs.source if theirs.cell_type == "markdown" else json.dumps(theirs.metadata["mystnb"])
            if ours.metadata["posenc"]["en_sha"] != editions.sha(key):
                stale.append(f"{chapter} {ours.id}")
    for page in editions.PAGES:
        head = (ROOT / "zh-hans" / "book" / f"{page}.md").read_text(encoding="utf-8").split("\n", 1)[0]
        english = (ROOT / "book" / f"{page}.md").read_text(encoding="utf-8")
        if head != f"% en-sha: {editions.sha(english)}":
            stale.append(f"{page}.md")
    assert not stale, f"translations of English text that has changed since: {stale}"


def test_generated_files_are_up_to_date(capsys):
    assert editions.main(["--check"]) == 0, capsys.readouterr().out


def test_the_api_page_documents_the_same_objects():
    blocks = re.compile(r"```\{eval-rst\}.*?```", re.S)
    english = blocks.findall((ROOT / "book" / "api.md").read_text(encoding="utf-8"))
    for lang in EDITIONS:
        assert blocks.findall((ROOT / lang / "book" / "api.md").read_text(encoding="utf-8")) == english


def test_traditional_conversion_uses_the_phrase_table():
    hant = editions.Converter(editions.manifest.edition("zh-hant"))
    assert hant("模型参数和循环神经网络的激活函数") == "模型參數和循環神經網路的激活函數"
    assert hant("旋转位置编码的代码默认在内存里") == "旋轉位置編碼的程式碼預設在記憶體裡"
    assert hant("`x = 1`, $\\theta_i$") == "`x = 1`, $\\theta_i$"


def test_a_quotation_of_a_source_is_not_converted():
    """Around a quotation the text becomes Taiwan usage; the quotation keeps the document's words
    and script (性能 is not 表現 there, 数据 not 資料)."""
    hant = editions.Converter(editions.manifest.edition("zh-hant"))
    text = "《实现讲解》说正弦编码“在性能和数据上都很好”，这个说法的数据不足。"
    assert hant(text) == "《實現講解》說正弦編碼「在性能和数据上都很好」，這個說法的資料不足。"
    assert hant("“在性能和数据上都很好”") == "「在效能和資料上都很好」"  # without the name, it is ordinary text


def test_the_ledger_words_of_the_traditional_edition_are_the_converted_simplified_ones():
    """posenc_book cannot run OpenCC on a reader's machine, so its Traditional words are
    written out; they must be what the Traditional edition's conversion makes of the
    Simplified ones."""
    hant = editions.Converter(editions.manifest.edition("zh-hant"))
    assert {k: hant(v) for k, v in i18n.WORDS["zh-hans"].items()} == i18n.WORDS["zh-hant"]


def test_language_follows_the_setting_and_the_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("POSENC_BOOK_LANG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert i18n.language() == "en"
    (tmp_path / "zh-hant" / "book").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "zh-hant" / "book")
    assert i18n.language() == "zh-hant"
    monkeypatch.setenv("POSENC_BOOK_LANG", "zh-hans")
    assert i18n.language() == "zh-hans"
    monkeypatch.setenv("POSENC_BOOK_LANG", "fr")
    with pytest.raises(ValueError, match=r"POSENC_BOOK_LANG must be one of en, zh-hans, zh-hant; got 'fr'"):
        i18n.language()
    with pytest.raises(ValueError, match="lang must be a Chinese edition"):
        i18n.claim_texts("en")


@pytest.mark.parametrize("lang", EDITIONS)
def test_the_ledger_speaks_the_edition(monkeypatch, lang):
    claims = yaml.safe_load((ROOT / "posenc_book" / "data" / "claims.yaml").read_text(encoding="utf-8"))
    texts = i18n.claim_texts(lang)
    assert list(texts) == [c["id"] for c in claims]
    # a claim that is a formula (003-04) has no Han character, only Chinese punctuation
    assert all(re.search(r"[\u4e00-\u9fff，。]", t["claim"]) and HAN.search(t["reason"]) for t in texts.values())
    sections = chapter_sections(lang)
    assert {k: set(v) for k, v in sections.items()} == {k: set(v) for k, v in chapter_sections("en").items()}
    monkeypatch.setenv("POSENC_BOOK_LANG", lang)
    shown = "".join(ledger_html(claims, seed, chapter_sections()) for seed in ("000", "001", "002", "003", "004"))
    assert shown.count('<div id="claim-') == len(claims)
    verdicts = re.findall(r'class="verdict verdict-(\w+)"[^>]*>([^<]*)<', shown)
    assert len(verdicts) == len(claims) and all(word == i18n.WORDS[lang][v] for v, word in verdicts)
    assert all(texts[c["id"]]["reason"].replace("&", "&amp;").replace("<", "&lt;") in shown for c in claims)


def test_chinese_search_indexes_the_glossary_terms():
    ext = extension("editions")
    terms = ext.glossary_terms(ROOT / "zh-hans" / "book" / "glossary.md")
    assert {"旋转位置编码", "位置编码", "相对位置编码"} <= set(terms)
    ext._TERMS[:] = terms
    search = ext.SearchChinese({})
    words = search.split("旋转位置编码是一种相对位置编码")
    assert {"旋转位置编码", "相对位置编码", "旋转", "位置", "编码"} <= set(words)
    assert ext.language_links("book/06_rope", "zh-hans").count('href="../../') == 2
    english = ext.SearchEnglish({}).split("The rotary position embedding (旋转位置编码, RoPE)")
    assert {"rotary", "旋转位置编码", "位置编码", "旋转"} <= set(english)


def test_chinese_search_stems_as_sphinx_does_from_a_set_of_its_own():
    """Sphinx's Chinese search remembers every Latin word in a list shared by the class and
    scans it for each word it stems; ours keeps a set per index, and must stem the same."""
    from sphinx.search.zh import SearchChinese as Sphinx

    ext = extension("editions")
    ext._TERMS[:] = []
    texts = ["RoPE 旋转 the q and k vectors", "ALiBi adds a bias; the NTK base", "xPos, YaRN 与 LongRoPE"]
    ours, theirs = ext.SearchChinese({}), Sphinx({})
    before = list(Sphinx.latin_terms)
    sphinx_keeps = []
    for text in texts:
        ours.split(text)
        sphinx_keeps += [t.strip() for t in Sphinx.latin1_letters.findall(text)]
    assert Sphinx.latin_terms == before, "ours must not grow the list Sphinx's class shares"
    assert isinstance(ours.latin_terms, set) and ours.latin_terms == set(sphinx_keeps)
    theirs.latin_terms = sphinx_keeps  # what Sphinx's own split would have left
    words = ["RoPE", "ALiBi", "NTK", "xPos", "YaRN", "LongRoPE", "vectors", "adds", "bias", "the", "running", "ABS"]
    assert [ours.stem(w) for w in words] == [theirs.stem(w) for w in words]
    assert ext.SearchChinese({}).latin_terms == set(), "each index starts with no words"


def test_links_that_name_a_chapter_use_its_title():
    """ "第 10 章 …" and "8. …" links in the Chinese pages give the chapter's own title."""
    titles = {}
    for chapter in CHAPTERS:
        first = next(c.source for c in read(ROOT / "zh-hans" / "book" / chapter).cells if c.cell_type == "markdown")
        titles[chapter[:-6]] = re.search(r"^# (.+)$", first, re.M).group(1)
    for page in editions.PAGES:
        text = (ROOT / "zh-hans" / "book" / f"{page}.md").read_text(encoding="utf-8")
        for shown, target in re.findall(r"\[(?:\d+\. |第 \d+ 章 )([^\]]+)\]\((\w+)\)", text):
            assert shown == titles[target], f"{page}.md names {target} {shown!r}, its title is {titles[target]!r}"


def test_a_new_edition_is_an_entry_of_editions_yaml_and_no_code(monkeypatch):
    """An edition converted from another (here Hong Kong usage, from the Simplified text) is
    one entry of posenc_book/data/editions.yaml: scripts/editions.py builds its chapters,
    pages, configuration, ledger and errata from that entry alone."""
    hk = editions.manifest.Edition(
        "zh-hk", "zh-HK", "zh_TW", "繁體中文（香港）", "Traditional Chinese (Hong Kong)", "zh-hans",
        {"opencc": "s2hk", "phrases": "scripts/zh_hant_phrases.tsv"},
    )  # fmt: skip
    listed = editions.manifest.translations()
    monkeypatch.setattr(editions.manifest, "translations", lambda root=ROOT: [*listed, hk])
    monkeypatch.setattr(
        editions.manifest, "edition", lambda folder, root=ROOT: {e.folder: e for e in [*listed, hk]}[folder]
    )
    files = editions.expected_files()
    ours = sorted(p for p in files if p.startswith("zh-hk/") or ".zh-hk." in p)
    assert ours == sorted(
        [f"zh-hk/book/{p.name}" for p in chapter_notebooks()]
        + [f"zh-hk/book/{page}.md" for page in editions.PAGES]
        + ["zh-hk/_config.yml", "zh-hk/_toc.yml"]
        + [
            f"posenc_book/data/{name}.zh-hk.{ext}"
            for name, ext in (("sections", "json"), ("claims", "yaml"), ("errata", "yaml"))
        ]
    )
    config = yaml.safe_load(files["zh-hk/_config.yml"])
    assert config["title"] == "位置編碼，逐一驗證" and config["repository"]["path_to_book"] == "zh-hk"
    # every Chinese text converted from the Simplified one, the code and outputs the English ones
    hk_nb, en_nb = (
        nbformat.reads(files["zh-hk/book/06_rope.ipynb"], as_version=4),
        read(ROOT / "book" / "06_rope.ipynb"),
    )
    assert [c.source for c in hk_nb.cells if c.cell_type == "code"] == [
        c.source for c in en_nb.cells if c.cell_type == "code"
    ]
    assert hk_nb.metadata["posenc"]["edition"] == "zh-hk"
    assert files["zh-hant/book/06_rope.ipynb"] == (ROOT / "zh-hant" / "book" / "06_rope.ipynb").read_text(
        encoding="utf-8"
    )


def test_the_translated_ledger_names_the_chapters_the_english_names():
    """A reason that says 第 9 章 where the English says chapter 11 was translated before a renumbering."""
    english = {c["id"]: c for c in yaml.safe_load((ROOT / "posenc_book" / "data" / "claims.yaml").read_text("utf-8"))}
    translated = yaml.safe_load((ROOT / "posenc_book" / "data" / "claims.zh-hans.yaml").read_text("utf-8"))
    wrong = []
    for key, entry in translated.items():
        text = english[key]["claim"] + " " + english[key]["reason"]
        named = set(re.findall(r"[Cc]hapters? (\d+)", text)) | set(re.findall(r"(?:,| and| or) (\d+)\b", text))
        wrong += [
            f"{key}: 第 {n} 章" for n in re.findall(r"第 (\d+) 章", entry["claim"] + entry["reason"]) if n not in named
        ]
    assert wrong == []
