"""The lossless gate on hand-made outputs: equal, prefix, divergence at k, text, fallbacks."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from trtbench.profiling.loadtest.stats.lossless import (
    first_divergence,
    lossless_summary,
    lossless_warnings,
    match_baseline,
    with_lossless,
)


def _digest(ids: list[int]) -> str:
    # Independent of the code under test: int32 little-endian by hand.
    raw = b"".join(int(i).to_bytes(4, "little", signed=True) for i in ids)
    return hashlib.blake2b(raw, digest_size=8).hexdigest()


def _ids_row(variant, tier, index, ids, repeat=0):
    return {
        "variant": variant,
        "tier": tier,
        "repeat": repeat,
        "request_index": index,
        "request_id": f"{variant}-{tier}-r{repeat}-{index}",
        "output_tokens": len(ids),
        "output_kind": "ids",
        "output_digest": _digest(ids),
        "output_token_ids": " ".join(map(str, ids)),
        "output_chars": pd.NA,
    }


def _text_row(variant, tier, index, text):
    return {
        "variant": variant,
        "tier": tier,
        "repeat": 0,
        "request_index": index,
        "request_id": f"{variant}-{tier}-{index}",
        "output_tokens": 3,
        "output_kind": "text",
        "output_digest": hashlib.blake2b(text.encode(), digest_size=8).hexdigest(),
        "output_token_ids": "",
        "output_chars": len(text),
    }


def _frame(rows):
    return pd.DataFrame(rows)


BASE = [5, 6, 7, 8, 9]


def test_first_divergence_by_definition():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2  # prefix: the shorter length
    assert first_divergence([], [4]) == 0
    assert first_divergence([4, 2], [1, 2]) == 0


def test_equal_outputs_are_ok_and_the_baseline_is_marked():
    out = _frame(
        [_ids_row("base", "c1", i, BASE) for i in range(3)]
        + [_ids_row("spec", "c1", i, BASE) for i in range(3)]
    )
    table = lossless_summary(out, [("base", "c1"), ("spec", "c1")], "base")
    base, spec = table.iloc[0], table.iloc[1]
    assert base["lossless_status"] == "baseline"
    assert spec["lossless_status"] == "ok"
    assert (spec["lossless_compared_count"], spec["lossless_match_count"]) == (3, 3)
    assert spec["lossless_match_ratio"] == 1.0
    assert spec["lossless_first_divergence_min_tokens"] is None
    assert spec["lossless_note"] == "3 matched by same pass"


def test_divergence_at_k_and_prefix_give_the_index_min_and_median():
    rows = [_ids_row("base", "c2", i, BASE) for i in range(4)]
    rows += [
        _ids_row("spec", "c2", 0, BASE),
        _ids_row("spec", "c2", 1, [5, 6, 7, 0, 9]),  # differs at 3
        _ids_row("spec", "c2", 2, [5, 6]),  # a prefix: diverges at 2
        _ids_row("spec", "c2", 3, [5, 6, 7, 8, 9, 10]),  # longer: diverges at 5
    ]
    table = lossless_summary(_frame(rows), [("spec", "c2")], "base")
    row = table.iloc[0]
    assert row["lossless_status"] == "mismatch"
    assert (row["lossless_compared_count"], row["lossless_match_count"]) == (4, 1)
    assert row["lossless_match_ratio"] == 0.25
    assert row["lossless_first_divergence_min_tokens"] == 2
    assert row["lossless_first_divergence_median_tokens"] == 3.0  # median of 3, 2, 5
    assert "cause unclassified" in row["lossless_note"]
    per = match_baseline(_frame(rows), "base").set_index("request_index")
    got = [None if pd.isna(v) else int(v) for v in per["first_divergence"]]
    assert got == [None, 3, 2, 5]


def test_text_outputs_compare_digest_and_length():
    rows = [
        _text_row("base", "c1", 0, "hello world"),
        _text_row("base", "c1", 1, "abc"),
        _text_row("spec", "c1", 0, "hello world"),
        _text_row("spec", "c1", 1, "abd"),
    ]
    row = lossless_summary(_frame(rows), [("spec", "c1")], "base").iloc[0]
    assert row["lossless_status"] == "mismatch"
    assert (row["lossless_compared_count"], row["lossless_match_count"]) == (2, 1)
    assert row["lossless_first_divergence_min_tokens"] is None  # unknown for text


def test_fallbacks_other_pass_then_other_tier_are_named():
    rows = [
        _ids_row("base", "c1", 0, BASE, repeat=0),
        _ids_row("base", "c1", 1, BASE, repeat=0),
        _ids_row("base", "c4", 7, [1, 2], repeat=0),
        # spec repeat 1 at c1: the baseline ran one pass -> other pass
        _ids_row("spec", "c1", 0, BASE, repeat=1),
        # spec at c8: the baseline never ran c8 -> same request_index at another tier
        _ids_row("spec", "c8", 1, BASE),
        _ids_row("spec", "c8", 7, [1, 3]),
        # no baseline request with index 9 anywhere
        _ids_row("spec", "c8", 9, BASE),
    ]
    table = lossless_summary(_frame(rows), [("spec", "c1"), ("spec", "c8")], "base")
    c1, c8 = table.iloc[0], table.iloc[1]
    assert c1["lossless_status"] == "ok"
    assert c1["lossless_note"] == "1 matched by other pass"
    assert c8["lossless_status"] == "mismatch"
    assert (c8["lossless_compared_count"], c8["lossless_match_count"]) == (2, 1)
    assert c8["lossless_first_divergence_min_tokens"] == 1
    assert "2 matched by other tier" in c8["lossless_note"]
    assert "1 not compared: no baseline output" in c8["lossless_note"]
    per = match_baseline(_frame(rows), "base")
    assert (
        per.loc[per["request_index"] == 7, "baseline_request_id"].item()
        == "base-c4-r0-7"
    )


def test_same_pass_is_preferred_over_other_passes():
    rows = [
        _ids_row("base", "c1", 0, [1, 1], repeat=0),
        _ids_row("base", "c1", 0, BASE, repeat=1),
        _ids_row("spec", "c1", 0, BASE, repeat=1),
    ]
    row = lossless_summary(_frame(rows), [("spec", "c1")], "base").iloc[0]
    assert row["lossless_status"] == "ok"
    assert row["lossless_note"] == "1 matched by same pass"


@pytest.mark.parametrize(
    ("outputs", "baseline", "note"),
    [
        (None, "base", "no outputs recorded for the baseline base"),
        ("spec only", "base", "no outputs recorded for the baseline base"),
        ("both", None, "no baseline variant"),
    ],
)
def test_missing_baseline_or_outputs_is_not_compared(outputs, baseline, note):
    frame = {
        None: None,
        "spec only": _frame([_ids_row("spec", "c1", 0, BASE)]),
        "both": _frame(
            [_ids_row("base", "c1", 0, BASE), _ids_row("spec", "c1", 0, BASE)]
        ),
    }[outputs]
    row = lossless_summary(frame, [("spec", "c1")], baseline).iloc[0]
    assert row["lossless_status"] == "not_compared"
    assert row["lossless_note"] == note
    assert row["lossless_compared_count"] == 0


def test_a_variant_tier_without_outputs_is_not_compared():
    rows = [_ids_row("base", "c1", 0, BASE), _ids_row("spec", "c1", 0, BASE)]
    table = lossless_summary(_frame(rows), [("spec", "c1"), ("spec", "c2")], "base")
    assert list(table["lossless_status"]) == ["ok", "not_compared"]
    assert table.iloc[1]["lossless_note"] == "no outputs recorded"


def test_with_lossless_replaces_stale_columns_and_warns_once_per_flagged_tier():
    rows = [_ids_row("base", "c1", 0, BASE), _ids_row("spec", "c1", 0, [5, 6, 0, 8, 9])]
    summary = pd.DataFrame(
        {
            "variant": ["base", "spec"],
            "tier": ["c1", "c1"],
            "lossless_status": ["ok", "ok"],
        }
    )
    out = with_lossless(summary, _frame(rows), "base")
    assert list(out["lossless_status"]) == ["baseline", "mismatch"]
    assert lossless_warnings(out) == [
        "lossless gate: spec c1: 0 of 1 outputs equal the baseline's "
        "(first divergence at output token 2)"
    ]


def test_the_ids_decide_even_when_a_digest_is_stale_and_digests_serve_without_ids():
    stale = _ids_row("spec", "c1", 0, [5, 6, 7, 0, 9]) | {
        "output_digest": _digest(BASE)
    }
    no_ids = _ids_row("spec", "c1", 1, BASE) | {"output_token_ids": ""}
    rows = [
        _ids_row("base", "c1", 0, BASE),
        _ids_row("base", "c1", 1, BASE),
        stale,
        no_ids,
    ]
    per = match_baseline(_frame(rows), "base")
    assert list(per["equal"]) == [False, True]
    assert per["first_divergence"].iloc[0] == 3
    assert pd.isna(per["first_divergence"].iloc[1])
