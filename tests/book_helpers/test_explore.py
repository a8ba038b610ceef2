"""The explorable figures of posenc_book.explore: self-contained HTML, posenc's numbers, a static fallback."""

from __future__ import annotations

import base64
import json
import math
import re
import struct
from html.parser import HTMLParser

import pytest
import torch

from posenc import (
    alibi_slopes,
    ntk_scaled_base,
    rope_inv_freq,
    sinusoidal_frequencies,
    sinusoidal_table,
    t5_relative_position_bucket,
)
from posenc_book import explore

F64 = torch.float64
BUILDERS = {
    "sinusoidal-base": explore.sinusoidal_base_explorer,
    "rope-rotation": explore.rope_rotation_explorer,
    "rope-scaling": explore.rope_scaling_explorer,
    "relative-bias": explore.relative_bias_explorer,
}
PLAIN = {
    "sinusoidal-base": "<explorable: sinusoidal encoding heatmap, base 10 to 100000, 9 steps>",
    "rope-rotation": "<explorable: RoPE rotation of one 2-D pair, q at m and k at n in 0..15, theta 1 rad>",
    "rope-scaling": "<explorable: RoPE scaling stretch, head_dim 128, base 10000, factor 1 to 32, 6 steps>",
    "relative-bias": "<explorable: ALiBi bias and T5 buckets against distance 0..128, 8 heads>",
}


class Elements(HTMLParser):
    """Every start tag as ``(tag, attrs)``, and the text inside each <script>."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.scripts, self._script = [], [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._script = (dict(attrs), [])

    def handle_data(self, data):
        if self._script is not None:
            self._script[1].append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script[0], "".join(self._script[1])))
            self._script = None

    def all(self, tag: str) -> list[dict]:
        return [attrs for t, attrs in self.tags if t == tag]


@pytest.fixture(scope="module")
def bundles() -> dict[str, dict]:
    return {name: build()._repr_mimebundle_() for name, build in BUILDERS.items()}


def embedded(bundle: dict) -> dict:
    """The JSON the widget draws from, parsed back."""
    (data,) = [text for attrs, text in Elements(bundle["text/html"]).scripts if attrs.get("type") == "application/json"]
    return json.loads(data)


def close(got, want, *, digits: int = 4) -> bool:
    """``got`` is ``want`` rounded to ``digits`` significant digits (element by element for lists)."""
    if isinstance(got, list):
        return len(got) == len(want) and all(close(g, w, digits=digits) for g, w in zip(got, want, strict=True))
    return (
        abs(got - want) <= 0.5 * 10 ** (math.floor(math.log10(abs(want))) - digits + 1) * 1.0001 if want else got == 0
    )


@pytest.mark.parametrize("name", BUILDERS)
def test_the_bundle_is_html_and_one_line_of_text(bundles, name):
    bundle = bundles[name]
    assert set(bundle) == {"text/html", "text/plain"}  # no image/png: the fallback lives inside the HTML
    assert bundle["text/plain"] == PLAIN[name]
    assert repr(BUILDERS[name]()) == PLAIN[name]


@pytest.mark.parametrize("name", BUILDERS)
def test_nothing_is_fetched_from_anywhere(bundles, name):
    page = bundles[name]["text/html"]
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.I)
    assert not re.search(r"<link\b|<iframe\b|@import|url\(|fetch\(|XMLHttpRequest", page, re.I)
    found = Elements(page)
    assert all("src" not in attrs for attrs in found.all("script"))
    links = [v for _, attrs in found.tags for k, v in attrs.items() if k in ("src", "href", "srcset", "action")]
    assert links and all(v.startswith("data:image/png;base64,") for v in links)


@pytest.mark.parametrize("name", BUILDERS)
def test_the_html_is_the_same_on_every_call_and_ids_come_from_the_name(bundles, name):
    page = bundles[name]["text/html"]
    assert BUILDERS[name]()._repr_mimebundle_()["text/html"] == page
    ids = [attrs["id"] for _, attrs in Elements(page).tags if "id" in attrs]
    assert ids[0] == f"explore-{name}" and all(i.startswith(f"explore-{name}") for i in ids)
    assert len(ids) == len(set(ids))
    renamed = BUILDERS[name](name="second")._repr_mimebundle_()["text/html"]
    assert 'id="explore-second"' in renamed and f"explore-{name}" not in renamed


def test_a_name_that_is_not_an_id_is_refused():
    with pytest.raises(ValueError, match="lowercase words"):
        explore.relative_bias_explorer(name="Bad Name")


@pytest.mark.parametrize("name", BUILDERS)
def test_every_slider_is_labelled_and_speaks_its_value(bundles, name):
    found = Elements(bundles[name]["text/html"])
    labels = {attrs["for"] for attrs in found.all("label")}
    sliders = [attrs for attrs in found.all("input") if attrs.get("type") == "range"]
    assert sliders
    data = embedded(bundles[name])
    for k, slider in enumerate(sliders):
        assert slider["id"] in labels
        assert slider["min"] == "0" and int(slider["max"]) == len(data["T"][k]) - 1
        assert slider["aria-valuetext"] == data["T"][k][int(slider["value"])]
    (output,) = found.all("output")
    assert output["aria-live"] == "polite" and output["for"].split() == [s["id"] for s in sliders]


@pytest.mark.parametrize("name", BUILDERS)
def test_the_static_fallback_is_a_png_with_alt_text(bundles, name):
    found = Elements(bundles[name]["text/html"])
    (img,) = found.all("img")
    assert "explorable-static" in img["class"].split()
    assert len(img["alt"].split()) >= 15
    png = base64.b64decode(img["src"].split(",", 1)[1], validate=True)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (720, 300)
    assert b"Software" not in png  # no version stamp: the bytes depend on the figure alone
    (canvas,) = found.all("canvas")
    assert canvas["role"] == "img" and canvas["aria-label"] == img["alt"]
    assert any("explorable-live" in attrs.get("class", "") for attrs in found.all("div"))


@pytest.mark.parametrize("name", BUILDERS)
def test_print_and_no_script_show_the_static_image(bundles, name):
    page = bundles[name]["text/html"]
    assert ".explorable-static{display:none}" in page
    assert "@media print{.explorable-live{display:none}.explorable-static{display:block;max-width:100%}}" in page
    assert re.search(r"<noscript><style>#explore-[a-z-]+ \.explorable-static\{display:block", page)
    assert '<div class="explorable-live" hidden>' in page  # shown by the script, so never empty without it


def test_the_heatmap_is_posencs_table(bundles):
    data = embedded(bundles["sinusoidal-base"])
    assert data["bases"] == [10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000]
    for base, packed, lam in zip(data["bases"], data["tables"], data["wavelengths"], strict=True):
        raw = base64.b64decode(packed)
        table = torch.tensor(struct.unpack(f"<{len(raw) // 2}h", raw), dtype=F64).view(64, 32) / data["scale"]
        assert (table - sinusoidal_table(64, 32, base=base, dtype=F64)).abs().max() <= 0.5e-4 + 1e-12
        assert close(lam, (2 * math.pi / sinusoidal_frequencies(32, base=base)).tolist())
        assert close(lam[-1], 2 * math.pi * base ** (30 / 32))


def test_the_arrows_are_posencs_rotation_and_the_score_sees_only_the_offset(bundles):
    data = embedded(bundles["rope-rotation"])
    q, k = complex(0.8, 0.75), complex(-0.6, -0.65)
    for p in range(16):
        turn = complex(math.cos(p), math.sin(p))  # theta = 1 rad per position
        assert close(data["q"][p], [(q * turn).real, (q * turn).imag])
        assert close(data["k"][p], [(k * turn).real, (k * turn).imag])
    for m in range(16):
        for n in range(16):
            assert data["dots"][m][n] == data["dots"][m - n if m >= n else 0][0 if m >= n else n - m]
            offset = n - m  # key minus query
            assert close(data["dots"][m][n], (q.conjugate() * k * complex(math.cos(offset), math.sin(offset))).real)
    assert data["dots"][1][3] == 0.4663  # chapter 6: q at m = 1, k at n = 3


def test_the_stretches_are_posencs_frequencies(bundles):
    data = embedded(bundles["rope-scaling"])
    assert data["methods"] == ["linear", "NTK-aware", "dynamic", "YaRN", "Llama 3"]
    theta, _ = rope_inv_freq(128)
    assert data["slow"] == 46  # chapter 7: pairs 46..63 never turn once within 4096 positions
    for f, s in enumerate(data["factors"]):
        linear, ntk, dynamic, yarn, llama3 = (rows[f] for rows in data["stretch"])
        assert linear == [s] * 64 and ntk[0] == yarn[0] == llama3[0] == dynamic[0] == 1
        assert close(ntk[-1], s) and close(yarn[-1], s) and close(llama3[-1], s)
        assert close(dynamic[-1], s * s - (s - 1))  # at L = s L0 the dynamic factor is s L/L0 - (s - 1)
        assert close(ntk, (theta / rope_inv_freq(128, base=ntk_scaled_base(10_000.0, s, 128))[0]).tolist())
        common = {"factor": s, "original_max_position_embeddings": 4096}
        for got, scaling, seq_len in [
            (dynamic, {"rope_type": "dynamic", **common}, s * 4096),
            (yarn, {"rope_type": "yarn", **common}, None),
            (llama3, {"rope_type": "llama3", **common, "low_freq_factor": 1.0, "high_freq_factor": 4.0}, None),
        ]:
            assert close(got, (theta / rope_inv_freq(128, scaling=scaling, seq_len=seq_len)[0]).tolist())


def test_the_biases_are_alibis_and_the_buckets_t5s(bundles):
    data = embedded(bundles["relative-bias"])
    slopes = alibi_slopes(8, dtype=F64)
    assert close(data["slopes"], slopes.tolist()) and data["inverse"] == [2.0**k for k in range(1, 9)]  # 1/2 .. 1/256
    distance = torch.arange(129, dtype=F64)
    assert close(sum(data["bias"], []), (-slopes[:, None] * distance).flatten().tolist())
    causal = t5_relative_position_bucket(-torch.arange(129), bidirectional=False, num_buckets=32, max_distance=128)
    assert data["bucket"] == causal.tolist()
    assert data["bucket"][:16] == list(range(16)) and data["bucket"][-1] == 31


def test_a_second_theta_and_other_sizes_still_work():
    rotated = embedded(explore.rope_rotation_explorer(theta=0.5, max_position=7)._repr_mimebundle_())
    assert len(rotated["dots"]) == 8 and close(
        rotated["q"][2], [0.8 * math.cos(1) - 0.75 * math.sin(1), 0.8 * math.sin(1) + 0.75 * math.cos(1)]
    )
    bias = explore.relative_bias_explorer(12, head=11)
    assert "12 heads" in bias.plain and len(embedded(bias._repr_mimebundle_())["bias"]) == 12
