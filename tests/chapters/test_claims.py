"""The claims ledger's prose numbers about itself are the ledger's: the figure's alt text and the
first exercise's answer count what posenc_book/data/claims.yaml holds."""

import re
from collections import Counter

import yaml
from repo import ROOT

from posenc_book.i18n import source_name

CLAIMS = yaml.safe_load((ROOT / "posenc_book" / "data" / "claims.yaml").read_text(encoding="utf-8"))
CHAPTER = (ROOT / "book" / "md_src" / "13_claims.md").read_text(encoding="utf-8")
VERDICTS = ("correct", "wrong", "imprecise", "untestable")
WORDS = {n: w for n, w in enumerate("zero one two three four five six seven eight nine ten".split())}
WORDS.update({11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen", 16: "sixteen"})


def counts(seed: str) -> list[int]:
    found = Counter(c["verdict"] for c in CLAIMS if c["seed"] == seed)
    return [found[v] for v in VERDICTS]


def test_the_figures_alt_text_counts_the_ledger():
    alt = " ".join(re.search(r"alt: '(Stacked horizontal bar chart.*?)'", CHAPTER, re.S).group(1).split())
    for seed in ("000", "001", "002", "003", "004"):
        numbers = counts(seed)
        written = f"{source_name(seed, 'en')}: {', '.join(map(str, numbers))}"
        assert written.lower() in alt.lower(), f"the alt text should say {written!r}"
        assert f"({sum(numbers)}" in alt.lower().split(written.lower(), 1)[1][:16]
    most = max(("000", "001", "002", "003", "004"), key=lambda s: (sum(counts(s)), counts(s)[1]))
    assert most == "002" and "The survey makes the most claims and the most wrong ones" in alt


def test_the_first_exercises_answer_counts_the_ledger():
    note, everything = counts("003"), Counter(c["verdict"] for c in CLAIMS)
    survey = counts("002")
    why = " ".join(CHAPTER.split("The short note makes", 1)[1].split("```", 1)[0].split())
    assert why.startswith(f"{WORDS[sum(note)]} claims, and {WORDS[note[1]]} of them are wrong")
    share, whole = note[1] / sum(note), everything["wrong"] / len(CLAIMS)
    assert 0.17 < share < 0.2 and "nearly a fifth" in why
    assert round(1 / whole) == 8 and "about one in eight for the whole ledger" in why
    one_in = WORDS[round(sum(survey) / survey[1])]
    assert f"{WORDS[survey[1]]} of its {sum(survey)} claims, about one in {one_in}" in why
