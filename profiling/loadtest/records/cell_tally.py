"""A record sink that passes every record on and keeps, per (tier, round), what the output
token throughput of that pass needs: the successful requests' output tokens, the first send
and the last end. Memory: three numbers per cell, whatever the number of requests.

The figure is the one summary.csv and rounds.csv give a pass (``profiling/loadtest/stats/
metrics.py``: Σ output tokens of the successful requests / (max end − min send), AIPerf's
duration), before any ``loadtest.warmup_s`` window: what a run with ``rounds: auto`` races on
between rounds (the report decides again from rounds.csv).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trtbench.core.records import OutputRecord, RequestRecord, ResponseRecord
from trtbench.profiling.loadtest.records.record_sink import RecordSink


@dataclass
class _Cell:
    tokens: int = 0
    first_sent_ns: int | None = None
    last_end_ns: int | None = None


class CellTally:
    """Wraps ``sink`` (a :class:`RecordSink`): records go on to it unchanged."""

    def __init__(self, sink: RecordSink):
        self.sink = sink
        self._cells: dict[tuple[str, int], _Cell] = {}

    def add(
        self,
        request: RequestRecord,
        responses: Sequence[ResponseRecord],
        output: OutputRecord | None = None,
    ) -> None:
        """Tally ``request`` and pass the records on."""
        cell = self._cells.setdefault((request.tier, int(request.repeat)), _Cell())
        if cell.first_sent_ns is None or request.sent_ns < cell.first_sent_ns:
            cell.first_sent_ns = request.sent_ns
        if cell.last_end_ns is None or request.end_ns > cell.last_end_ns:
            cell.last_end_ns = request.end_ns
        if request.error is None:
            cell.tokens += int(request.output_tokens)
        self.sink.add(request, responses, output)

    def tokens_per_s(self, tier: str, repeat: int) -> float | None:
        """Output tokens/s of the pass (None: no request, or no time between its first
        send and its last end)."""
        cell = self._cells.get((tier, repeat))
        if cell is None or cell.first_sent_ns is None or cell.last_end_ns is None:
            return None
        span = cell.last_end_ns - cell.first_sent_ns
        return cell.tokens / (span / 1e9) if span > 0 else None
