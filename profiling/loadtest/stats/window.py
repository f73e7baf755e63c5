"""The steady-state window (``loadtest.warmup_s`` / ``--exclude-first-s``), pure.

A closed-loop tier at concurrency N starts with N prefills queued together, which inflates
the first requests' TTFT (and so p99 TTFT). With ``warmup_s = S`` > 0 the completions that
end within the first S seconds of each tier pass are left out of the statistics: a request
is in the window when ``end_ns ≥ first send of its pass + S · 1e9``, where a pass is one
(variant, tier, repeat) and its first send is the earliest ``sent_ns`` of all its requests,
failed ones included. The requests left out stay in ``requests.csv`` with
``in_window = False``.
"""

from __future__ import annotations

import pandas as pd

PASS_KEYS = ("variant", "tier", "repeat")


def _pass_keys(requests: pd.DataFrame) -> list[pd.Series]:
    repeat = (
        requests["repeat"].fillna(0)
        if "repeat" in requests
        else pd.Series(0, index=requests.index)
    )
    return [requests["variant"], requests["tier"], repeat.astype(int)]


def in_window(requests: pd.DataFrame, warmup_s: float) -> pd.Series:
    """True where a request's completion counts (boolean Series on ``requests.index``).

    Args:
        requests: RequestRecord rows (``variant``, ``tier``, ``sent_ns``, ``end_ns``,
            optionally ``repeat``; no column means one pass).
        warmup_s: seconds to leave out at the start of each pass (0: every request counts).
    """
    if warmup_s <= 0 or requests.empty:
        return pd.Series(True, index=requests.index, dtype=bool)
    first = requests.groupby(_pass_keys(requests))["sent_ns"].transform("min")
    cutoff = first.astype(float) + warmup_s * 1e9
    return (requests["end_ns"].astype(float) >= cutoff).astype(bool)


def window_label(warmup_s: float) -> str:
    """``all completions`` or ``completions after the first S s of each pass``."""
    if warmup_s <= 0:
        return "all completions"
    return f"completions after the first {warmup_s:g} s of each pass"


def emptied_tiers(requests: pd.DataFrame, kept: pd.Series) -> list[tuple[str, str]]:
    """(variant, tier) pairs that have requests but none in the window."""
    any_kept = kept.groupby([requests["variant"], requests["tier"]], sort=False).any()
    return [(str(v), str(t)) for (v, t), ok in any_kept.items() if not ok]


def thin_tiers(
    requests: pd.DataFrame, kept: pd.Series, share: float = 0.5
) -> list[tuple[str, str, int, int]]:
    """(variant, tier, kept, total) where the window keeps some but fewer than ``share`` of
    the tier's completions: its figures then rest on a few late requests."""
    keys = [requests["variant"], requests["tier"]]
    counts = kept.groupby(keys, sort=False).agg(["sum", "size"])
    return [
        (str(v), str(t), int(k), int(n))
        for (v, t), (k, n) in counts.iterrows()
        if 0 < k < share * n
    ]
