"""posenc_book's small helpers: the diagonal spread, cosine similarities, escaping."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from repo import extension

from posenc_book.diagnostics import cosine_similarity_matrix, diagonal_spread, escape


def test_diagonal_spread_of_a_toeplitz_matrix_is_zero_and_of_others_is_the_largest_gap():
    offsets = torch.arange(5)[None, :] - torch.arange(5)[:, None]  # [m, n] = n - m
    assert diagonal_spread(torch.sin(offsets.double())) == 0.0
    bumped = torch.sin(offsets.double())
    bumped[1, 3] += 0.5  # diagonal n - m = 2
    assert diagonal_spread(bumped) == pytest.approx(0.5)
    assert diagonal_spread(bumped, max_offset=1) == 0.0  # that diagonal is left out
    assert diagonal_spread(torch.zeros(2, 7)) == 0.0  # not square


@given(st.integers(2, 8), st.integers(0, 3))
def test_diagonal_spread_matches_its_definition(n, max_offset):
    a = torch.randn(n, n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    reach = min(max_offset, n - 1)
    expected = max((torch.diagonal(a, o).max() - torch.diagonal(a, o).min()).item() for o in range(-reach, reach + 1))
    assert diagonal_spread(a, max_offset) == expected


def test_diagonal_spread_rejects_what_is_not_a_matrix():
    with pytest.raises(ValueError, match=r"matrix must be 2-D, got shape \(3,\)"):
        diagonal_spread(torch.zeros(3))


def test_cosine_similarity_matrix_hand_values():
    sim = cosine_similarity_matrix(torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, -2.0]]))
    expected = torch.tensor([[1, 2**-0.5, 0], [2**-0.5, 1, -(2**-0.5)], [0, -(2**-0.5), 1]], dtype=torch.float64)
    assert sim.dtype == torch.float64 and torch.allclose(sim, expected, atol=1e-15)


def test_escape_leaves_quotes_alone():
    assert escape("a < b & \"c\" > 'd'") == "a &lt; b &amp; \"c\" &gt; 'd'"


def test_source_names_and_the_verdict_table_speak_each_editions_language():
    import yaml

    from posenc_book import data_path
    from posenc_book.i18n import source_name
    from posenc_book.ledger import counts_table_html

    assert source_name("002", "en") == "the survey"
    assert source_name("002", "en", capital=True) == "The survey"
    assert source_name("004", "zh-hans") == "《实现讲解》" and source_name("004", "zh-hant") == "《實現講解》"
    with pytest.raises(ValueError, match=r"document must be one of 000, 001, 002, 003, 004; got '005'"):
        source_name("005", "en")
    with pytest.raises(ValueError, match="lang must be one of en, zh-hans, zh-hant"):
        source_name("000", "fr")
    claims = yaml.safe_load(data_path("claims.yaml").read_text(encoding="utf-8"))
    table = counts_table_html(claims, "en")
    assert table.count("<tr>") == 1 + 5 + 1  # header, five documents, all five
    last = table.rsplit("<tr>", 1)[1]
    assert f"<td>{len(claims)}</td></tr>" in last and "All five" in last
    assert "《綜述》" in counts_table_html(claims, "zh-hant") and "错误" in counts_table_html(claims, "zh-hans")


def test_tables_are_markdown_with_escaped_cells_and_aligned_numbers():
    from posenc_book.tables import show_table, table_markdown

    text = table_markdown(["name", "value"], [["a|b", 1.5], [None, 2]])
    assert text.splitlines() == ["| name | value |", "|:--|--:|", "| a\\|b | 1.5 |", "| – | 2 |"]
    assert show_table(["x"], [["y"]]).data == "| x |\n|:--|\n| y |"
    with pytest.raises(ValueError, match=r"rows\[1\] has 1 values; the header has 2"):
        table_markdown(["a", "b"], [[1, 2], [3]])
    with pytest.raises(ValueError, match="align must be 2 letters from l, r and c"):
        table_markdown(["a", "b"], [[1, 2]], align="lx")


def test_a_figure_on_a_phone_keeps_8_points_at_9_pixels(tmp_path):
    """book/_ext/page_style.py: the width at which 8 points of a PNG are 9 CSS pixels, from the
    resolution matplotlib records; and each output figure of a page is wrapped once."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    style = extension("page_style")
    images = tmp_path / "_images"
    images.mkdir()
    fig = plt.figure(figsize=(7.0, 3.4))
    fig.savefig(images / "ab12.png", dpi=110)
    plt.close(fig)
    width = style.phone_width(images / "ab12.png")
    assert width == math.ceil(770 * 9 / (8 * 110 / 72))  # 567 of 770 pixels
    assert 8 * 110 / 72 * width / 770 >= 9  # 8 points, shown at that width, are 9 pixels
    page = tmp_path / "book" / "page.html"
    page.parent.mkdir()
    html = '<p><img alt="a plot" src="../_images/ab12.png" /></p><img src="../_static/logo.png">'
    wrapped = style.with_phone_widths(html, page)
    assert wrapped == (
        f'<p><span class="phone-scroll wide"><img style="--phone-width: {width}px" alt="a plot" '
        'src="../_images/ab12.png" /></span></p><img src="../_static/logo.png">'
    )
    assert style.with_phone_widths(wrapped, page) == wrapped  # a second build wraps nothing twice


def test_inline_code_keeps_its_words_and_loses_only_their_spans():
    """book/_ext/page_style.py: Sphinx's one span per word of inline code is unwrapped (the API
    page's 8,900 of them cost every browser, and axe-core's contrast rule, their layout);
    the text, the code element and every other span stay."""
    style = extension("page_style")
    html = (
        '<code class="docutils literal notranslate"><span class="pre">apply_rope(q,</span> '
        '<span class="pre">k)</span></code> <span class="n"><span class="pre">x</span></span>'
    )
    assert style.repair(html) == (
        '<code class="docutils literal notranslate">apply_rope(q, k)</code> <span class="n">x</span>'
    )
    assert style.repair(style.repair(html)) == style.repair(html)
