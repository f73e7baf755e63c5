"""The batch a decoding request actually shares, from the client's own records (pure + reader).

A closed-loop tier at concurrency c keeps c requests in flight, but a request's decode steps
do not all share a batch of c: while one request is in its prefill, and at the tail of a
pass when requests finish and none replace them, fewer rows decode. The batch a request
sees is measured from ``loadtest/requests.csv`` and ``loadtest/responses.csv`` (client
``perf_counter_ns`` stamps, one clock per run):

* a request *decodes* from its first to its last token-carrying response,
  ``[first_token_ns, last_token_ns]`` (successful requests only);
* each of its *decode responses* (a token-carrying response after the first one; one per
  decode step when streaming) is a step it took part in, at ``received_ns``; the batch of
  that step is the number of requests of the same pass (variant, tier, repeat) decoding at
  that instant, ``first_j <= received_ns <= last_j`` (the request itself included);
* a request's batch ``B_r`` is the mean over its decode responses; the tier's effective
  batch ``B_eff`` is the mean of ``B_r`` over the tier's measured requests (``in_window``,
  every pass together);
* a request's *admissions* ``n_r`` are the other requests of its pass (measured or not)
  whose first token came strictly inside its decode window — each was prefilled while it
  waited (:mod:`trtbench.plan.tier_stall`); ``A_r = n_r / (output_tokens −
  first_response_tokens)`` (the TPOT denominator) and the tier's ``A`` is the mean of
  ``A_r`` over the same requests.

Why the mean over requests of a per-request mean: the measured TPOT is the mean over
requests of ``decode time / decode tokens``, and with a step cost linear in B a request's
decode time is its step count x ``t(B_r)`` — so ``t(B_eff)`` is what the TPOT mean sees.
On the demo (c1, 2, 4, 8; 16 requests a pass) ``B_eff`` is within 2 % of c for the baseline
and 7-12 % below c for the speculative variants (their requests finish in fewer steps, so
the tail of a pass is a larger share of their steps).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.core.data_files import read_csv_checked
from trtbench.core.records import RequestRecord
from trtbench.core.run_dir import RunDir
from trtbench.profiling.loadtest.files.schemas import (
    REQUESTS_SCHEMA,
    read_records_csv,
    record_kinds,
)

PASS_KEYS = ("variant", "tier", "repeat")
BATCH_COLUMNS = (
    "variant",
    "tier",
    "batch_effective",
    "admissions_per_token",
    "requests_count",
)
FIX = "re-run `trtbench loadtest` for the variants it holds, or delete the file"


def _pass_batches(requests: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """``B_r`` (``b``) and ``A_r`` (``a``) for every decoding request of one pass (index
    ``request_id``)."""
    req = requests.set_index("request_id")
    first = req["first_token_ns"].astype("int64")
    last = req["last_token_ns"].astype("int64")
    resp = responses[responses["request_id"].isin(first.index)]
    resp = resp[resp["tokens"].astype(float) > 0]
    at = resp["received_ns"].astype("int64")
    resp = resp[at.to_numpy() > resp["request_id"].map(first).to_numpy()]
    times = resp["received_ns"].to_numpy("int64")
    firsts = np.sort(first.to_numpy())
    started = np.searchsorted(firsts, times, side="right")
    ended = np.searchsorted(np.sort(last.to_numpy()), times, side="left")
    counts = pd.Series(started - ended, index=resp.index, dtype=float)
    b = counts.groupby(resp["request_id"]).mean()
    # other requests whose first token came strictly inside (first_r, last_r)
    inside = np.searchsorted(firsts, last.to_numpy(), side="left") - np.searchsorted(
        firsts, first.to_numpy(), side="right"
    )
    lead = pd.Series(req.get("first_response_tokens", 1), index=req.index).fillna(1)
    decode = req["output_tokens"].astype(float) - lead.astype(float)
    a = pd.Series(inside, index=req.index, dtype=float) / decode.where(decode > 0)
    return pd.DataFrame({"b": b, "a": a.reindex(b.index)})


def effective_batch(requests: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """``B_eff`` per (variant, tier) from request and response records (module doc).

    Args:
        requests: ``requests.csv`` rows (variant, tier, request_id, first_token_ns,
            last_token_ns, output_tokens, error; ``first_response_tokens`` optional (1); ``repeat`` and ``in_window`` optional: one pass, all
            measured).
        responses: ``responses.csv`` rows (request_id, received_ns, tokens).

    Returns:
        Columns :data:`BATCH_COLUMNS`: the tier's mean batch and admissions per decode
        token over its measured decoding requests, and how many there were; tiers without
        one are absent.
    """
    req = requests.copy()
    if "repeat" not in req:
        req["repeat"] = 0
    req["repeat"] = req["repeat"].fillna(0).astype(int)
    ok = req["first_token_ns"].notna() & req["last_token_ns"].notna()
    if "error" in req:
        ok &= req["error"].isna() | (req["error"].astype(str) == "")
    req = req[ok]
    measured = (
        req["in_window"].fillna(True).astype(bool)
        if "in_window" in req
        else pd.Series(True, index=req.index)
    )
    parts = []
    for _, group in req.groupby(list(PASS_KEYS), sort=False):
        per = _pass_batches(group, responses)
        keep = group.loc[measured[group.index], "request_id"]
        per = per[per.index.isin(keep)]
        if len(per):
            v, t = group["variant"].iloc[0], group["tier"].iloc[0]
            parts.append(per.reset_index(drop=True).assign(variant=v, tier=t))
    if not parts:
        return pd.DataFrame(columns=list(BATCH_COLUMNS))
    every = pd.concat(parts, ignore_index=True)
    out = every.groupby(["variant", "tier"], sort=False).agg(
        batch_effective=("b", "mean"),
        admissions_per_token=("a", "mean"),
        requests_count=("b", "size"),
    )
    return out.reset_index()[list(BATCH_COLUMNS)]


def with_batch(summary: pd.DataFrame, batch: pd.DataFrame | None) -> pd.DataFrame:
    """``summary`` plus ``batch`` (B_eff where measured, else the concurrency),
    ``batch_source`` (``records`` | ``concurrency``) and ``admissions_per_token`` (A, NaN
    where not measured), matched on (variant, tier)."""
    out = summary.copy()
    out["batch"] = out["concurrency"].astype(float)
    out["batch_source"] = "concurrency"
    out["admissions_per_token"] = np.nan
    if batch is not None and len(batch):
        keys = pd.MultiIndex.from_arrays([out["variant"], out["tier"]])
        by_tier = batch.set_index(["variant", "tier"])
        found = pd.Series(
            by_tier["batch_effective"].reindex(keys).to_numpy(float), index=out.index
        )
        out.loc[found.notna(), "batch"] = found[found.notna()]
        out.loc[found.notna(), "batch_source"] = "records"
        if "admissions_per_token" in by_tier:
            a = by_tier["admissions_per_token"].reindex(keys).to_numpy(float)
            out["admissions_per_token"] = a
    return out


def read_effective_batch(root: Path) -> pd.DataFrame | None:
    """:func:`effective_batch` of a run directory (None when either record file is absent).

    Raises:
        DataFileError: a record file present but corrupt (names the file and line).
    """
    run = RunDir(Path(root))
    if not run.requests_csv.exists() or not run.responses_csv.exists():
        return None
    requests = read_csv_checked(
        run.requests_csv,
        REQUESTS_SCHEMA,
        fix=FIX,
        kinds={**record_kinds(RequestRecord), "in_window": "bool"},
        keys=("variant", "tier", "request_id"),
    )
    return effective_batch(requests, read_records_csv(run.responses_csv))
