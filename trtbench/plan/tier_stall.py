"""Decode time a request loses to other requests' prefills (pure).

What the reference engine does (``builders/reference/batcher.py``, ``InflightBatcher``): one
loop iteration, on one thread, first admits every waiting request a free slot can take and
prefills each ALONE (``decoder.admit``: the target's forward over the prompt; a draft-target
decoder prefills its draft model too, ``_after_prefill``), delivering its first token at
once, and only then runs ONE batched decode step over all active rows. A prefill is not
fused into a decode step: every request already decoding waits the newcomer's whole prefill
P once per admission. (TensorRT-LLM's ``inflight_fused_batching`` puts context and
generation tokens in the same forward instead; there the stall is the prefill's extra
compute, not P.)

The stall is therefore a separate term of a request's decode time, counted, not divided
by the tokens per step E: a request r that saw ``n_r`` admissions while it decoded, with
``N_r`` decode tokens, loses ``n_r·P`` ms, i.e. ``A_r·P`` per output token with
``A_r = n_r / N_r``. Measured per tier from the client's records
(:mod:`trtbench.plan.tier_batch`: ``n_r`` = the pass's other requests whose first token
came inside r's decode window; the tier's ``A`` = mean of ``A_r`` over its measured
requests, the TPOT mean being a mean over requests), and ``P`` = the tier's
``server_prefill_time`` mean (``first_token_time − first_scheduled_time``: the reference
engine stamps the admission right before the request's prefill and the first token right
after it, so P is one admission's stall, a draft-target's draft prefill included):
``stall = A·P`` ms per output token.

The count is NOT ``(B − 1)`` (one turnover of each other slot per request lifetime): on the
demo (16 requests a pass, ISL 32, OSL 48) the baseline's requests stay in lockstep (a cohort
is admitted in one iteration and finishes in one step), so a request sees only the
admissions after its own in its cohort, ``n = (c − 1)/2`` exactly (0.5, 1.5, 3.5 at c2, c4,
c8); speculative requests drift apart and see 0.8-0.9, 2.3-2.6 and 4.3-5.0, mostly with a
larger P (a draft-target's draft prefill, Medusa heads). The stall is 1-6 % of the
baseline's TPOT and 3-14 % of the speculative variants' (c2 to c8); docs/planner.md has
the before/after errors.
"""

from __future__ import annotations

import pandas as pd

from trtbench.profiling.report.comparison import summary_column

PREFILL = summary_column("server_prefill_time", "mean")


def with_stall(summary: pd.DataFrame) -> pd.DataFrame:
    """``summary`` plus ``stall_ms`` (``A·P``, module doc) and ``stall_source``.

    Args:
        summary: summary rows with ``admissions_per_token`` (A, NaN where the records are
            absent; :func:`trtbench.plan.tier_batch.with_batch`) and, optionally, the
            server prefill mean (P, ms).

    Returns:
        A copy with ``stall_ms`` (ms per output token; 0 where A or P is missing) and
        ``stall_source`` (``records``, or ``none`` where the stall is left out).
    """
    out = summary.copy()
    nan = pd.Series(float("nan"), index=out.index, dtype=float)
    a, p = (
        pd.to_numeric(out[col], errors="coerce") if col in out else nan
        for col in ("admissions_per_token", PREFILL)
    )
    stall = a * p
    out["stall_ms"] = stall.fillna(0.0).astype(float)
    out["stall_source"] = stall.notna().map({True: "records", False: "none"})
    return out
