"""trtllm-serve's per-request perf metrics, ``GET /perf_metrics`` (pure): parsed and summed.

The endpoint (NVIDIA/TensorRT-LLM PR #6985, August 2025; ``tensorrt_llm/serve/
openai_server.py``, ``get_perf_metrics`` and ``_extract_metrics``) answers a JSON list with
one entry per finished request::

    {"request_id": 7, "perf_metrics": {"first_iter": 12, "last_iter": 40,
        "timing_metrics": {...}, "kv_cache_metrics": {...},
        "speculative_decoding": {"acceptance_rate": 0.5,
            "total_accepted_draft_tokens": 8, "total_draft_tokens": 16}}}

(optionally ``ctx_request_id`` and ``time_breakdown_metrics`` beside ``perf_metrics``).
``speculative_decoding`` is there only when ``total_draft_tokens > 0``. It needs the LLM-API
options ``return_perf_metrics: true`` and ``perf_metrics_max_requests > 0`` (else the answer
is always ``[]``). The server keeps the entries in a ``deque(maxlen=perf_metrics_max_requests)``
and hands the whole deque to the reader, replacing it with an empty one: each entry is
returned once, and on overflow the oldest is dropped without a trace. ``request_id`` is the
executor's id, which the OpenAI stream does not carry, so the entries cannot be matched to
the client's requests one by one: they are summed per tier, and their number is compared with
the requests the client finished (:class:`PerfMetricsTotals`, ``SpecCounters.requests`` /
``reported``).

Caveats (docs/metrics.md): with the PyTorch backend's TorchSampler the counts came back
zero, so the key was absent, until TensorRT-LLM PR #17082; PR #16668 removed the endpoint in
favour of ``perf_metrics_output_dir`` JSONL files with the same entries. An entry without
``speculative_decoding`` therefore means 0 drafts only where the server is known to count
(an earlier entry had the key); otherwise its counts are unknown.

Figures: draft tokens and accepted draft tokens summed over the entries; the draft
acceptance rate follows. Verify steps are not in the entries, so the acceptance length and
per-position rates are not (``drafts`` is NaN).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trtbench.profiling.loadtest.records.spec_counters import (
    TRTLLM_PERF_METRICS,
    SpecCounters,
)

SPEC_KEY = "speculative_decoding"


def perf_metrics_entries(body: str) -> list[dict[str, Any]]:
    """The entries of one ``GET /perf_metrics`` body.

    Raises:
        ValueError: not JSON, not a list, or an entry that is not an object with a
            ``perf_metrics`` object.
    """
    data = json.loads(body)
    if not isinstance(data, list):
        raise ValueError(
            f"expected a JSON list of perf metrics, got {type(data).__name__}"
        )
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(
            entry.get("perf_metrics"), dict
        ):
            raise ValueError(
                f"a perf metrics entry without perf_metrics: {entry!r:.120}"
            )
    return data


def _count(spec: Mapping[str, Any], key: str) -> int:
    value = spec.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{SPEC_KEY}.{key} is {value!r}, not a count")
    return value


def entry_counts(entry: Mapping[str, Any]) -> tuple[int, int] | None:
    """(total draft tokens, total accepted draft tokens) of one entry; None without
    ``speculative_decoding``. Its ``acceptance_rate`` is not read (the totals define it).

    Raises:
        ValueError: a count that is not a non-negative integer, or accepted > drafted.
    """
    spec = entry["perf_metrics"].get(SPEC_KEY)
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ValueError(f"{SPEC_KEY} is {type(spec).__name__}, not an object")
    drafted = _count(spec, "total_draft_tokens")
    accepted = _count(spec, "total_accepted_draft_tokens")
    if accepted > drafted:
        raise ValueError(f"{SPEC_KEY}: {accepted} accepted of {drafted} drafted")
    return drafted, accepted


@dataclass
class PerfMetricsTotals:
    """Running totals of drained ``/perf_metrics`` entries (module doc).

    ``counts_known``: the server is known to count drafts (an entry had
    ``speculative_decoding``), so an entry without it is a request with 0 drafts;
    ``reported``: entries with known counts; ``unknown``: entries read before that was known.
    """

    counts_known: bool = False
    reported: int = 0
    unknown: int = 0
    draft_tokens: int = 0
    accepted: int = 0

    @property
    def seen(self) -> int:
        """Every entry read."""
        return self.reported + self.unknown

    def add(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Add one read's entries.

        Raises:
            ValueError: see :func:`entry_counts`.
        """
        counts = [entry_counts(e) for e in entries]  # all checked before any is added
        for c in counts:
            if c is None:
                if self.counts_known:
                    self.reported += 1
                else:
                    self.unknown += 1
                continue
            self.counts_known = True
            self.reported += 1
            self.draft_tokens += c[0]
            self.accepted += c[1]

    def counters(self, requests: int) -> SpecCounters:
        """The totals so far as counters, beside the ``requests`` the client finished; an
        entry of unknown counts is not ``reported``, so it leaves the count partial."""
        return SpecCounters(
            math.nan,
            float(self.draft_tokens),
            float(self.accepted),
            (),
            TRTLLM_PERF_METRICS,
            requests=requests,
            reported=self.reported,
        )
