"""Words the Traditional (Taiwan) edition must get right, beyond what OpenCC's s2twp knows.

``zh-hant/`` is converted from ``zh-hans/`` by ``scripts/editions.py``. These tests hold the
conversion to Taiwan usage where a mechanical conversion reads the mainland way.

Rows and columns: on the mainland a row is 行 and a column 列; in Taiwan a row is 列 and a
column 欄, and 行 reads as a column. ``scripts/zh_hant_rows.txt`` lists every row and column
of the Simplified text in its context. A 行 left in the Traditional text must be a line of
text or code (or part of a word such as 執行), and a 列 of the Simplified text that means a
column must be one the list decides, so that it becomes 欄.
"""

from __future__ import annotations

import re
from functools import cache

import editions  # scripts/editions.py
import nbformat
import pytest
from repo import ROOT

from posenc_book import i18n

#: 行 as a line of text or code in the Traditional edition: the only 行 a row may not be.
LINES = re.compile(
    r"\d+ 行(?:程式碼|實作|顯示出來的程式碼)"  # 25 行程式碼, 25 行實作 RoPE, 每分鐘讀 20 行顯示出來的程式碼
    r"|[一兩幾四]行(?:程式碼|公式|文字|小字)"  # 四行程式碼, 這兩行公式, 一行文字, 一行小字, 幾行程式碼, 那一行程式碼
    r"|那一行(?:的(?:相同)?註[解釋]|上方|上)"  # 正弦那一行的註解, position 那一行上方, 源文件那一行上
    r"|這一行建立|該行末尾|同一行末尾|同樣幾行上|兩行上的註[解釋]|一行與此相同"  # lines of the tutorials' code
    r"|文件中的哪一行|最後一行會說明|第二行就是最後一個詞元|合併為一行|逐行手工計算|逐行審查|行號"
)
#: Words in which 行 is neither a row nor a line.
WORDS_WITH_HANG = re.compile(
    r"執行|進行|運行|並行|平行|行為|換行|可行|自行|另行|不行|行不通|行得通|各行其是|反其道而行|行程"
)
#: Words in which 列 is not a column (a sequence, a list, to list, to line up).
WORDS_WITH_LIE = re.compile(
    r"序列|列表|排列|列出|系列|数列|并列|队列|列举|罗列|下列|列入|列为|列在|列成|所列|各列一张表"
)
MAINLAND = {  # how the converted text would read with the mainland's 行 and 列, and what it must say
    "按行计算的 softmax": "按列計算的 softmax",
    "对行和列做置换": "對列和欄做置換",
    "第 $i$ 行从第 $n_q - 1 - i$ 列开始": "第 $i$ 列從第 $n_q - 1 - i$ 欄開始",
    "查询（行）对 11 个键（列）": "查詢（列）對 11 個鍵（欄）",
    "投影矩阵的行": "投影矩陣的列",
    "表中有两列可以用代码核对": "表中有兩欄可以用程式碼核對",
}
KEPT = {  # lines of text and code, and 行 and 列 in other words, as s2twp writes them
    "只用四行代码就能算出它": "只用四行程式碼就能算出它",
    "并用 25 行代码写出来": "並用 25 行程式碼寫出來",
    "完整的目录按类别各列一张表": "完整的目錄按類別各列一張表",
    "按顺序列出这些值": "按順序列出這些值",
    "序列维在前": "序列維在前",
}


def without_quotations(text: str) -> str:
    """The Traditional ``text`` without its quotations of the sources: those are the documents'
    words as written (not converted), so their 行 and 列 are theirs, not the book's."""
    for _, match in reversed(i18n.source_quotes(text, "zh-hant")):
        text = text[: match.start("quote")] + text[match.end("quote") :]
    return text


def traditional_texts() -> list[tuple[str, str]]:
    """``(where, text)`` of every converted text of the Traditional edition as committed,
    its quotations of the sources left out (:func:`without_quotations`)."""
    found = []
    for path in sorted((ROOT / "zh-hant" / "book").glob("*.ipynb")):
        for number, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "markdown":
                found.append((f"{path.name} [{number}]", cell.source))
            mystnb = cell.metadata.get("mystnb", {})
            for key, field in (("image", "alt"), ("figure", "caption")):
                if field in mystnb.get(key, {}):
                    found.append((f"{path.name} [{number}] {field}", mystnb[key][field]))
    for path in sorted((ROOT / "zh-hant" / "book").glob("*.md")):
        found.append((path.name, path.read_text(encoding="utf-8")))
    for name in ("claims.zh-hant.yaml", "errata.zh-hant.yaml"):
        found.append((name, (ROOT / "posenc_book" / "data" / name).read_text(encoding="utf-8")))
    return [(where, without_quotations(text)) for where, text in found]


@cache
def hant_converter() -> editions.Converter:
    return editions.Converter(editions.manifest.edition("zh-hant"))


@cache
def simplified_texts() -> tuple[str, ...]:
    """Every text the Traditional edition is converted from (pages, prose, alt texts,
    captions, claims, errata), as ``scripts/editions.py`` hands them to the converter."""
    seen, hant, probe = [], hant_converter(), editions.simplified_form

    def convert(text: str) -> str:
        seen.append(text)
        return hant(text)

    editions.simplified_form = lambda entry, traditional, _: probe(entry, traditional, hant)  # not its trials
    try:
        editions.expected_files(lambda edition: convert)
    finally:
        editions.simplified_form = probe
    return tuple(dict.fromkeys(seen))


def rows_read_as_columns(text: str) -> list[str]:
    """The places where a 行 of the Traditional text is neither a line nor part of a word:
    a row (or a column) written the mainland way, which a Taiwanese reader takes for a column."""
    text = WORDS_WITH_HANG.sub("", LINES.sub("", text))
    return [text[max(0, m.start() - 12) : m.end() + 8].replace("\n", " ") for m in re.finditer("行", text)]


def undecided_columns(simplified: str, hant) -> list[str]:
    """The places where the Simplified text uses 列 for a column that the row and column list
    does not decide (it would stay 列, a row in Taiwan)."""
    text = WORDS_WITH_LIE.sub(lambda m: "\0" * len(m.group()), hant.mark_rows_and_columns(simplified))
    return [text[max(0, m.start() - 12) : m.end() + 8].replace("\n", " ") for m in re.finditer("列", text)]


def test_the_checks_flag_the_mainland_forms():
    hant = hant_converter()
    for mainland in (
        "按行計算的",
        "交換第 0 行和第 3 行",
        "每一行都有錯",
        "行向量",
        "行和",
        "矩陣的行",
        "表中對應的行",
    ):
        assert rows_read_as_columns(mainland), mainland
    for line in ("只用四行程式碼", "25 行實作 RoPE", "這兩行公式", "圖下方的一行文字", "執行這一章"):
        assert not rows_read_as_columns(line), line
    for column in ("第 9 列", "列向量", "列和", "矩阵的列", "每一列"):
        assert undecided_columns(column, hant), column
    for word in ("序列", "列出", "按类别各列一张表", "差距列在"):
        assert not undecided_columns(word, hant), word


@pytest.mark.parametrize("simplified", MAINLAND)
def test_rows_become_lie_and_columns_lan(simplified):
    assert hant_converter()(simplified) == MAINLAND[simplified]


@pytest.mark.parametrize("simplified", KEPT)
def test_lines_and_other_words_keep_their_characters(simplified):
    assert hant_converter()(simplified) == KEPT[simplified]


def test_no_row_reads_as_a_column_in_the_traditional_edition():
    """Every 行 left in zh-hant is a line of text or code (``LINES``) or part of a word."""
    found = [f"{where}: …{hit}…" for where, text in traditional_texts() for hit in rows_read_as_columns(text)]
    assert not found, (
        "行 that reads as a column in Taiwan; if it is a row, add its context to "
        f"scripts/zh_hant_rows.txt, if it is a line of text or code, to LINES: {found}"
    )


def test_every_column_of_the_simplified_text_is_decided():
    """Every 列 of zh-hans that is not part of a word (序列, 列出…) is a column that
    ``scripts/zh_hant_rows.txt`` decides, so that zh-hant writes 欄."""
    hant = hant_converter()
    found = [hit for text in simplified_texts() for hit in undecided_columns(text, hant)]
    assert not found, (
        f"列 not decided; add its context to scripts/zh_hant_rows.txt (or the word to WORDS_WITH_LIE): {found}"
    )


def test_every_row_and_column_context_is_used():
    """A context the text no longer has is a decision nobody checks: remove or update it."""
    hant, used = hant_converter(), set()
    for text in simplified_texts():
        for context, marked in hant.contexts:  # as mark_rows_and_columns applies them
            if context in text:
                used.add(context)
                text = text.replace(context, marked)
    unused = [c for c, _ in hant.contexts if c not in used]
    assert not unused, f"contexts in scripts/zh_hant_rows.txt that no text uses: {unused}"


def glossary_fields(lang: str, label: str) -> dict[str, str]:
    """``{headword: the field after label (繁体 or 簡體)}`` of an edition's glossary entries."""
    text = (ROOT / lang / "book" / "glossary.md").read_text(encoding="utf-8")
    return {
        entry.split("\n")[0]: match.group(1)
        for entry in text.split("\n\n")
        if (match := re.search(rf"；{label} ([^。；（）]+(?:（[^（）]*）)?)", entry))
    }


def test_the_traditional_glossary_gives_the_simplified_edition_s_terms():
    """簡體 X in zh-hant's glossary is the term as zh-hans writes it, not the Traditional
    term converted back character by character (which kept 遮罩, 快取, 內插, 全域)."""
    import opencc

    fields = glossary_fields("zh-hant", "簡體")
    assert len(fields) == len(glossary_fields("zh-hans", "繁体")) > 25
    assert {k: fields[k] for k in ("因果遮罩", "鍵值快取", "位置內插", "局部注意力與全域注意力", "bfloat16")} == {
        "因果遮罩": "因果掩码",
        "鍵值快取": "键值缓存",
        "位置內插": "位置插值",
        "局部注意力與全域注意力": "局部注意力与全局注意力",
        "bfloat16": "bfloat16",
    }
    hans = (ROOT / "zh-hans" / "book" / "glossary.md").read_text(encoding="utf-8")
    outside_fields = editions.GLOSSARY_FIELD.sub("", hans)
    simplified = opencc.OpenCC("t2s").convert
    for headword, field in fields.items():
        for word in re.findall(r"[^、（）]*[\u4e00-\u9fff][^、（）]*", field):
            assert word in outside_fields and simplified(word) == word, (headword, word)


def test_a_glossary_field_that_no_simplified_word_gives_fails_the_build():
    entry = "因果掩码\ncausal mask\n  英文 causal mask；繁体 因果屏蔽。像解码器中那样。"
    with pytest.raises(SystemExit, match="因果屏蔽"):
        editions.glossaries(entry, hant_converter())
    hans, hant = editions.glossaries(entry.replace("因果屏蔽", "因果遮罩"), hant_converter())
    assert "简体" not in hant and "簡體 因果掩码。" in hant and "繁体 因果遮罩。" in hans


TAIWAN = {  # the phrase table's Taiwan words, and the contexts its short keys must leave alone
    # a compute kernel stays "kernel", spaced from Han characters; a Jupyter kernel is 核心
    "每个运算启动一个内核，每个内核都从内存读取": "每個運算啟動一個 kernel，每個 kernel 都從記憶體讀取",
    "使用 AVX-512、AVX2 或通用内核时": "使用 AVX-512、AVX2 或通用 kernel 時",
    "融合的 Triton 内核": "融合的 Triton kernel",
    "运行内核": "執行 kernel",
    "包括内核启动的时间": "包括核心啟動的時間",
    "并返回 `x`": "並傳回 `x`",
    "再运行同一层": "再執行同一層",
    "说明运行了多少条检查": "說明執行了多少條檢查",
    "用整数来演示": "用整數來示範",
    "注释说错了轴": "註解說錯了軸",
    "凡是依赖随机数的结果": "凡是依賴亂數的結果",
    "用随机数据初始化": "用隨機資料初始化",
    # a model's quality is 表現; speed keeps 效能
    "在文本上性能下降": "在文本上表現下降",
    "以获得更好的性能": "以獲得更好的表現",
    "GPU 的性能": "GPU 的效能",
    # a RoPE type is a 類型; a data type stays 型別
    "针对每种 rope 类型": "針對每種 rope 類型",
    "张量的数据类型": "張量的資料型別",
    "上下文窗口和滑动窗口": "上下文視窗和滑動視窗",
    "远程衰减": "長程衰減",
    "远程服务器": "遠端伺服器",
    # short keys: 库 (library), 标志 (flag), 异常 (exception), 包中 (in the package)
    "Python 标准库": "Python 標準函式庫",
    "数据库、语料库和知识库": "資料庫、語料庫和知識庫",
    "一个 `alibi` 标志": "一個 `alibi` 旗標",
    "这标志着一个转折": "這標誌著一個轉折",
    "会抛出异常": "會拋出例外",
    "剔除异常值": "剔除異常值",
    "直接取自包中源码": "直接取自套件中原始碼",
    "打包中的序列": "打包中的序列",
    # from a Taiwanese reader's review
    "缺省时取配置类的默认值": "未設定時取設定類別的預設值",
    "没有通过这项检验": "沒有通過這項檢驗",
    "按原文的说法得不到支持": "按原文的說法得不到支持",
    "三个只依赖 torch 的小函数": "三個只依賴 torch 的小函式",
    "从 wheel 安装的包": "從 wheel 安裝的套件",
    "同一个 pytest 进程": "同一個 pytest 行程",
}
#: Mainland words the Traditional edition must not show (Taiwan: 傳回, 執行, 示範, 註解, 亂數,
#: 視窗, 長程, a RoPE 類型; 效能 is speed, a model's quality its 表現).
MAINLAND_WORDS = re.compile(r"返回|運行|演示|註釋|隨機數|窗口|遠程|rope 型別|效能下降|更好的效能")
#: 核心 where it is not a compute kernel: a Jupyter kernel, a core API, core code, a CPU core.
CORE = re.compile(r"核心(?:啟動的時間| API|程式碼|章節)|CPU 核心")


@pytest.mark.parametrize("simplified", TAIWAN)
def test_the_phrase_table_writes_taiwan_words(simplified):
    assert hant_converter()(simplified) == TAIWAN[simplified]


def test_no_mainland_word_is_left_in_the_traditional_edition():
    found = [
        f"{where}: …{text[max(0, m.start() - 10) : m.end() + 6]}…"
        for where, text in traditional_texts()
        for m in MAINLAND_WORDS.finditer(text)
    ]
    assert not found, found


def test_a_compute_kernel_is_not_a_core():
    """s2twp writes 内核 as 核心, a processor core ("通用核心", general-purpose cores)."""
    found = [
        f"{where}: …{text[max(0, m.start() - 10) : m.end() + 6]}…"
        for where, text in traditional_texts()
        for m in re.finditer("核心", CORE.sub("", text))
    ]
    assert not found, found
