"""Load-test metrics (pure): request/response records → per-request metrics → tier statistics.

Definitions (``docs/metrics.md`` sets each beside AIPerf's, vLLM's and trtllm-bench's):

- TTFT = first token-carrying response − send; E2E = last token-carrying response − send.
  A response without tokens (the empty final response) is neither a token nor the end of E2E.
- TPOT = (E2E − TTFT) / (OSL − tokens in the first response) — the multi-token first-chunk
  form of AIPerf/GenAI-Perf ``(E2E − TTFT)/(OSL − 1)``.
- ITL (per token): a gap g before a response of n tokens counts as n samples of g/n
  (GenAI-Perf "chunked ITL"); so Σ ITL samples = E2E − TTFT and, per request, mean ITL = TPOT.
  TTFT is never an ITL sample. ICL (inter-chunk latency) is the raw gap between
  token-carrying responses.
- tokens per response = (OSL − first-response tokens) / (token responses − 1): tokens per
  decode step, the acceptance length seen by the client.
- speculative figures (``acceptance.py``): pooled per tier (acceptance length = 1 + Σ accepted
  / verify steps, draft acceptance rate = Σ accepted / Σ proposed, per-position rates, the
  histogram) and, per request then averaged (``*_per_request``), acceptance length = 1 +
  accepted / that request's verify steps and draft acceptance rate = accepted / proposed.
- output token throughput (system) = Σ OSL / (max end − min send) (AIPerf duration);
  per user = 1 / TPOT. Goodput = requests meeting every SLO / duration (DistServe,
  arXiv 2401.09670; TPOT counts as 0 when OSL ≤ first-response tokens, as in vLLM).
- Statistics: mean, std (ddof 0), min, max, p50/p90/p95/p99 (numpy ``linear``) and n.

Inputs are DataFrames of :class:`trtbench.core.records.RequestRecord` /
:class:`trtbench.core.records.ResponseRecord` (``trtbench.core.export.records_to_frame``). Failed
requests (``error`` set) are dropped explicitly from latency statistics and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd

from trtbench.profiling.loadtest.records.client_timing import timing_columns
from trtbench.profiling.loadtest.stats.acceptance import (
    NOMINAL_PROPOSALS,
    acceptance_summary,
    request_counts,
    request_verify_steps,
)
from trtbench.profiling.loadtest.stats.speedups import COMPLETE, add_speedups

STATS = ("mean", "std", "min", "max", "p50", "p90", "p95", "p99")
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
TIER_KEYS = ("variant", "tier")
SLO_KEYS = {
    "ttft_ms": "time_to_first_token",
    "tpot_ms": "time_per_output_token",
    "e2e_ms": "request_latency",
}

T = TypeVar("T", str, tuple)


def strip_prompt_echo(output: Sequence[T] | str, prompt: Sequence[T] | str) -> int:
    """Number of leading output items that are the prompt echoed back (0 when not echoed).

    Works on token-id sequences and on text. A server asked without
    ``exclude_input_in_output`` returns the prompt before the generated tokens; those are
    not output.
    """
    n = len(prompt)
    if n == 0 or len(output) < n:
        return 0
    return n if list(output[:n]) == list(prompt) else 0


def remove_echo(counts: Sequence[int], echoed: int) -> list[int]:
    """Per-response token counts with ``echoed`` tokens taken off the earliest responses."""
    out = []
    for n in counts:
        take = min(n, echoed)
        echoed -= take
        out.append(n - take)
    return out


def _ok(requests: pd.DataFrame) -> pd.DataFrame:
    """Successful requests that produced at least one token."""
    return requests[requests["error"].isna() & requests["first_token_ns"].notna()]


def request_metrics(
    requests: pd.DataFrame, responses: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per-request metrics in display units, one row per successful request.

    ``responses`` (optional) give each request's verify steps from its per-step counts
    (``acceptance.request_counts``); without them: token responses − 1.

    Returns:
        Columns: variant, tier, request_id, time_to_first_token_ms, request_latency_ms,
        time_per_output_token_ms (NaN when OSL ≤ first-response tokens),
        output_token_throughput_per_user_tokens_per_s, tokens_per_response_tokens (NaN with
        one token response), input_sequence_length_tokens, output_sequence_length_tokens,
        client_queue_time_ms, dispatch_lag_ms, time_to_first_token_with_queue_ms,
        request_latency_with_queue_ms, client_to_server_delay_ms, server_queue_time_ms,
        server_prefill_time_ms (client_timing.py), acceptance_length_per_request_tokens,
        draft_acceptance_rate_per_request_ratio (NaN where the server reports no draft
        counts or nothing was proposed).
    """
    r = _ok(requests)

    def f(name: str) -> pd.Series:
        return r[name].astype(float)  # Int64 / object (None) columns → float64 with NaN

    ttft = f("first_token_ns") - f("sent_ns")
    e2e = f("last_token_ns") - f("sent_ns")
    osl = f("output_tokens")
    after_first = osl - f("first_response_tokens")
    tpot = (e2e - ttft) / after_first.where(after_first > 0)
    decode_responses = f("token_responses") - 1
    accepted = f("accepted_draft_tokens")
    drafted = f("draft_tokens")
    steps = request_verify_steps(r)  # token responses − 1 (acceptance.py)
    nominal = (
        r["spec_counts_source"].isin(NOMINAL_PROPOSALS)
        if "spec_counts_source" in r
        else pd.Series(False, index=r.index)
    )
    if responses is not None:
        counted = request_counts(requests, responses).set_index("request_id")
        steps = r["request_id"].map(counted["verify_steps"]).astype(float)
    return pd.DataFrame(
        {
            "variant": r["variant"],
            "tier": r["tier"],
            "request_id": r["request_id"],
            "time_to_first_token_ms": ttft / 1e6,
            "request_latency_ms": e2e / 1e6,
            "time_per_output_token_ms": tpot / 1e6,
            # no rate where every token came at once (TPOT 0): never inf
            "output_token_throughput_per_user_tokens_per_s": 1e9 / tpot.where(tpot > 0),
            "tokens_per_response_tokens": after_first
            / decode_responses.where(decode_responses > 0),
            "input_sequence_length_tokens": f("input_tokens"),
            "output_sequence_length_tokens": osl,
            **timing_columns(r),
            "acceptance_length_per_request_tokens": (1 + accepted / steps).where(
                (steps > 0) & (drafted > 0)
            ),
            # not where the proposals are nominal (acceptance.NOMINAL_PROPOSALS)
            "draft_acceptance_rate_per_request_ratio": accepted
            / drafted.where((drafted > 0) & ~nominal),
        }
    ).reset_index(drop=True)


def response_gaps(responses: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """Gaps between consecutive token-carrying responses of successful requests.

    Returns:
        Columns variant, tier, request_id, gap_ms (the ICL sample) and tokens (tokens of the
        later response; that gap gives ``tokens`` ITL samples of gap_ms / tokens). The first
        token response of a request has no gap, so TTFT never enters.
    """
    ok_ids = set(_ok(requests)["request_id"])
    t = responses[(responses["tokens"] > 0) & responses["request_id"].isin(ok_ids)]
    t = t.sort_values(["request_id", "index"])
    gap = t.groupby("request_id", sort=False)["received_ns"].diff()
    keep = gap.notna()
    return pd.DataFrame(
        {
            "variant": t["variant"][keep],
            "tier": t["tier"][keep],
            "request_id": t["request_id"][keep],
            "gap_ms": gap[keep].astype(float) / 1e6,
            "tokens": t["tokens"][keep].astype(int),
        }
    ).reset_index(drop=True)


def describe(values: np.ndarray | pd.Series) -> dict[str, float]:
    """mean, std (ddof 0), min, max, p50/p90/p95/p99 (numpy linear) and n; NaNs ignored.

    Returns NaN statistics and n = 0 for no values.
    """
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return {**dict.fromkeys(STATS, float("nan")), "n": 0}
    out = {
        "mean": float(v.mean()),
        "std": float(v.std(ddof=0)),
        "min": float(v.min()),
        "max": float(v.max()),
    }
    for name, q in PERCENTILES.items():
        out[name] = float(np.percentile(v, q, method="linear"))
    out["n"] = int(v.size)
    return out


Samples = Callable[[pd.DataFrame, pd.DataFrame], np.ndarray]


def _column(name: str) -> Samples:
    return lambda per_request, gaps: per_request[name].to_numpy(dtype=float)


def _itl_samples(per_request: pd.DataFrame, gaps: pd.DataFrame) -> np.ndarray:
    per_token = (gaps["gap_ms"] / gaps["tokens"]).to_numpy(dtype=float)
    return np.repeat(per_token, gaps["tokens"].to_numpy(dtype=int))


@dataclass(frozen=True)
class Metric:
    """A distribution metric: AIPerf-compatible name where semantics match, unit, samples."""

    name: str
    unit: str
    samples: Samples
    description: str


def _per_request(name: str, unit: str, description: str) -> Metric:
    """A metric sampled once per request from the ``<name>_<unit>`` per-request column."""
    return Metric(name, unit, _column(f"{name}_{unit}"), description)


METRICS: tuple[Metric, ...] = (
    _per_request("time_to_first_token", "ms", "send → first response carrying a token"),
    _per_request("request_latency", "ms", "E2E: send → last response carrying a token"),
    _per_request(
        "time_per_output_token",
        "ms",
        "TPOT = (E2E − TTFT) / (OSL − tokens in the first response), per request",
    ),
    Metric(
        "inter_token_latency",
        "ms",
        _itl_samples,
        "per-token ITL: a gap before a response of n tokens gives n samples of gap/n",
    ),
    Metric(
        "inter_chunk_latency",
        "ms",
        lambda p, g: g["gap_ms"].to_numpy(dtype=float),
        "ICL: gap between consecutive responses carrying tokens",
    ),
    _per_request(
        "tokens_per_response",
        "tokens",
        "(OSL − first-response tokens) / (token responses − 1), per request",
    ),
    _per_request(
        "output_token_throughput_per_user", "tokens_per_s", "1 / TPOT, per request"
    ),
    _per_request(
        "output_sequence_length",
        "tokens",
        "OSL: generated tokens (prompt echo excluded)",
    ),
    _per_request("input_sequence_length", "tokens", "ISL: prompt tokens"),
    _per_request(
        "client_queue_time",
        "ms",
        "ready − scheduled: wait for a --max-concurrency slot (0 without a cap)",
    ),
    _per_request(
        "dispatch_lag",
        "ms",
        "sent − ready: the client's own delay in sending a due request",
    ),
    _per_request(
        "time_to_first_token_with_queue",
        "ms",
        "first token − scheduled (queue-inclusive TTFT)",
    ),
    _per_request(
        "request_latency_with_queue",
        "ms",
        "last token − scheduled (queue-inclusive E2E)",
    ),
    _per_request(
        "client_to_server_delay",
        "ms",
        "server-reported arrival − sent, where the server reports it",
    ),
    _per_request(
        "server_queue_time",
        "ms",
        "server first scheduled − server arrival "
        "(TensorRT-LLM perf metrics), where the server reports them",
    ),
    _per_request(
        "server_prefill_time",
        "ms",
        "server first token − server first "
        "scheduled (TensorRT-LLM perf metrics), where the server reports them",
    ),
    _per_request(
        "acceptance_length_per_request",
        "tokens",
        "1 + accepted drafts / verify steps (token responses − 1) of each request, "
        "where the server reports draft counts (pooled: acceptance_length_tokens)",
    ),
    _per_request(
        "draft_acceptance_rate_per_request",
        "ratio",
        "accepted / proposed draft tokens, where the server reports them",
    ),
)


def stat_column(metric: Metric, stat: str) -> str:
    """Summary column name: ``<metric>_<stat>_<unit>``, or ``<metric>_count`` for n."""
    return (
        f"{metric.name}_count" if stat == "n" else f"{metric.name}_{stat}_{metric.unit}"
    )


def osl_mismatch(requests: pd.DataFrame) -> pd.Series:
    """True where OSL misses the requested length by more than min(5 %, 50 tokens).

    The threshold is AIPerf's OSL-mismatch warning (https://github.com/ai-dynamo/aiperf).
    """
    r = _ok(requests)
    requested = r["requested_output_tokens"].astype(float)
    limit = np.minimum(0.05 * requested, 50.0)
    return (r["output_tokens"] - requested).abs() > limit


def osl_warnings(requests: pd.DataFrame) -> list[str]:
    """One warning per (variant, tier) whose output lengths miss the requested ones."""
    miss = osl_mismatch(requests)
    out = []
    r = _ok(requests)
    for (variant, tier), idx in r.groupby(list(TIER_KEYS), sort=False).groups.items():
        bad = int(miss[idx].sum())
        if bad:
            out.append(
                f"{variant} {tier}: {bad} of {len(idx)} requests returned an output length "
                "that misses the requested one by more than min(5%, 50 tokens); ask for "
                "fixed lengths (min tokens = max tokens) where the model takes them (the "
                "llmapi model does not) or check the server's end token"
            )
    return out


def good_requests(
    per_request: pd.DataFrame, slos: Mapping[str, float] | None
) -> pd.Series:
    """True where every given SLO (``ttft_ms``, ``tpot_ms``, ``e2e_ms``; upper bounds) holds.

    Raises:
        ValueError: an unknown SLO key (the message lists the known ones).
    """
    good = pd.Series(True, index=per_request.index)
    for key, bound in (slos or {}).items():
        if key not in SLO_KEYS:
            raise ValueError(f"unknown SLO {key!r}; use {', '.join(SLO_KEYS)}")
        values = per_request[f"{SLO_KEYS[key]}_ms"]
        if key == "tpot_ms":
            values = values.fillna(0.0)
        good &= values <= bound
    return good


def _tier_scalars(
    req: pd.DataFrame, per_request: pd.DataFrame, slos: Mapping[str, float] | None
) -> dict[str, float | int]:
    """Counts, duration and throughputs of one tier (all requests of the tier in ``req``)."""
    ok = _ok(req)
    passes = req.groupby(
        req["repeat"].fillna(0) if "repeat" in req else 0 * req["end_ns"]
    )
    # Σ over passes (loadtest.repeats) of max end − min send: other tiers ran in between
    duration_ns = float((passes["end_ns"].max() - passes["sent_ns"].min()).sum())
    duration_s = duration_ns / 1e9
    rate = (lambda x: x / duration_s) if duration_s > 0 else (lambda x: float("nan"))
    good = int(good_requests(per_request, slos).sum()) if slos else None
    first = req.iloc[0] if len(req) else None
    return {
        "concurrency": None if first is None else first["concurrency"],
        "request_rate_per_s": None if first is None else first["request_rate_per_s"],
        "max_concurrency": None if first is None else first.get("max_concurrency"),
        "request_count": int(len(req)),
        "error_count": int(req["error"].notna().sum()),
        "osl_mismatch_count": int(osl_mismatch(req).sum()),
        "duration_s": duration_s,
        "output_token_throughput_tokens_per_s": rate(float(ok["output_tokens"].sum())),
        "request_throughput_per_s": rate(float(len(ok))),
        "request_goodput_per_s": float("nan") if good is None else rate(float(good)),
        "good_request_fraction_ratio": (
            float("nan") if good is None or not len(req) else good / len(req)
        ),
    }


TierStatuses = Mapping[tuple[str, str], tuple[str, str]]
"""(variant, tier label) → (tier_status, reason); see ``profiling/loadtest/records/outcome.py``."""


def _status_rows(statuses: TierStatuses, seen: set[tuple[str, str]]) -> list[dict]:
    """Rows for tiers that ended without a finished request (no records to group)."""
    rows = []
    for (variant, tier), (status, reason) in statuses.items():
        if (variant, tier) in seen:
            continue
        load = tier[1:]
        rows.append(
            {
                "variant": variant,
                "tier": tier,
                "tier_status": status,
                "tier_status_reason": reason,
                "request_count": 0,
                "error_count": 0,
                "osl_mismatch_count": 0,
                "duration_s": float("nan"),
                "output_token_throughput_tokens_per_s": float("nan"),
                "request_throughput_per_s": float("nan"),
                "concurrency": int(load)
                if tier.startswith("c") and load.isdigit()
                else None,
                "request_rate_per_s": float(load) if tier.startswith("r") else None,
            }
        )
    return rows


def summarize(
    requests: pd.DataFrame,
    responses: pd.DataFrame,
    slos: Mapping[str, float] | None = None,
    baseline: str | None = None,
    statuses: TierStatuses | None = None,
) -> pd.DataFrame:
    """One row per (variant, tier): status, counts, throughputs, goodput, every metric's stats.

    Args:
        requests: RequestRecord rows of any number of variants and tiers.
        responses: ResponseRecord rows of the same requests.
        slos: ``{"ttft_ms": …, "tpot_ms": …, "e2e_ms": …}`` upper bounds (goodput columns
            are NaN without SLOs).
        baseline: the variant the speedups compare against at the same tier (None: no
            speedups).
        statuses: how each tier ended; a tier not listed is ``complete``. A listed tier
            without records gets a row with its status and zero requests.

    Returns:
        Columns in ``trtbench.profiling.loadtest.files.schemas.SUMMARY_SCHEMA`` order.
    """
    statuses = statuses or {}
    per_request = request_metrics(requests, responses)
    gaps = response_gaps(responses, requests)
    rows = []
    for (variant, tier), req in requests.groupby(list(TIER_KEYS), sort=False):
        mine = (per_request["variant"] == variant) & (per_request["tier"] == tier)
        my_gaps = gaps[(gaps["variant"] == variant) & (gaps["tier"] == tier)]
        status, reason = statuses.get((variant, tier), (COMPLETE, ""))
        row: dict[str, object] = {
            "variant": variant,
            "tier": tier,
            "tier_status": status,
            "tier_status_reason": reason,
        }
        row.update(_tier_scalars(req, per_request[mine], slos))
        for metric in METRICS:
            stats = describe(metric.samples(per_request[mine], my_gaps))
            row.update({stat_column(metric, s): v for s, v in stats.items()})
        rows.append(row)
    rows += _status_rows(statuses, {(r["variant"], r["tier"]) for r in rows})
    pooled = acceptance_summary(
        requests, responses
    )  # speculative figures (acceptance.py)
    frame = pd.DataFrame(rows)
    frame = frame.merge(pooled, on=list(TIER_KEYS), how="left") if len(frame) else frame
    return add_speedups(frame, baseline)
