"""Accessibility properties checked without a browser: verdict colours, the page stylesheet.

The browser checks (axe-core on every page) are in tests/site/test_browser.py.
"""

from __future__ import annotations

from posenc_book.ledger import VERDICT_BACKGROUNDS, VERDICT_TEXT_COLOURS, claim_block


def luminance(colour: str) -> float:
    """WCAG 2 relative luminance of a #rrggbb colour."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_contrast_formula_on_known_pairs():
    assert round(contrast("#000000", "#ffffff"), 2) == 21.0
    assert round(contrast("#777777", "#ffffff"), 2) == 4.48  # the classic just-fails grey


def test_verdict_words_pass_wcag_aa_on_every_background():
    for verdict, colour in VERDICT_TEXT_COLOURS.items():
        for background in VERDICT_BACKGROUNDS:
            assert contrast(colour, background) >= 4.5, (verdict, colour, background)


def test_a_verdict_is_written_not_only_coloured():
    claim = {
        "id": "000-01",
        "location": "line 3",
        "verdict": "imprecise",
        "quote": "q",
        "translation": "t",
        "claim": "c",
        "reason": "r",
        "chapter": "02_sinusoidal#the-definition",
        "test": "",
    }
    html = claim_block(claim, {"02_sinusoidal": {"the-definition": "The definition"}})
    assert 'class="verdict verdict-imprecise"' in html and ">imprecise</b>" in html
