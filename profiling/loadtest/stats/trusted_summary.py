"""The summary a reader can trust: the pooled statistics of the steady-state window, plus
each tier's spread over repeated passes, thin-percentile flags and token source (pure).

:func:`summarize_trusted` wraps :func:`trtbench.profiling.loadtest.stats.metrics.summarize`:

1. requests outside the window (:mod:`trtbench.profiling.loadtest.stats.window`) are left out;
2. the pooled summary is computed over every pass together;
3. each pass is summarized alone (speedups pass r against the baseline's pass r) and
   :func:`trtbench.profiling.loadtest.workload.repeats.repeat_stats` adds the mean and 95 % interval;
4. :mod:`trtbench.profiling.loadtest.stats.sample_checks` adds ``*_p99_n_ok`` / ``*_p95_n_ok`` and
   ``output_token_source``.

:data:`REPEAT_SUMMARY_COLUMNS` are the summary.csv columns this adds; :data:`IN_WINDOW`
the requests.csv one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from trtbench.core.export import Column
from trtbench.profiling.loadtest.stats.metrics import METRICS, TierStatuses, summarize
from trtbench.profiling.loadtest.stats.sample_checks import (
    MIN_SAMPLES,
    n_ok_column,
    n_ok_flags,
    retokenized_warnings,
    token_sources,
)
from trtbench.profiling.loadtest.stats.window import (
    emptied_tiers,
    in_window,
    thin_tiers,
    window_label,
)
from trtbench.profiling.loadtest.workload.repeats import (
    REPEATED,
    repeat_columns,
    repeat_stats,
)

_REPEATED_TEXT = {
    "time_to_first_token_p50_ms": "TTFT p50 (ms) of each pass",
    "time_per_output_token_mean_ms": "TPOT mean (ms) of each pass",
    "output_token_throughput_tokens_per_s": "output tok/s of each pass",
    "tpot_speedup_ratio": "TPOT speedup of each pass (pass r vs the baseline's pass r; complete tiers)",
    "output_token_throughput_speedup_ratio": "output tok/s speedup of each pass (pass r vs the baseline's pass r; complete tiers)",
}
_CI = (
    "geometric mean over the passes",
    "95 % Student-t interval on the log scale, low end (empty with one pass)",
    "95 % Student-t interval on the log scale, high end (empty with one pass)",
)

REPEAT_SUMMARY_COLUMNS: tuple[Column, ...] = (
    Column(
        "measurement_window",
        "which completions the statistics use: 'all completions' or 'completions after the first S s of each pass' (loadtest.warmup_s)",
        False,
        "str",
    ),
    Column(
        "repeats_count",
        "passes over the tier with at least one measured request (loadtest.repeats)",
        False,
    ),
    *(
        Column(col, f"{_REPEATED_TEXT[name]}: {what}", False, "float")
        for name in REPEATED
        for col, what in zip(repeat_columns(name), _CI, strict=True)
    ),
    Column(
        "repeat_ci_note",
        "why interval columns are empty ('' when none is)",
        False,
        "str",
    ),
    *(
        Column(
            n_ok_column(m, stat),
            f"{m.name} {stat} rests on at least {least} samples",
            False,
            "bool",
        )
        for m in METRICS
        for stat, least in MIN_SAMPLES.items()
    ),
    Column(
        "output_token_source",
        "output_ids | retokenized | mixed: where the tier's output token counts come from",
        False,
        "str",
    ),
    Column(
        "retokenized_count",
        "requests whose output tokens were counted by re-tokenizing text",
        False,
    ),
)
IN_WINDOW = Column(
    "in_window",
    "the request counts in the statistics (false: it ended within the first "
    "loadtest.warmup_s seconds of its pass)",
    False,
    "bool",
)


@dataclass(frozen=True)
class TrustedSummary:
    """summary.csv rows, the requests' ``in_window`` flags, warnings (one line each) and
    the summary rows of each pass alone (``repeat`` column: the round)."""

    summary: pd.DataFrame
    in_window: pd.Series
    warnings: list[str] = field(default_factory=list)
    passes: pd.DataFrame = field(default_factory=pd.DataFrame)


def _responses_of(responses: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    if responses.empty or requests.empty:
        return responses.iloc[0:0] if len(responses.columns) else responses
    return responses[responses["request_id"].isin(requests["request_id"])]


def per_pass(
    requests: pd.DataFrame,
    responses: pd.DataFrame,
    baseline: str | None,
    statuses: TierStatuses,
    pooled: pd.DataFrame,
) -> pd.DataFrame:
    """Summary rows of each pass alone, with a ``repeat`` column (one pass: ``pooled``)."""
    if requests.empty:
        return pooled.assign(repeat=0)
    repeat = requests["repeat"].fillna(0).astype(int) if "repeat" in requests else None
    if repeat is None or repeat.nunique() < 2:
        return pooled.assign(repeat=0 if repeat is None else int(repeat.iloc[0]))
    frames = []
    for r, sub in requests.groupby(repeat, sort=True):
        s = summarize(sub, _responses_of(responses, sub), None, baseline, statuses)
        frames.append(s.assign(repeat=int(r)))
    return pd.concat(frames, ignore_index=True)


def summarize_trusted(
    requests: pd.DataFrame,
    responses: pd.DataFrame,
    slos: Mapping[str, float] | None = None,
    baseline: str | None = None,
    statuses: TierStatuses | None = None,
    warmup_s: float = 0.0,
    level_at: Callable[[int], float] | None = None,
    instance: tuple[float, Callable[[int], int]] | None = None,
) -> TrustedSummary:
    """:func:`~trtbench.profiling.loadtest.stats.metrics.summarize` over the window, plus the
    columns of :data:`REPEAT_SUMMARY_COLUMNS` (module doc).

    Args:
        requests, responses: record frames (any variants, tiers and passes).
        slos, baseline, statuses: as for ``summarize``.
        warmup_s: seconds left out at the start of each pass (0: none).
        level_at: the level of an interval over n rounds (``repeat_stats``; default 95 %).
        instance: the run's server-instance term of the speedup intervals
            (``repeat_stats``; default none).

    Returns:
        The summary (a tier whose completions all fall in the left-out start keeps its
        status, gets zero requests and a reason saying so, and a warning), the
        ``in_window`` flags on ``requests.index`` and warnings (such tiers, re-tokenized
        output).
    """
    statuses = dict(statuses or {})
    kept = in_window(requests, warmup_s)
    req = requests[kept] if len(requests) else requests
    resp = _responses_of(responses, req)
    warnings = []
    for key in emptied_tiers(requests, kept) if len(requests) else []:
        status, reason = statuses.get(key, ("complete", ""))
        why = f"every completion fell in the first {warmup_s:g} s of its pass"
        statuses[key] = (status, f"{reason}; {why}" if reason else why)
        warnings.append(
            f"{key[0]} {key[1]}: {why} (--exclude-first-s / loadtest.warmup_s): no "
            "statistics; exclude less or send more requests per tier"
        )
    for variant, tier, k, n in thin_tiers(requests, kept) if len(requests) else []:
        warnings.append(
            f"{variant} {tier}: the window (--exclude-first-s / loadtest.warmup_s) keeps "
            f"{k} of {n} completions: its figures rest on a few late requests; exclude "
            "less or send more requests per tier"
        )
    summary = in_tier_order(summarize(req, resp, slos, baseline, statuses))
    passes = per_pass(req, resp, baseline, statuses, summary)
    summary = repeat_stats(summary, passes, level_at, instance, baseline)
    summary = pd.concat([summary, n_ok_flags(summary)], axis=1)
    summary["measurement_window"] = window_label(warmup_s)
    sources = token_sources(req)
    if {"variant", "tier"} <= set(summary.columns):
        summary = summary.merge(sources, on=["variant", "tier"], how="left")
    warnings += retokenized_warnings(sources)
    return TrustedSummary(summary, kept, warnings, passes)


def in_tier_order(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows by variant (first seen first), then tier by concurrency or request rate: the
    tiers of a shuffled round come out in the order a reader expects."""
    if frame.empty or "concurrency" not in frame:
        return frame
    first = {v: i for i, v in enumerate(dict.fromkeys(frame["variant"]))}
    key = pd.DataFrame(
        {
            "v": frame["variant"].map(first),
            "c": pd.to_numeric(frame["concurrency"], errors="coerce"),
            "r": pd.to_numeric(frame.get("request_rate_per_s"), errors="coerce"),
        },
        index=frame.index,
    )
    order = key.sort_values(["v", "c", "r"], kind="stable", na_position="last").index
    return frame.loc[order].reset_index(drop=True)
