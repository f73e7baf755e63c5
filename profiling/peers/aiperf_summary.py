"""AIPerf records → trtbench ``summary.csv`` rows (pure: typed records in, a DataFrame out).

The statistics are recomputed from the per-request records of ``profile_export.jsonl`` with
trtbench's own rules (:func:`trtbench.profiling.loadtest.stats.metrics.describe`: numpy ``linear``
percentiles, std with ddof 0 — the same as AIPerf 0.13.0's ``metric_result_from_array``), over
the *successful* profiling-phase requests only: AIPerf's TTFT, ITL and request-latency
aggregates include failed requests (``MetricFlags.PERCENTILE_INCLUDES_FAILED_REQUESTS``),
trtbench's do not. The mapping, per summary metric (docs/peers.md):

* ``time_to_first_token`` ← ``time_to_first_token``; ``request_latency`` ← ``request_latency``
  (both: first / last content response − request start);
* ``time_per_output_token`` ← ``inter_token_latency`` (AIPerf's per-request
  (E2E − TTFT) / (OSL − 1); trtbench divides by OSL − tokens of the first response, which is
  the same where the first response carries one token);
* ``output_token_throughput_per_user`` ← ``output_token_throughput_per_user`` (1 / ITL; AIPerf
  leaves it out where ITL is 0);
* ``inter_chunk_latency`` ← the pooled ``inter_chunk_latency`` lists;
* ``inter_token_latency`` and ``tokens_per_response`` only where every successful request had
  OSL − 1 chunk gaps (one token per content response, so a gap is one ITL sample and a
  response one token); else empty, with a note;
* ``output_sequence_length`` / ``input_sequence_length`` ← the same names;
* ``duration_s`` = max ``request_end_ns`` − min ``request_start_ns`` (AIPerf's
  ``benchmark_duration``); output token and request throughput = Σ OSL of successful requests
  (resp. their number) / that duration — AIPerf's ``output_token_throughput`` divides by the
  profiling phase's window instead, a few ms longer;
* ``osl_mismatch_count`` ← AIPerf's own count (the same min(5 %, 50 tokens) threshold).

Every other column (client queue and server timings, goodput, speculative figures, event-loop
lag) stays empty: AIPerf's records do not carry it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from trtbench.profiling.loadtest.files.schemas import SUMMARY_SCHEMA
from trtbench.profiling.loadtest.stats.metrics import (
    METRICS,
    STATS,
    describe,
    stat_column,
)
from trtbench.profiling.peers.aiperf_files import AiperfArtifacts, AiperfRecord

_METRIC = {m.name: m for m in METRICS}
PER_REQUEST = {
    "time_to_first_token": "ttft_ms",
    "request_latency": "e2e_ms",
    "time_per_output_token": "itl_ms",
    "output_token_throughput_per_user": "per_user_tokens_per_s",
    "output_sequence_length": "osl_tokens",
    "input_sequence_length": "isl_tokens",
}
"""trtbench summary metric ← :class:`AiperfRecord` field, one sample per successful request."""


def successful(records: Sequence[AiperfRecord]) -> list[AiperfRecord]:
    """Requests without an error that produced a first token (trtbench's successful set)."""
    return [r for r in records if not r.failed and r.ttft_ms is not None]


def one_token_per_response(records: Sequence[AiperfRecord]) -> bool:
    """True when every request has OSL − 1 chunk gaps: OSL content responses for OSL tokens,
    so each response carried exactly one token (each carries at least one)."""
    return bool(records) and all(
        r.icl_ms is not None
        and r.osl_tokens is not None
        and len(r.icl_ms) == int(r.osl_tokens) - 1
        for r in records
    )


def metric_samples(records: Sequence[AiperfRecord]) -> dict[str, np.ndarray]:
    """Samples of each summary metric the records allow (module docstring), in its unit.

    Args:
        records: successful requests (:func:`successful`).

    Returns:
        metric name → sample array; metrics the records cannot give are absent.
    """
    out: dict[str, np.ndarray] = {}
    for metric, field in PER_REQUEST.items():
        values = [getattr(r, field) for r in records]
        if any(v is not None for v in values):
            out[metric] = np.array([np.nan if v is None else v for v in values], float)
    gaps = [g for r in records if r.icl_ms is not None for g in r.icl_ms]
    if any(r.icl_ms is not None for r in records):
        out["inter_chunk_latency"] = np.array(gaps, dtype=float)
    if one_token_per_response(records):
        out["inter_token_latency"] = np.array(gaps, dtype=float)
        out["tokens_per_response"] = np.array(
            [1.0 if (r.osl_tokens or 0) >= 2 else np.nan for r in records], dtype=float
        )
    return out


def _status(art: AiperfArtifacts, ok: int) -> tuple[str, str]:
    if ok == 0:
        return "failed", "no AIPerf request succeeded"
    if art.cancelled:
        return "interrupted", "the AIPerf run was cancelled (was_cancelled)"
    return "complete", ""


def tier_row(art: AiperfArtifacts, variant: str) -> dict[str, object]:
    """One summary.csv row (column → value; absent: empty) for one artifact directory."""
    ok = successful(art.records)
    duration_s = (
        max(r.end_ns for r in art.records) - min(r.start_ns for r in art.records)
    ) / 1e9
    status, reason = _status(art, len(ok))
    rate = (lambda x: x / duration_s) if duration_s > 0 else (lambda x: float("nan"))
    row: dict[str, object] = {
        "variant": variant,
        "tier": art.tier,
        "tier_status": status,
        "tier_status_reason": reason,
        "concurrency": art.concurrency,
        "request_rate_per_s": art.request_rate_per_s,
        "max_concurrency": art.max_concurrency,
        "request_count": len(art.records),
        "error_count": len(art.records) - len(ok),
        "osl_mismatch_count": art.osl_mismatch_count,
        "duration_s": duration_s,
        "output_token_throughput_tokens_per_s": rate(
            float(sum(r.osl_tokens or 0.0 for r in ok))
        ),
        "request_throughput_per_s": rate(float(len(ok))),
    }
    for name, samples in metric_samples(ok).items():
        stats = describe(samples)
        metric = _METRIC[name]
        row.update({stat_column(metric, s): stats[s] for s in (*STATS, "n")})
    return row


def summary_frame(tiers: Sequence[AiperfArtifacts], variant: str) -> pd.DataFrame:
    """Summary rows of one AIPerf "run" (one artifact directory per tier), in
    :data:`~trtbench.profiling.loadtest.files.schemas.SUMMARY_SCHEMA` column order, sorted by load."""
    rows = [tier_row(art, variant) for art in tiers]
    frame = pd.DataFrame(rows, columns=[c.name for c in SUMMARY_SCHEMA])
    return frame.sort_values(["concurrency", "request_rate_per_s"]).reset_index(
        drop=True
    )


def summary_notes(tiers: Sequence[AiperfArtifacts], variant: str) -> list[str]:
    """What the report says about an AIPerf run: its origin and any metric left empty."""
    versions = sorted({art.version for art in tiers})
    labels = ", ".join(art.tier for art in tiers)
    notes = [
        f"`{variant}` is an AIPerf {'/'.join(versions)} measurement "
        f"({labels}; {', '.join(str(a.path) for a in tiers)}): its statistics are "
        "recomputed from profile_export.jsonl with trtbench's definitions (docs/peers.md); "
        "a speedup shown for it is a baseline's mean TPOT over its own at the same tier, a "
        "ratio across tools, not a decoding speedup."
    ]
    for art in tiers:
        if not one_token_per_response(successful(art.records)):
            notes.append(
                f"`{variant}` {art.tier}: AIPerf's records do not say how many tokens each "
                "response carried, so per-token ITL and tokens per response are empty."
            )
    return notes
