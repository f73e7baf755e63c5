"""The lossless gate: does each variant generate exactly what the baseline generates?

Greedy speculative decoding is lossless by construction (a drafted token is kept only
when it equals the target's argmax — speculative sampling at temperature 0, Leviathan et
al., ICML 2023; TensorRT-LLM and vLLM verify the same way), so under greedy sampling every
request of a speculative variant must return the baseline's tokens for the same prompt.
Prompts are identical across variants: request ``request_index`` of every tier pass gets
``prompts[request_index % count]``.

Matching (per request of a non-baseline variant, in this order; the note says which):
``same pass`` — the baseline's request with the same (tier, repeat, request_index);
``other pass`` — the same (tier, request_index) in another baseline pass;
``other tier`` — the same request_index at another tier (a greedy output must not depend
on load). Comparison: ``ids`` outputs are equal when their id sequences are (digest and
length where a file holds no ids); the first divergence is the first index where they
differ, or the shorter length when one is a prefix of the other (a length difference is a
divergence: same prompt, same max_tokens). ``text`` outputs are equal when digest and
length agree; their divergence index is unknown.

Cause of a mismatch: a divergence can be a numeric tie (bfloat16 or batched kernels that
reorder a reduction flip an argmax whose top-2 logits are nearly equal) or a real bug.
Telling them apart needs the baseline's top-2 logit margin at the divergence; no served
model here returns logprobs, so every mismatch is reported with cause ``unclassified``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from trtbench.core.export import Column

STATUS_OK = "ok"
STATUS_MISMATCH = "mismatch"
STATUS_NOT_COMPARED = "not_compared"
STATUS_BASELINE = "baseline"
MATCH_KINDS = ("same pass", "other pass", "other tier")
CAUSE_NOTE = "cause unclassified (the server returns no logprobs)"

LOSSLESS_SUMMARY_COLUMNS: tuple[Column, ...] = (
    Column(
        "lossless_compared_count",
        "successful requests whose output was compared with the baseline's output for the same prompt",
        False,
    ),
    Column(
        "lossless_match_count",
        "of those, outputs equal to the baseline's (ids equal; text: digest and length equal)",
        False,
    ),
    Column(
        "lossless_match_ratio", "lossless_match_count / lossless_compared_count", False
    ),
    Column(
        "lossless_first_divergence_min_tokens",
        "smallest 0-based output index where a mismatched output first differs from the baseline's (shorter length when one is a prefix); empty: no mismatch or text outputs",
        False,
    ),
    Column(
        "lossless_first_divergence_median_tokens",
        "median of that index over the mismatched requests",
        False,
    ),
    Column(
        "lossless_status",
        "ok (every compared output equals the baseline's) | mismatch | not_compared (no baseline, no outputs, nothing matched) | baseline (the baseline itself)",
        False,
    ),
    Column(
        "lossless_note",
        "which baseline requests were matched (same pass / other pass / other tier), requests without a counterpart, the cause of a mismatch",
        False,
    ),
)

LOSSLESS_NAMES = tuple(c.name for c in LOSSLESS_SUMMARY_COLUMNS)

_KEYS = (
    ("tier", "repeat", "request_index"),
    ("tier", "request_index"),
    ("request_index",),
)


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """0-based index where id sequences ``a`` and ``b`` first differ (None: equal).

    When one is a prefix of the other, the shorter length.
    """
    n = min(len(a), len(b))
    if n:
        diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
        if diff.size:
            return int(diff[0])
    return None if len(a) == len(b) else n


def _ids(text: object) -> list[int]:
    return [int(t) for t in str(text).split()] if isinstance(text, str) else []


def match_baseline(outputs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Each non-baseline output row joined to its baseline counterpart (pure).

    Args:
        outputs: rows of ``outputs.csv`` (:data:`~trtbench.profiling.loadtest.files.outputs.OUTPUTS_SCHEMA`).
        baseline: the baseline variant.

    Returns:
        One row per non-baseline output: variant, tier, repeat, request_index, request_id,
        match (``same pass`` | ``other pass`` | ``other tier`` | None: no counterpart),
        baseline_request_id, equal (bool, None when not compared), first_divergence
        (``Int64``; NA when equal, unknown or not compared), reason (why not compared).
    """
    cols = [
        "request_id",
        "output_kind",
        "output_digest",
        "output_token_ids",
        "output_tokens",
        "output_chars",
    ]
    base = outputs[outputs["variant"] == baseline]
    rest = outputs[outputs["variant"] != baseline].reset_index(drop=True)
    found = pd.DataFrame(index=rest.index, columns=["match", *("b_" + c for c in cols)])
    pending = rest["request_index"].notna()
    for kind, keys in zip(MATCH_KINDS, _KEYS, strict=True):
        cand = base.drop_duplicates(list(keys), keep="first")[[*keys, *cols]]
        cand = cand.rename(columns={c: "b_" + c for c in cols})
        left = rest.loc[pending, list(keys)].reset_index()
        hit = left.merge(cand, on=list(keys), how="inner").set_index("index")
        if hit.empty:
            continue
        found.loc[hit.index, "match"] = kind
        for c in cols:
            found.loc[hit.index, "b_" + c] = hit["b_" + c]
        pending &= ~rest.index.isin(hit.index)
    rows = [
        _compare(r, f)
        for r, f in zip(rest.itertuples(), found.itertuples(), strict=True)
    ]
    out = rest[["variant", "tier", "repeat", "request_index", "request_id"]].copy()
    out["match"] = found["match"].to_numpy()
    out["baseline_request_id"] = found["b_request_id"].to_numpy()
    out["equal"] = [r[0] for r in rows]
    out["first_divergence"] = pd.array([r[1] for r in rows], dtype="Int64")
    out["reason"] = [r[2] for r in rows]
    return out


def _compare(r, f) -> tuple[bool | None, int | None, str | None]:
    """(equal, first divergence, reason not compared) for one output and its match."""
    if pd.isna(r.request_index):
        return None, None, "no request_index"
    if not isinstance(f.match, str):
        return None, None, "no baseline output"
    if r.output_kind != f.b_output_kind:
        return None, None, "ids vs text"
    if r.output_kind == "text":
        same = r.output_digest == f.b_output_digest and _eq(
            r.output_chars, f.b_output_chars
        )
        return same, None, None
    a, b = _ids(r.output_token_ids), _ids(f.b_output_token_ids)
    if a and b:  # the ids themselves decide (the digest is their short name)
        at = first_divergence(a, b)
        return at is None, at, None
    same = r.output_digest == f.b_output_digest
    return same and _eq(r.output_tokens, f.b_output_tokens), None, None


def _eq(a: object, b: object) -> bool:
    return (pd.isna(a) and pd.isna(b)) or (not pd.isna(a) and not pd.isna(b) and a == b)


def lossless_summary(
    outputs: pd.DataFrame | None,
    pairs: Iterable[tuple[str, str]],
    baseline: str | None,
) -> pd.DataFrame:
    """The lossless columns for each (variant, tier) in ``pairs`` (pure).

    Args:
        outputs: ``outputs.csv`` rows (None or empty: nothing recorded).
        pairs: the summary's (variant, tier) keys, in order.
        baseline: the run's baseline variant (None: no baseline).

    Returns:
        Columns variant, tier and :data:`LOSSLESS_NAMES`, one row per pair.
    """
    pairs = list(pairs)
    frame = pd.DataFrame(pairs, columns=["variant", "tier"])
    for name in LOSSLESS_NAMES:
        frame[name] = pd.Series([None] * len(frame), dtype=object)
    have = outputs is not None and len(outputs) > 0
    has_base = have and baseline is not None and (outputs["variant"] == baseline).any()
    per = match_baseline(outputs, baseline) if has_base else None
    groups = (
        dict(list(per.groupby(["variant", "tier"], sort=False))) if has_base else {}
    )
    for i, (variant, tier) in enumerate(pairs):
        if variant == baseline:
            values = _row_baseline()
        elif baseline is None:
            values = _row_none("no baseline variant")
        elif not has_base:
            values = _row_none(f"no outputs recorded for the baseline {baseline}")
        elif (variant, tier) not in groups:
            values = _row_none("no outputs recorded")
        else:
            values = _row(groups[(variant, tier)])
        for name, value in values.items():
            frame.at[i, name] = value
    return frame


def _row_baseline() -> dict[str, object]:
    return {"lossless_status": STATUS_BASELINE}


def _row_none(note: str) -> dict[str, object]:
    return {
        "lossless_compared_count": 0,
        "lossless_match_count": 0,
        "lossless_status": STATUS_NOT_COMPARED,
        "lossless_note": note,
    }


def _row(group: pd.DataFrame) -> dict[str, object]:
    compared = group[group["equal"].notna()]
    n, m = len(compared), int(compared["equal"].astype(bool).sum())
    div = compared["first_divergence"].dropna().astype(float)
    notes = [
        f"{(compared['match'] == k).sum()} matched by {k}"
        for k in MATCH_KINDS
        if (compared["match"] == k).any()
    ]
    for reason, count in group["reason"].dropna().value_counts().items():
        notes.append(f"{count} not compared: {reason}")
    if m < n:
        notes.append(CAUSE_NOTE)
    status = STATUS_NOT_COMPARED if n == 0 else STATUS_OK if m == n else STATUS_MISMATCH
    return {
        "lossless_compared_count": n,
        "lossless_match_count": m,
        "lossless_match_ratio": m / n if n else None,
        "lossless_first_divergence_min_tokens": int(div.min()) if len(div) else None,
        "lossless_first_divergence_median_tokens": float(div.median())
        if len(div)
        else None,
        "lossless_status": status,
        "lossless_note": "; ".join(notes),
    }


def with_lossless(
    summary: pd.DataFrame, outputs: pd.DataFrame | None, baseline: str | None
) -> pd.DataFrame:
    """``summary`` with its lossless columns (re)computed from ``outputs`` (pure)."""
    if summary.empty:
        return summary
    pairs = list(
        zip(summary["variant"].astype(str), summary["tier"].astype(str), strict=True)
    )
    table = lossless_summary(outputs, pairs, baseline)
    out = summary.drop(columns=[c for c in LOSSLESS_NAMES if c in summary.columns])
    values = {name: table[name].to_numpy() for name in LOSSLESS_NAMES}
    return pd.concat([out, pd.DataFrame(values, index=out.index)], axis=1)


def lossless_warnings(summary: pd.DataFrame) -> list[str]:
    """One line per variant × tier whose outputs differ from the baseline's."""
    if "lossless_status" not in summary.columns:
        return []
    bad = summary[summary["lossless_status"] == STATUS_MISMATCH]
    return [
        f"lossless gate: {r.variant} {r.tier}: {int(r.lossless_match_count)} of "
        f"{int(r.lossless_compared_count)} outputs equal the baseline's"
        + _divergence_text(r.lossless_first_divergence_min_tokens)
        for r in bad.itertuples()
    ]


def _divergence_text(value: object) -> str:
    if value is None or pd.isna(value):
        return ""
    return f" (first divergence at output token {int(value)})"
