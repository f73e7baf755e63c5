"""TensorRT-LLM's speculative counts as ``trtllm-serve`` exposes them (pure).

Two endpoints, each with its own semantics (NVIDIA/TensorRT-LLM, ``tensorrt_llm/serve/
openai_server.py`` and ``tensorrt_llm/metrics/collector.py``):

* ``GET /prometheus/metrics`` (Prometheus text, cumulative counters; :func:`parse_prometheus`):
  ``trtllm_spec_decode_drafted_tokens_total{token_position="j"}`` and
  ``trtllm_spec_decode_accepted_tokens_total{token_position="j"}`` (0-based position j,
  counted per request when it finishes; need ``return_perf_metrics: true``; the same call
  counts the request in ``trtllm_request_success_total``, :func:`requests_counted`), and
  ``trtllm_spec_decode_num_draft_tokens_total`` / ``..._num_accepted_tokens_total`` (summed
  from the iteration stats; need ``enable_iter_perf_stats: true``). With the per-position
  counters the verify steps that drafted are the drafts at position 0, so vLLM's acceptance
  length (1 + accepted / drafts) and per-position rates (accepted at j / drafts) follow; with
  the iteration counters alone only the draft acceptance rate (accepted / draft tokens) does,
  and ``drafts`` is NaN.
* ``GET /metrics`` (JSON: a list of iteration stats, ``IterationStats`` of
  ``cpp/include/tensorrt_llm/executor/types.h``; emptied on every read, and ``[]`` unless
  ``enable_iter_perf_stats`` is set; :class:`IterationTotals`): per iteration ``iter`` (its
  number) and ``specDecodingStats`` {``numDraftTokens``, ``numAcceptedTokens``,
  ``numRequestsWithDraftTokens``, …}. Summed over the iterations of a tier: drafts = Σ
  requests with draft tokens (one verify step each), draft tokens, accepted tokens — the
  acceptance length TensorRT-LLM's own tests compute, (accepted + requests) / requests. No
  per-position counts. Because every read empties the queue, the reader polls it through the
  tier and keeps running totals; rows found missing between reads are counted as lost and
  the pass's counts carry them (``SpecCounters.lost``: such a pass gives no figures). Newer
  rows (``tensorrt_llm/executor/iteration_stats.py`` ``_materialize_frame``) carry
  ``statsSequence``, the frame's number, which advances on every frame lost or not, and
  ``statsDroppedFrames``, the frames the executor's buffer evicted so far
  (``PyExecutor._append_stats_frame``): a gap in the sequence is the exact loss, and the
  dropped-frames count says how much of it the executor's buffer evicted. Older rows have
  only ``iter``, whose gaps are the estimate (an iteration number that repeats hides a loss).
  Which revision writes which: ``records/counter_versions.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from trtbench.profiling.loadtest.records.spec_counters import (
    TRTLLM_ITERATION_STATS,
    TRTLLM_PROMETHEUS,
    SpecCounters,
)

POS_DRAFTED = "trtllm_spec_decode_drafted_tokens"
POS_ACCEPTED = "trtllm_spec_decode_accepted_tokens"
POSITION_LABEL = "token_position"
ITER_DRAFT_TOKENS = "trtllm_spec_decode_num_draft_tokens"
ITER_ACCEPTED = "trtllm_spec_decode_num_accepted_tokens"
REQUEST_SUCCESS = "trtllm_request_success"
SPEC_STATS = "specDecodingStats"
DP_RANK = "attentionDpRank"
SEQUENCE = "statsSequence"
DROPPED = "statsDroppedFrames"


def parse_prometheus(
    text: str, per_position: bool | None = None
) -> SpecCounters | None:
    """trtllm-serve's speculative counters in a Prometheus exposition, summed over labels
    other than the position (module doc).

    Args:
        text: the exposition.
        per_position: read the per-position counters (True) or the iteration counters
            (False); None: the per-position ones when they have samples. trtllm-serve
            declares both families from its start, with samples only once something
            counted, so a declared family without samples reads as zeros.

    Returns:
        The counts; None when the family to read is not even declared.

    Raises:
        ValueError: text that is not the Prometheus text format.
    """
    drafted: dict[int, float] = {}
    accepted: dict[int, float] = {}
    totals = {ITER_DRAFT_TOKENS: 0.0, ITER_ACCEPTED: 0.0}
    declared: set[str] = set()
    for family in text_string_to_metric_families(text):
        declared.add(family.name.removesuffix("_total"))
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            name = sample.name.removesuffix("_total")
            if name in (POS_DRAFTED, POS_ACCEPTED) and POSITION_LABEL in sample.labels:
                into = drafted if name == POS_DRAFTED else accepted
                j = int(sample.labels[POSITION_LABEL])
                into[j] = into.get(j, 0.0) + sample.value
            elif name in totals:
                totals[name] += sample.value
    if per_position is None:
        per_position = bool(drafted)
    if per_position:
        if POS_DRAFTED not in declared:
            return None
        k = max([*drafted, *accepted], default=-1) + 1
        per = tuple(accepted.get(j, 0.0) for j in range(k))
        return SpecCounters(
            drafted.get(0, 0.0), sum(drafted.values()), sum(per), per, TRTLLM_PROMETHEUS
        )
    if ITER_DRAFT_TOKENS not in declared:
        return None
    return SpecCounters(
        math.nan,
        totals[ITER_DRAFT_TOKENS],
        totals[ITER_ACCEPTED],
        (),
        TRTLLM_PROMETHEUS,
    )


def requests_counted(text: str) -> float | None:
    """How many finished requests trtllm-serve's per-request metrics have counted so far:
    Σ ``trtllm_request_success_total`` over its labels (``finished_reason``, …), which
    ``tensorrt_llm/metrics/collector.py`` increments when it logs a finished request's
    metrics, the per-position speculative counters included. A reader compares it with the
    requests its client finished to know whether the last ones are counted yet.

    Returns:
        The count; None when the family is not declared.

    Raises:
        ValueError: text that is not the Prometheus text format.
    """
    total, declared = 0.0, False
    for family in text_string_to_metric_families(text):
        if family.name.removesuffix("_total") != REQUEST_SUCCESS:
            continue
        declared = True
        total += sum(s.value for s in family.samples if not s.name.endswith("_created"))
    return total if declared else None


def iteration_entries(body: str) -> list[dict[str, Any]]:
    """The iteration stats of one ``GET /metrics`` body (a JSON list; an entry may itself be
    a JSON string, as the executor's ``getLatestIterationStats`` serialises them).

    Raises:
        ValueError: the body is not a JSON list of objects.
    """
    data = json.loads(body)
    if not isinstance(data, list):
        raise ValueError(
            f"expected a JSON list of iteration stats, got {type(data).__name__}"
        )
    out = []
    for entry in data:
        item = json.loads(entry) if isinstance(entry, str) else entry
        if not isinstance(item, dict):
            raise ValueError(f"an iteration stats entry is {type(item).__name__}")
        out.append(item)
    return out


def _count(stats: dict[str, Any], key: str) -> int:
    value = stats.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"{SPEC_STATS}.{key} is {value!r}, not a count")
    return int(value)


def _number(entry: dict[str, Any], key: str) -> int | None:
    value = entry.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class IterationTotals:
    """Running totals of drained iteration stats (module doc). ``lost``: rows found
    missing; ``evicted``: of those with ``statsSequence``, frames the executor's buffer
    says it evicted (``statsDroppedFrames``); ``sequenced``: whether rows carried the
    sequence."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    iterations: int = 0
    lost: int = 0
    last_iter: int | None = field(default=None)
    dp_copies: int = 0
    last_sequence: int | None = None
    last_dropped: int | None = None
    evicted: int = 0
    sequenced: bool = False

    def fresh(self) -> IterationTotals:
        """Zero totals that still know where the rows read so far ended (for a gap at the
        next read)."""
        return IterationTotals(
            last_iter=self.last_iter,
            last_sequence=self.last_sequence,
            last_dropped=self.last_dropped,
            sequenced=self.sequenced,
        )

    def _missing(self, entry: dict[str, Any]) -> int:
        """Rows missing before ``entry``: a gap in ``statsSequence`` where it has one, else
        in ``iter``; moves the marks on."""
        number, sequence = _number(entry, "iter"), _number(entry, SEQUENCE)
        gap = 0
        if sequence is not None:
            self.sequenced = True
            if self.last_sequence is not None and sequence > self.last_sequence + 1:
                gap = sequence - self.last_sequence - 1
            self.last_sequence = max(sequence, self.last_sequence or 0)
            dropped = _number(entry, DROPPED)
            if dropped is not None:
                if self.last_dropped is not None and dropped > self.last_dropped:
                    self.evicted += dropped - self.last_dropped
                self.last_dropped = max(dropped, self.last_dropped or 0)
        elif number is not None and self.last_iter is not None:
            gap = max(0, number - self.last_iter - 1)
        if number is not None:
            self.last_iter = number
        return gap

    def add(self, entries: Sequence[dict[str, Any]]) -> int:
        """Add one read's iterations; returns the rows found missing before them (a gap in
        ``statsSequence`` since the last one seen, or in ``iter`` for rows without it).

        With attention data parallelism trtllm-serve writes one row per rank and iteration,
        each with ``attentionDpRank``, and copies rank 0's ``specDecodingStats`` into the
        other ranks' rows (``tensorrt_llm/executor/iteration_stats.py``, TensorRT-LLM PR
        #13649): only rows of rank 0 (or without the key) count; the others are counted in
        :attr:`dp_copies` and skipped, iteration number and all.

        Raises:
            ValueError: a count that is not a non-negative number.
        """
        lost = 0
        for entry in entries:
            rank = entry.get(DP_RANK)
            if isinstance(rank, int) and not isinstance(rank, bool) and rank != 0:
                self.dp_copies += 1
                continue
            lost += self._missing(entry)
            self.iterations += 1
            spec = entry.get(SPEC_STATS)
            if not isinstance(spec, dict):
                continue
            self.drafts += _count(spec, "numRequestsWithDraftTokens")
            self.draft_tokens += _count(spec, "numDraftTokens")
            self.accepted += _count(spec, "numAcceptedTokens")
        self.lost += lost
        return lost

    def loss_cause(self, lost: int, evicted: int) -> str:
        """Where ``lost`` rows of one read went, for the log: exact where the rows carry
        ``statsSequence`` (``evicted`` of them by the executor's buffer), else the causes
        a gap in ``iter`` leaves open."""
        if self.sequenced:
            rest = lost - evicted
            out = f"counted by statsSequence: the executor's buffer evicted {evicted}"
            if rest > 0:
                out += (
                    f", and {rest} were read by another client of /metrics or overflowed "
                    "the server's read buffer"
                )
            return out + "; raise iter_stats_max_iterations, or read more often"
        return (
            "gaps in iter: the executor's queue overflowed, or the server's own "
            "collector took them (a revision with the collector loop but without the read "
            "buffer, before TensorRT-LLM PR #13405), or another client read them"
        )

    def counters(self) -> SpecCounters:
        """The totals so far as counters (the tier's counts are a difference of two)."""
        return SpecCounters(
            float(self.drafts),
            float(self.draft_tokens),
            float(self.accepted),
            (),
            TRTLLM_ITERATION_STATS,
            lost=self.lost,
        )
