"""Speculative counts per tier from the server's own counters: delta and CSV rows.

Used where the responses carry no draft counts (an OpenAI-compatible server such as vLLM or
trtllm-serve, whose streamed chunks say nothing of drafts): the runner reads the server's
counters (``counter_reader.py``: which ones, and how, per server) right before and right
after each tier pass, in the one process that runs the tiers; the difference of the two
reads is the pass's counts
(:class:`~trtbench.profiling.loadtest.records.spec_counters.SpecCounters`), kept per pass in
:attr:`~trtbench.profiling.loadtest.records.outcome.TierOutcome.spec_counts` and summed over a tier's
passes here.

Figures (vLLM's definitions, ``v1/spec_decode/metrics.py``), filled into summary.csv's
:data:`~trtbench.profiling.loadtest.stats.acceptance.ACCEPTANCE_SUMMARY_COLUMNS` with
``spec_decode_counts_source`` naming the counters (``server_prometheus`` for vLLM's,
``trtllm_prometheus`` / ``trtllm_iteration_stats`` / ``trtllm_perf_metrics`` for trtllm-serve's):
acceptance length = 1 + accepted / drafts, draft acceptance rate = accepted / draft tokens,
accepted drafts per step = accepted / drafts, verify steps = drafts (all but the draft
acceptance rate stay empty where the server does not count verify steps, and a pass whose
per-request entries do not match its requests gives none: ``SpecCounters.figures``);
acceptance.csv gets one ``position`` row per draft position j = 1..K with steps = drafts and hits = accepted_per_pos[j − 1] (vLLM's per-position rate: its
denominator is every draft, also one cut short by ``max_tokens``). No histogram rows: the
counters do not say how many drafts each step accepted.

Limits: the counters are the server's, not the tier's. Any other traffic the server served
between the two scrapes (another client, a second load generator) is counted too and cannot
be told apart; a tier whose pass lost a scrape (server gone, ``/metrics`` refused) gets no
figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.core.data_files import read_csv_checked
from trtbench.profiling.loadtest.records.outcome import LoadResult
from trtbench.profiling.loadtest.records.spec_counters import (
    SERVER_COUNTER_SOURCES,
    SpecCounters,
)
from trtbench.profiling.loadtest.stats.acceptance import (
    ACCEPTANCE_SCHEMA,
    ACCEPTANCE_SUMMARY_COLUMNS,
    POSITION,
)

SOURCE = "spec_decode_counts_source"
TierKey = tuple[str, str]
FIX = "re-run `trtbench loadtest` for its variants, or delete the file"


def pass_delta(
    before: SpecCounters | None, after: SpecCounters | None
) -> tuple[SpecCounters | None, ...]:
    """What one tier pass adds to ``TierOutcome.spec_counts``: ``()`` when neither scrape
    found counters (no speculation, or not an OpenAI server), ``(None,)`` when one of the two
    is missing (the tier then gets no figures), else ``(after − before,)``."""
    if before is None and after is None:
        return ()
    if before is None or after is None:
        return (None,)
    return (after.minus(before),)


def tier_counts(results: Mapping[str, LoadResult]) -> dict[TierKey, SpecCounters]:
    """(variant, tier) → its counts summed over its passes; tiers without counts, or with a
    pass whose scrape failed, whose per-request entries do not match its requests or that
    lost iteration rows (a partial count, even where another pass's surplus would even it
    out), are left out."""
    out: dict[TierKey, SpecCounters] = {}
    for variant, result in results.items():
        for t in result.tiers:
            passes = t.spec_counts
            if not passes or any(
                p is None or p.unmatched_requests or p.lost for p in passes
            ):
                continue
            total = passes[0]
            for p in passes[1:]:
                total = total.plus(p)  # type: ignore[union-attr,arg-type]
            out[(variant, t.tier)] = total  # type: ignore[assignment]
    return out


def summary_values(counts: SpecCounters) -> dict[str, object]:
    """The :data:`ACCEPTANCE_SUMMARY_COLUMNS` of one tier's counts (empty when no draft was
    proposed: nothing to fill)."""
    f = counts.figures()
    if not f:
        return {}
    return {
        "acceptance_length_tokens": f["acceptance_length_tokens"],
        "draft_acceptance_rate_ratio": f["draft_acceptance_rate_ratio"],
        "accepted_drafts_per_step_tokens": f["accepted_drafts_per_step_tokens"],
        "verify_steps_count": counts.drafts,
        "proposed_draft_tokens_count": counts.draft_tokens,
        "accepted_draft_tokens_count": counts.accepted,
        SOURCE: counts.source,
    }


def position_rows(key: TierKey, counts: SpecCounters) -> list[dict[str, object]]:
    """acceptance.csv ``position`` rows j = 1..K of one tier's counts (none without drafts)."""
    if not counts.drafts > 0:  # none proposed, or steps not counted (NaN)
        return []
    steps = round(counts.drafts)
    return [
        {
            "variant": key[0],
            "tier": key[1],
            "kind": POSITION,
            "draft_position": j,
            "steps_count": steps,
            "hits_count": round(a),
            "value_ratio": a / counts.drafts,
            "source": counts.source,
        }
        for j, a in enumerate(counts.accepted_per_pos, start=1)
    ]


def _old_rows(
    path: Path | None, keep: set[str], column: str, schema: Sequence | None = None
) -> pd.DataFrame | None:
    """Rows of an earlier CSV from a server's counters (``SERVER_COUNTER_SOURCES``) for the
    variants in ``keep``."""
    if path is None or not path.is_file():
        return None
    old = read_csv_checked(path, schema, fix=FIX, keys=("variant", "tier"))
    if column not in old:
        return None
    mine = old["variant"].astype(str).isin(keep)
    return old[mine & old[column].astype(str).isin(SERVER_COUNTER_SOURCES)]


def add_server_counts(
    summary: pd.DataFrame,
    acceptance: pd.DataFrame,
    results: Mapping[str, LoadResult],
    old_summary: Path | None = None,
    old_acceptance: Path | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fill the acceptance columns and rows from the Prometheus counts of ``results``.

    Only rows whose responses carried no counts (``spec_decode_counts_source`` empty) are
    filled, and acceptance.csv only gets rows for such tiers. Variants not in ``results``
    keep the ``server_prometheus`` figures and rows of the earlier files (read before they
    are rewritten).

    Args:
        summary: summary.csv's frame (``variant``, ``tier``, the acceptance columns).
        acceptance: acceptance.csv's frame (:data:`ACCEPTANCE_SCHEMA`), per-step rows.
        results: this measurement's variants and their tier outcomes.
        old_summary, old_acceptance: the files as they were before this measurement.

    Returns:
        (summary, acceptance), new frames.

    Raises:
        DataFileError: an earlier file exists but is damaged.
    """
    counts = tier_counts(results)
    names = [c.name for c in ACCEPTANCE_SUMMARY_COLUMNS]
    out = summary.copy()
    if "variant" not in out or out.empty:
        return out, acceptance
    keep = set(out["variant"].astype(str)) - set(results)
    values: dict[TierKey, dict[str, object]] = {}
    old = _old_rows(old_summary, keep, SOURCE)
    if old is not None:
        for _, r in old.iterrows():
            values[(str(r["variant"]), str(r["tier"]))] = {n: r.get(n) for n in names}
    values |= {k: v for k, c in counts.items() if (v := summary_values(c))}
    for column in names:
        if column not in out:
            out[column] = np.nan
    out[SOURCE] = out[SOURCE].astype(object)
    source = out[SOURCE].fillna("").astype(str)
    filled: set[TierKey] = set()
    for i, (v, t) in enumerate(
        zip(out["variant"].astype(str), out["tier"].astype(str), strict=True)
    ):
        if source.iloc[i] or (v, t) not in values:
            continue
        for column, value in values[(v, t)].items():
            out.iloc[i, out.columns.get_loc(column)] = value
        filled.add((v, t))
    rows = [
        r for k in sorted(filled) if k in counts for r in position_rows(k, counts[k])
    ]
    frames = [acceptance]
    old_acc = _old_rows(old_acceptance, keep, "source", ACCEPTANCE_SCHEMA)
    if old_acc is not None and len(old_acc):
        frames.append(old_acc)
    if rows:
        frames.append(pd.DataFrame(rows, columns=[c.name for c in ACCEPTANCE_SCHEMA]))
    frames = [f for f in frames if len(f)]
    if len(frames) <= 1:
        return out, frames[0] if frames else acceptance
    return out, pd.concat(frames, ignore_index=True)
