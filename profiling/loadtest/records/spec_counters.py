"""Speculative-decoding counts from a server's own counters (pure): the counts, vLLM's names.

vLLM (``v1/spec_decode/metrics.py``, 0.32) exports, summed over its engines here:
``vllm:spec_decode_num_drafts`` (verify steps that proposed drafts),
``vllm:spec_decode_num_draft_tokens`` (proposed draft tokens),
``vllm:spec_decode_num_accepted_tokens`` (accepted draft tokens) and
``vllm:spec_decode_num_accepted_tokens_per_pos{position="j"}`` (0-based draft position j:
steps that accepted the draft at j). A tier's counts are the difference of two scrapes
(before and after the tier). Figures, vLLM's definitions (``spec_decode/metrics.py``):
acceptance length = 1 + accepted / drafts; draft acceptance rate = accepted / draft tokens;
acceptance rate at position j (1-based here) = accepted_per_pos[j − 1] / drafts.

Scraped around each tier and turned into summary/acceptance rows by
:mod:`~trtbench.profiling.loadtest.clients.server_counts` (``spec_decode_counts_source`` =
``server_prometheus`` for vLLM's; other servers' counters name their own source,
:mod:`~trtbench.profiling.loadtest.records.trtllm_counters`). Where a server does not count
verify steps (TensorRT-LLM's iteration counters in Prometheus), ``drafts`` is NaN: the draft
acceptance rate is known, the acceptance length and per-position rates are not.

Counts a server keeps per finished request in a queue the reader drains (trtllm-serve's
``GET /perf_metrics``, :mod:`~trtbench.profiling.loadtest.records.trtllm_perf_metrics`) also
carry ``requests`` (requests the client finished) and ``reported`` (the server's entries read
for them): a pass whose entries do not match its requests one for one (entries lost to the
server's bounded queue, or another client's counted) is a partial count, and
:meth:`SpecCounters.figures` refuses it rather than print it as the tier's. Counts a reader
drains row by row (trtllm-serve's iteration stats) carry ``lost``, the rows the reader found
missing (gaps in ``statsSequence`` or ``iter``): a pass that lost any is refused the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

SERVER_PROMETHEUS = "server_prometheus"  # vLLM's Prometheus counters, GET /metrics
TRTLLM_PROMETHEUS = "trtllm_prometheus"  # trtllm-serve, GET /prometheus/metrics
TRTLLM_ITERATION_STATS = "trtllm_iteration_stats"  # trtllm-serve, GET /metrics (JSON)
TRTLLM_PERF_METRICS = "trtllm_perf_metrics"  # trtllm-serve, GET /perf_metrics (JSON)
SERVER_COUNTER_SOURCES = (
    SERVER_PROMETHEUS,
    TRTLLM_PROMETHEUS,
    TRTLLM_ITERATION_STATS,
    TRTLLM_PERF_METRICS,
)
"""Sources of counts a server keeps over a tier (not per response): filled in after it."""
DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


@dataclass(frozen=True)
class SpecCounters:
    """Counter values (or a tier's deltas): drafts (verify steps that proposed drafts; NaN
    where the server does not count them), draft tokens, accepted tokens, accepted tokens per
    0-based draft position, and where they come from (``spec_decode_counts_source``).
    ``requests`` / ``reported``: for per-request sources, the requests the client finished
    and the server's entries read for them; ``lost``: for drained per-iteration sources,
    the iterations found missing (None elsewhere; module doc)."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_pos: tuple[float, ...]
    source: str = SERVER_PROMETHEUS
    requests: int | None = None
    reported: int | None = None
    lost: int | None = None

    @property
    def unmatched_requests(self) -> int:
        """Requests without a server entry (positive) or entries without a request of the
        client's (negative); 0 where they match or the source is not per request."""
        if self.requests is None or self.reported is None:
            return 0
        return self.requests - self.reported

    def minus(self, before: SpecCounters) -> SpecCounters:
        """The counts between two scrapes (``self`` after ``before``)."""
        n = max(len(self.accepted_per_pos), len(before.accepted_per_pos))
        pad = lambda v: list(v) + [0.0] * (n - len(v))  # noqa: E731
        per = [
            a - b
            for a, b in zip(
                pad(self.accepted_per_pos), pad(before.accepted_per_pos), strict=True
            )
        ]
        return SpecCounters(
            self.drafts - before.drafts,
            self.draft_tokens - before.draft_tokens,
            self.accepted - before.accepted,
            tuple(per),
            self.source,
            _combine(self.requests, before.requests, -1),
            _combine(self.reported, before.reported, -1),
            _combine(self.lost, before.lost, -1),
        )

    def plus(self, other: SpecCounters) -> SpecCounters:
        """The counts of two tier passes together (per-position lists padded with 0)."""
        n = max(len(self.accepted_per_pos), len(other.accepted_per_pos))
        pad = lambda v: list(v) + [0.0] * (n - len(v))  # noqa: E731
        per = (
            a + b
            for a, b in zip(
                pad(self.accepted_per_pos), pad(other.accepted_per_pos), strict=True
            )
        )
        return SpecCounters(
            self.drafts + other.drafts,
            self.draft_tokens + other.draft_tokens,
            self.accepted + other.accepted,
            tuple(per),
            self.source,
            _combine(self.requests, other.requests, 1),
            _combine(self.reported, other.reported, 1),
            _combine(self.lost, other.lost, 1),
        )

    def as_json(self) -> dict[str, object]:
        """The counts as plain JSON (run.json)."""
        out: dict[str, object] = {
            "drafts": self.drafts,
            "draft_tokens": self.draft_tokens,
            "accepted": self.accepted,
            "accepted_per_pos": list(self.accepted_per_pos),
            "source": self.source,
        }
        if self.requests is not None:
            out |= {"requests": self.requests, "reported": self.reported}
        if self.lost is not None:
            out["lost"] = self.lost
        return out

    def figures(self) -> dict[str, float]:
        """acceptance_length_tokens, draft_acceptance_rate_ratio, accepted_drafts_per_step_tokens
        and acceptance_rate_pos<j> (j = 1..K); empty when no draft was proposed, and when
        the per-request entries do not match the requests or rows were lost (a partial
        count)."""
        if self.unmatched_requests or self.lost:
            return {}
        steps_unknown = math.isnan(self.drafts)
        if not (self.drafts > 0 or (steps_unknown and self.draft_tokens > 0)):
            return {}
        out = {
            "acceptance_length_tokens": 1.0 + self.accepted / self.drafts,
            "draft_acceptance_rate_ratio": self.accepted / self.draft_tokens
            if self.draft_tokens > 0
            else float("nan"),
            "accepted_drafts_per_step_tokens": self.accepted / self.drafts,
        }
        for j, a in enumerate(self.accepted_per_pos, start=1):
            out[f"acceptance_rate_pos{j}"] = a / self.drafts
        return out


def _combine(a: int | None, b: int | None, sign: int) -> int | None:
    return None if a is None or b is None else a + sign * b


def parse_spec_counters(text: str) -> SpecCounters | None:
    """vLLM's speculative counters in a Prometheus text exposition, summed over labels other
    than ``position`` (engines, models); None when the server exports none (no speculation).

    Raises:
        ValueError: text that is not the Prometheus text format.
    """
    sums = {DRAFTS: 0.0, DRAFT_TOKENS: 0.0, ACCEPTED: 0.0}
    per: dict[int, float] = {}
    seen = False
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name.removesuffix("_total")
            if name in sums and not sample.name.endswith("_created"):
                sums[name] += sample.value
                seen = True
            elif name == PER_POS and "position" in sample.labels:
                j = int(sample.labels["position"])
                per[j] = per.get(j, 0.0) + sample.value
    if not seen:
        return None
    positions = tuple(per.get(j, 0.0) for j in range(max(per) + 1)) if per else ()
    return SpecCounters(sums[DRAFTS], sums[DRAFT_TOKENS], sums[ACCEPTED], positions)
