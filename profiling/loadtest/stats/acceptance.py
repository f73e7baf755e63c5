"""Speculative-decoding acceptance from per-step counts (pure): pooled, per position, histogram.

One streamed response is one engine step on every streaming engine trtbench serves
(``docs/metrics.md``). A **verify step** is a response whose ``draft_tokens`` (proposed)
is > 0; the prefill response and every baseline step propose 0 and are not verify steps.
Per (variant, tier), over the successful requests only, pooled (token-weighted):

- acceptance length = 1 + Σ accepted / verify steps (vLLM ``bench serve`` "acceptance
  length" = 1 + Δaccepted/Δdrafts; AIPerf ``spec_decode_token_weighted_acceptance_length``;
  trtllm-bench's global acceptance length Σ tokens / Σ iterations, which equals it when no step
  is cut);
- draft acceptance rate = Σ accepted / Σ proposed (vLLM "acceptance rate", AIPerf
  ``spec_decode_overall_draft_acceptance_rate``; NOT TensorRT-LLM's Medusa "acceptance rate",
  which means tokens per step);
- accepted drafts per step = Σ accepted / verify steps (AIPerf
  ``spec_decode_accepted_per_verified``);
- acceptance rate at draft position j = 1..K (K = the largest number proposed in one step of the
  tier): steps that accepted ≥ j drafts / steps that proposed ≥ j (vLLM
  ``spec_decode_num_accepted_tokens_per_pos`` / drafts, "acceptance rate per position");
- histogram j = 0..K: steps that accepted exactly j drafts, and their share of the verify
  steps (AIPerf's accepted-per-step histogram; vLLM's per-request histogram).

Counting at a step cut by ``max_tokens`` or after the end token: ``accepted`` is what the
engine's verification accepted (vLLM's count; the reference engine reports it uncut), while
output length and throughput count the emitted tokens.

Medusa trees: a Medusa step proposes every tree node (``proposed`` = tree nodes), but at most
the tree depth can be accepted along one path, so positions beyond the depth show rate 0 and
the draft acceptance rate is bounded by depth / nodes. A chain (each node one child) proposes
exactly its depth, and its per-position rates then mean the same as draft-target's.

Sources (``spec_decode_counts_source``): ``server_per_step`` when every token-carrying response
of a streamed request carries its own counts (the reference model); ``server_request_totals``
when only request totals are known (TensorRT-LLM's perf metrics on the final response, or a
response that is not streamed): the pooled figures use verify steps = token responses − 1
(one response: OSL − 1 − accepted, trtllm-bench's decode iterations), and the per-position
rates and the histogram are not available (no rows); empty when the server reports no counts
or nothing was proposed (a baseline). A request whose server named its totals keeps that name
(``spec_counts_source`` in requests.csv: ``sglang_spec_tokens_details``, SGLang's
``sglext.spec_tokens_details``) and its server-counted verify steps (``verify_steps``); where
every counted request of a tier also has its steps by accepted drafts
(``accepted_drafts_histogram``, index j = steps that accepted j drafts) and either its steps
by proposed drafts (``proposed_drafts_histogram``, where the server counts its proposals) or
the same K drafts proposed per step, the tier gets position and histogram rows from them,
with that source. Counts whose proposals are nominal (:data:`SGLANG_NOMINAL`: an adaptive
draft length reported as the configured one) give no draft acceptance rate, no proposed
count and no position rows; their verify steps, accepted drafts and histogram stand. Over an
OpenAI API, where responses carry no counts, the server's Prometheus counters over the tier fill
the pooled figures and the position rows instead (``server_prometheus``;
:mod:`~trtbench.profiling.loadtest.clients.server_counts`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trtbench.core.export import Column

PER_STEP = "server_per_step"
TOTALS = "server_request_totals"
SGLANG_DETAILS = "sglang_spec_tokens_details"
"""SGLang's per-request ``sglext.spec_tokens_details`` (clients/sglang_spec.py)."""
SGLANG_NOMINAL = "sglang_spec_tokens_details_nominal"
"""The same where the proposals are nominal: ``speculative_adaptive`` drafting counted as the
configured draft length (clients/sglang_spec.py, records/counter_versions.py)."""
NOMINAL_PROPOSALS = frozenset({SGLANG_NOMINAL})
"""Sources whose proposed counts are not the drafts proposed."""
HISTOGRAM_SOURCES = (SGLANG_DETAILS, SGLANG_NOMINAL)
POSITION = "position"
HISTOGRAM = "histogram"
KEYS = ["variant", "tier"]

ACCEPTANCE_SUMMARY_COLUMNS: tuple[Column, ...] = (
    Column(
        "acceptance_length_tokens",
        "pooled: 1 + Σ accepted drafts / verify steps (vLLM bench serve acceptance length; AIPerf token-weighted acceptance length); empty without draft counts",
        False,
    ),
    Column(
        "draft_acceptance_rate_ratio",
        "pooled: Σ accepted / Σ proposed draft tokens (vLLM/AIPerf acceptance rate; not TRT-LLM's Medusa 'acceptance rate' = tokens/step)",
        False,
    ),
    Column(
        "accepted_drafts_per_step_tokens",
        "pooled: Σ accepted drafts / verify steps (AIPerf accepted_per_verified)",
        False,
    ),
    Column(
        "verify_steps_count",
        "verify steps (steps that proposed > 0 drafts) of successful requests",
        False,
    ),
    Column(
        "proposed_draft_tokens_count",
        "Σ proposed draft tokens (Medusa: tree nodes per step)",
        False,
    ),
    Column(
        "accepted_draft_tokens_count",
        "Σ drafts accepted by verification (not reduced at a step cut by max_tokens / the end token)",
        False,
    ),
    Column(
        "spec_decode_counts_source",
        "server_per_step (per-response counts) | server_request_totals (request totals only: no per-position rates) | sglang_spec_tokens_details (SGLang's per-request totals, verify steps and histogram) | sglang_spec_tokens_details_nominal (the same with adaptive drafting counted as the configured draft length: no draft acceptance rate, no proposed count, no position rows) | server_prometheus (vLLM's Prometheus counters over the tier, OpenAI APIs: no histogram) | trtllm_prometheus (trtllm-serve's /prometheus/metrics over the tier) | trtllm_iteration_stats (trtllm-serve's /metrics iteration stats over the tier: no per-position rates) | trtllm_perf_metrics (trtllm-serve's /perf_metrics request entries over the tier: draft acceptance rate only) | empty (no draft counts, or a baseline)",
        False,
    ),
)

ACCEPTANCE_SCHEMA: tuple[Column, ...] = (
    Column("variant", "served variant"),
    Column("tier", "tier label (c<N> / r<X>)"),
    Column(
        "kind",
        "position (acceptance rate at draft position j) | histogram (steps that accepted exactly j drafts)",
    ),
    Column(
        "draft_position",
        "j: 1..K for kind position (the j-th draft of a step); 0..K accepted drafts for kind histogram",
        kind="int",
    ),
    Column(
        "steps_count",
        "position: verify steps that proposed ≥ j drafts; histogram: all verify steps",
        kind="int",
    ),
    Column(
        "hits_count",
        "position: of those, steps that accepted ≥ j drafts; histogram: steps that accepted exactly j",
        kind="int",
    ),
    Column(
        "value_ratio",
        "hits / steps: the acceptance rate at position j, or the share of steps that accepted exactly j",
    ),
    Column(
        "source",
        "where the counts come from: server_per_step, sglang_spec_tokens_details (the requests' histograms of accepted drafts per step; position rows over the steps that proposed each position where the server counts proposals), sglang_spec_tokens_details_nominal (histogram rows only), or a server's counters over the tier, server_prometheus or trtllm_prometheus (position rows only; steps = the tier's drafts, vLLM's denominator)",
    ),
)


def _ok(requests: pd.DataFrame) -> pd.DataFrame:
    return requests[requests["error"].isna() & requests["first_token_ns"].notna()]


def _num(frame: pd.DataFrame, name: str) -> pd.Series:
    if name not in frame:
        return pd.Series(np.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[name], errors="coerce").astype(float)


def request_verify_steps(requests: pd.DataFrame) -> pd.Series:
    """Verify steps per request from its totals (float; NaN without draft counts).

    The server's own count where it reports one (``verify_steps``, SGLang's
    ``spec_verify_ct``); else token responses − 1 (one response per step, the first being
    the prefill); a request with one token response (not streamed) gets OSL − 1 − accepted,
    trtllm-bench's decode iterations (exact unless the last step was cut). Negative results
    become 0.
    """
    responses = _num(requests, "token_responses")
    osl, accepted = (
        _num(requests, "output_tokens"),
        _num(requests, "accepted_draft_tokens"),
    )
    steps = (responses - 1).where(responses > 1, osl - 1 - accepted).clip(lower=0)
    server = _num(requests, "verify_steps")  # counted by the server (SGLang)
    steps = steps.where(server.isna(), server)
    return steps.where(_num(requests, "draft_tokens").notna())


def request_counts(requests: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """Draft counts per successful request: the source and the verify steps of each.

    Args:
        requests: RequestRecord rows; responses: ResponseRecord rows of the same requests.

    Returns:
        Columns variant, tier, request_id, source (``server_per_step`` | ``server_request_totals``
        | ``""``), proposed, accepted, verify_steps (floats; NaN without counts).
    """
    ok = _ok(requests)
    if "request_id" not in responses:
        responses = pd.DataFrame(columns=["request_id", "tokens", "draft_tokens"])
    resp = responses[responses["request_id"].isin(set(ok["request_id"]))]
    counted = _num(resp, "draft_tokens").notna()
    per = (
        pd.DataFrame(
            {
                "request_id": resp["request_id"],
                "counted": counted,
                "token_uncounted": (_num(resp, "tokens") > 0) & ~counted,
                "verify": _num(resp, "draft_tokens") > 0,
            }
        )
        .groupby("request_id")[["counted", "token_uncounted", "verify"]]
        .sum()
    )
    out = ok[["variant", "tier", "request_id"]].copy()
    out["proposed"] = _num(ok, "draft_tokens")
    out["accepted"] = _num(ok, "accepted_draft_tokens")
    joined = per.reindex(ok["request_id"]).fillna(0).set_axis(ok.index)
    streamed = _num(ok, "token_responses") > 1
    step_wise = streamed & (joined["counted"] > 0) & (joined["token_uncounted"] == 0)
    has = out["proposed"].notna()
    out["source"] = np.where(~has, "", np.where(step_wise, PER_STEP, TOTALS))
    out["verify_steps"] = request_verify_steps(ok).where(
        ~step_wise, joined["verify"].astype(float)
    )
    named = _text(ok, "spec_counts_source")
    by_server = has & (named != "") & _num(ok, "verify_steps").notna()
    out["source"] = out["source"].where(~by_server, named)
    out["verify_steps"] = out["verify_steps"].where(
        ~by_server, _num(ok, "verify_steps")
    )
    return out.reset_index(drop=True)


def _text(frame: pd.DataFrame, name: str) -> pd.Series:
    if name not in frame:
        return pd.Series("", index=frame.index, dtype=object)
    return frame[name].fillna("").astype(str)


def verify_steps(requests: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """The verify steps of the tiers whose counts are all per step (``server_per_step``).

    Returns:
        Columns variant, tier, request_id, proposed, accepted (ints), one row per verify step.
    """
    counts = request_counts(requests, responses)
    counted = counts[counts["source"] != ""]
    whole = counted.groupby(KEYS)["source"].transform(lambda s: (s == PER_STEP).all())
    ids = set(counted.loc[whole.astype(bool), "request_id"])
    r = responses[responses["request_id"].isin(ids)]
    r = r[_num(r, "draft_tokens") > 0]
    return pd.DataFrame(
        {
            "variant": r["variant"].astype(str),
            "tier": r["tier"].astype(str),
            "request_id": r["request_id"],
            "proposed": _num(r, "draft_tokens").astype(int),
            "accepted": _num(r, "accepted_draft_tokens").fillna(0).astype(int),
        }
    ).reset_index(drop=True)


def _tier_source(sources: pd.Series, proposed: float) -> str:
    """The tier's one source, :data:`TOTALS` where its requests' sources differ."""
    counted = set(sources[sources != ""])
    if not counted or not proposed > 0:
        return ""
    return counted.pop() if len(counted) == 1 else TOTALS


def acceptance_summary(requests: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """Pooled acceptance figures per (variant, tier), successful requests only.

    Args:
        requests: RequestRecord rows (``trtbench.core.export.records_to_frame``).
        responses: ResponseRecord rows of the same requests.

    Returns:
        One row per (variant, tier) that has successful requests: ``variant``, ``tier`` and
        the :data:`ACCEPTANCE_SUMMARY_COLUMNS` (NaN figures and an empty source where nothing
        was proposed).
    """
    names = [c.name for c in ACCEPTANCE_SUMMARY_COLUMNS]
    if requests.empty:
        return pd.DataFrame(columns=[*KEYS, *names])
    counts = request_counts(requests, responses)
    rows = []
    for (variant, tier), c in counts.groupby(KEYS, sort=False):
        used = c[c["source"] != ""]
        proposed = float(used["proposed"].sum())
        accepted = float(used["accepted"].sum())
        steps = float(used["verify_steps"].sum())
        source = _tier_source(c["source"], proposed)
        row = {"variant": variant, "tier": tier, **dict.fromkeys(names, np.nan)}
        row["spec_decode_counts_source"] = source
        if source:
            per_step = accepted / steps if steps > 0 else np.nan
            nominal = source in NOMINAL_PROPOSALS
            row.update(
                acceptance_length_tokens=1.0 + per_step,
                draft_acceptance_rate_ratio=np.nan if nominal else accepted / proposed,
                accepted_drafts_per_step_tokens=per_step,
                verify_steps_count=steps,
                proposed_draft_tokens_count=np.nan if nominal else proposed,
                accepted_draft_tokens_count=accepted,
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=[*KEYS, *names])


def histogram_steps(requests: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """The verify steps of the tiers whose counts are all :data:`SGLANG_DETAILS` (or all
    :data:`SGLANG_NOMINAL`), from the requests' histograms of accepted drafts (one row per
    step; the pairing of a step's proposed and accepted drafts within a request is unknown
    and enters no figure: position rows count each marginal on its own).

    A tier is left out unless every counted request has a histogram that agrees with its
    totals (Σ steps = ``verify_steps``, Σ j · steps_j = accepted) and either a histogram of
    proposed drafts that agrees with its proposals or a whole number K = proposed /
    verify_steps per step: a tier with some requests' steps missing would be a partial
    count.

    Returns:
        Columns variant, tier, proposed (drafts the step proposed), accepted (ints), source.
    """
    counts = request_counts(requests, responses)
    ids = requests["request_id"]
    text = _text(requests, "accepted_drafts_histogram").set_axis(ids)
    drafts = _text(requests, "proposed_drafts_histogram").set_axis(ids)
    frames = []
    for (variant, tier), c in counts[counts["source"] != ""].groupby(KEYS, sort=False):
        source = c["source"].iloc[0]
        if source not in HISTOGRAM_SOURCES or not (c["source"] == source).all():
            continue
        steps = [
            _request_steps(text.get(rid, ""), n, p, a, drafts.get(rid, ""))
            for rid, n, p, a in zip(
                c["request_id"],
                c["verify_steps"],
                c["proposed"],
                c["accepted"],
                strict=True,
            )
        ]
        if any(s is None for s in steps):
            continue
        k = np.concatenate([s[0] for s in steps])  # type: ignore[index]
        accepted = np.concatenate([s[1] for s in steps])  # type: ignore[index]
        frames.append(
            pd.DataFrame(
                {
                    "variant": variant,
                    "tier": tier,
                    "proposed": k,
                    "accepted": accepted,
                    "source": source,
                }
            )
        )
    columns = ["variant", "tier", "proposed", "accepted", "source"]
    return (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=columns)
    )


def _counts_by_j(text: str, steps: float, total: float) -> np.ndarray | None:
    """A histogram written as text (index j = steps with j) that counts every step and
    ``total`` (Σ h = steps, Σ j · h_j = total); None otherwise."""
    try:
        hist = np.array([int(v) for v in text.split()], dtype=np.int64)
    except ValueError:
        return None
    if not hist.size or hist.min() < 0 or not steps > 0:
        return None
    if hist.sum() != steps or (np.arange(hist.size) * hist).sum() != total:
        return None
    return hist


def _request_steps(
    text: str, steps: float, proposed: float, accepted: float, drafts: str = ""
) -> tuple[np.ndarray, np.ndarray] | None:
    """One request's steps, (drafts proposed per step, accepted per step), from its
    histograms: the proposed one (``drafts``) where given, else K = proposed / steps each;
    None where a histogram is missing or disagrees with the totals."""
    hist = _counts_by_j(text, steps, accepted)
    if hist is None:
        return None
    n = int(hist.sum())
    accepted_steps = np.repeat(np.arange(hist.size), hist)
    if drafts:
        by_drafts = _counts_by_j(drafts, steps, proposed)
        if by_drafts is None:
            return None
        return np.repeat(np.arange(by_drafts.size), by_drafts), accepted_steps
    if proposed % steps:
        return None
    return np.full(n, int(proposed // steps)), accepted_steps


def _tier_rows(
    variant: str, tier: str, steps: pd.DataFrame, source: str = PER_STEP
) -> list[dict]:
    """Position and histogram rows of one tier's verify steps (histogram rows only where
    the proposals are nominal, :data:`NOMINAL_PROPOSALS`)."""
    k = int(steps["proposed"].max())
    accepted = steps["accepted"].clip(upper=k).to_numpy()
    exact = np.bincount(accepted, minlength=k + 1)
    at_least_acc = exact[::-1].cumsum()[::-1]  # [j] = steps that accepted ≥ j
    at_least_prop = np.bincount(steps["proposed"].to_numpy(), minlength=k + 1)[::-1]
    at_least_prop = at_least_prop.cumsum()[::-1]
    n = len(steps)
    rows = [
        (POSITION, j, int(at_least_prop[j]), int(at_least_acc[j]))
        for j in range(1, k + 1)
        if source not in NOMINAL_PROPOSALS
    ]
    rows += [(HISTOGRAM, j, n, int(exact[j])) for j in range(k + 1)]
    return [
        {
            "variant": variant,
            "tier": tier,
            "kind": kind,
            "draft_position": j,
            "steps_count": s,
            "hits_count": h,
            "value_ratio": h / s if s else np.nan,
            "source": source,
        }
        for kind, j, s, h in rows
    ]


def acceptance_table(requests: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """``loadtest/acceptance.csv``: per-position rates and the histogram, long format.

    Only tiers whose counts are per step (``server_per_step``), or whose requests' server
    histograms give every step (:func:`histogram_steps`, ``sglang_spec_tokens_details``),
    and that proposed drafts get rows; a run without such a tier gives an empty frame with
    the columns.

    Returns:
        Columns of :data:`ACCEPTANCE_SCHEMA`; per (variant, tier) K position rows
        (j = 1..K) then K + 1 histogram rows (j = 0..K).
    """
    columns = [c.name for c in ACCEPTANCE_SCHEMA]
    if requests.empty or responses.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for (variant, tier), s in verify_steps(requests, responses).groupby(
        KEYS, sort=False
    ):
        rows += _tier_rows(variant, tier, s, PER_STEP)
    named = histogram_steps(requests, responses)
    for (variant, tier), s in named.groupby(KEYS, sort=False):
        rows += _tier_rows(variant, tier, s, s["source"].iloc[0])
    return pd.DataFrame(rows, columns=columns)
