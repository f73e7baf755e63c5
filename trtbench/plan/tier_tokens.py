"""Tokens per decode step E and verify width q of a speculative tier (pure).

* **E** from the per-position acceptance (``loadtest/acceptance.csv``, kind ``position``:
  ``hits_k`` = row-steps whose accepted length >= k, over ``steps_1`` row-steps that
  drafted): ``a_k = hits_k / hits_{k-1}`` (``hits_0 = steps_1``) and
  ``E = 1 + s·Σ_k Π_{i<=k} a_i`` (Leviathan et al. 2023 §3 with per-position rates; for a
  Medusa tree the positions are the accepted path depth, so the same sum holds), where
  ``s = min(1, steps_1 / (decode tokens − accepted))`` is the share of row-steps that
  drafted (n-gram proposes nothing when the lookup misses). Without a table: the client's
  tokens per response (one response per step when streaming), said in ``e_source``.
* **q**, tokens a row carries through the verify pass: K + 1, Medusa tree nodes + 1.
"""

from __future__ import annotations

import pandas as pd

from trtbench.core import methods
from trtbench.profiling.report.comparison import summary_column
from trtbench.profiling.report.variant_info import VariantInfo

OSL = summary_column("output_sequence_length")
TPR = summary_column("tokens_per_response")


def chain_tokens_from_positions(
    hits: list[float], steps: float, share: float = 1.0
) -> float:
    """``E = 1 + s·Σ_k Π_{i<=k} a_i`` with ``a_i = hits_i / hits_{i-1}`` (module doc).

    Args:
        hits: row-steps with accepted length >= k, for k = 1..K (non-increasing).
        steps: row-steps that drafted (``hits_0``).
        share: s, the share of decode row-steps that drafted (0..1).

    Raises:
        ValueError: ``steps`` <= 0.
    """
    if steps <= 0:
        raise ValueError("per-position acceptance needs steps > 0")
    total, prev, run = 0.0, float(steps), 1.0
    for h in hits:
        run *= (float(h) / prev) if prev > 0 else 0.0
        prev = float(h)
        total += run
    return 1.0 + share * total


def measured_tokens_per_step(
    row: pd.Series, acceptance: pd.DataFrame | None
) -> tuple[float, float, str]:
    """E, the drafted share s and its source for one summary row (module doc).

    Returns:
        ``(E, s, source)``; source ``per_position`` or ``tokens_per_response`` (NaN E when
        neither is recorded).
    """
    pos = None
    if acceptance is not None and len(acceptance):
        pick = (
            (acceptance["variant"] == row["variant"])
            & (acceptance["tier"] == row["tier"])
            & (acceptance["kind"] == "position")
        )
        pos = acceptance[pick].sort_values("draft_position")
    if pos is not None and len(pos) and pos["steps_count"].iloc[0] > 0:
        hits = pos["hits_count"].astype(float).tolist()
        steps = float(pos["steps_count"].iloc[0])
        share = 1.0
        if pd.notna(row.get(OSL)) and pd.notna(row.get("request_count")):
            decode = float(row["request_count"]) * (float(row[OSL]) - 1.0)
            plain_or_drafted = decode - sum(hits)  # one row-step per non-drafted token
            if plain_or_drafted > 0:
                share = min(1.0, steps / plain_or_drafted)
        return chain_tokens_from_positions(hits, steps, share), share, "per_position"
    tpr = row.get(TPR)
    e = float(tpr) if tpr is not None and pd.notna(tpr) else float("nan")
    return e, 1.0, "tokens_per_response"


def verify_tokens(info: VariantInfo) -> int:
    """q, tokens a row carries through the verify pass: K + 1, Medusa nodes + 1, else 1."""
    method = methods.method_of(info.mode)
    if method is not None and method.tree and info.tree_nodes:
        return info.tree_nodes + 1
    if info.draft_len:
        return info.draft_len + 1
    return 1
