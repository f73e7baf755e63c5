"""Which speculative counters an OpenAI-compatible server keeps, and reading them per tier.

The load generator reads the server's counters right before and right after each tier pass
(``driver/tier_pass.py``); the difference is the pass's counts. Which counters, and how they
must be read, depends on the server (chosen once, by probing, :meth:`CounterReader.read`):

1. ``GET /metrics`` answering Prometheus text with vLLM's ``vllm:spec_decode_*`` counters:
   vLLM (``server_prometheus``, ``records/spec_counters.py``).
2. ``GET /prometheus/metrics`` with samples of trtllm-serve's per-position counters (they
   count finished requests when ``return_perf_metrics`` is on, so the load test's probe
   request creates them before the first tier): trtllm-serve's Prometheus
   (``trtllm_prometheus``, exact acceptance length and per-position rates).
3. ``GET /metrics`` answering a JSON list: trtllm-serve's iteration stats
   (``trtllm_iteration_stats``). They are drained on every read, so the reader polls them
   every :data:`POLL_S` seconds in the background while the transport is open and keeps
   running totals; each read returns the totals, so before/after still differ by the tier's
   counts. Iterations lost to the server's bounded queue (a gap in ``iter``) are logged.
4. ``GET /prometheus/metrics`` with only trtllm-serve's iteration counters: the draft
   acceptance rate, no acceptance length (``trtllm_prometheus``, drafts unknown; kind
   ``trtllm-iteration-counters``).

The per-position Prometheus counters are preferred over the iteration stats because they are
cumulative (nothing is lost between reads, and another reader cannot take them away); the
iteration stats over the iteration counters because they count verify steps. Nothing found:
the server keeps no speculative counters (or none trtbench reads), and tiers get none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

from trtbench.profiling.loadtest.records.spec_counters import (
    SpecCounters,
    parse_spec_counters,
)
from trtbench.profiling.loadtest.records.trtllm_counters import (
    IterationTotals,
    iteration_entries,
    parse_prometheus,
)

log = logging.getLogger(__name__)

POLL_S = 0.5
TIMEOUT_S = 10.0
VLLM, TRTLLM_PROMETHEUS, TRTLLM_ITERATIONS, TRTLLM_ITERATION_COUNTERS, NONE = (
    "vllm",
    "trtllm-prometheus",
    "trtllm-iteration-stats",
    "trtllm-iteration-counters",
    "none",
)


def server_root(base_url: str) -> str:
    """``http://HOST:PORT`` of an OpenAI base URL (its path dropped)."""
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"


class CounterReader:
    """The speculative counters of one server, read with its own semantics (module doc).

    Args:
        client: an open HTTP client (the transport's health client).
        base_url: the server's OpenAI base URL (``http://HOST:PORT/v1``).
    """

    def __init__(self, client: httpx.AsyncClient, base_url: str) -> None:
        self.client = client
        self.root = server_root(base_url)
        self.kind: str | None = None
        self.totals = IterationTotals()
        self._poller: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def _get(self, path: str) -> httpx.Response | None:
        try:
            reply = await self.client.get(self.root + path, timeout=TIMEOUT_S)
        except httpx.HTTPError as exc:
            log.warning("cannot read %s%s (%s)", self.root, path, type(exc).__name__)
            return None
        return reply if reply.status_code == 200 else None

    async def _probe(self) -> str:
        metrics = await self._get("/metrics")
        is_json = metrics is not None and metrics.text.lstrip().startswith("[")
        if metrics is not None and not is_json:
            with contextlib.suppress(ValueError):
                if parse_spec_counters(metrics.text) is not None:
                    return VLLM
        prometheus = await self._get("/prometheus/metrics")
        text = "" if prometheus is None else prometheus.text
        with contextlib.suppress(ValueError):
            found = parse_prometheus(text) if text else None
            if found is not None and found.drafts > 0:  # per-position samples
                return TRTLLM_PROMETHEUS
        if is_json:
            # what queued before the first tier (this read took it) is not a tier's; its
            # last iteration number is kept to see a gap at the next read
            with contextlib.suppress(ValueError):
                self.totals.add(iteration_entries(metrics.text))
            self.totals = IterationTotals(last_iter=self.totals.last_iter)
            return TRTLLM_ITERATIONS
        with contextlib.suppress(ValueError):
            if text and parse_prometheus(text, per_position=False) is not None:
                return TRTLLM_ITERATION_COUNTERS
        return NONE

    async def _drain(self) -> bool:
        """One read of the iteration stats into the running totals; False when it failed."""
        async with self._lock:
            reply = await self._get("/metrics")
            if reply is None:
                return False
            try:
                lost = self.totals.add(iteration_entries(reply.text))
            except ValueError as exc:
                log.warning("%s/metrics: not iteration stats (%s)", self.root, exc)
                return False
            if lost:
                log.warning(
                    "trtllm-serve dropped %d iteration stats between two reads of "
                    "%s/metrics (its queue overflowed): the tier's counts miss them",
                    lost,
                    self.root,
                )
            return True

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            await self._drain()

    async def read(self) -> SpecCounters | None:
        """The counters now (cumulative); None when the server keeps none or a read failed."""
        if self.kind is None:
            self.kind = await self._probe()
            log.info("speculative counters of %s: %s", self.root, self.kind)
            if self.kind == TRTLLM_ITERATIONS:
                self._poller = asyncio.create_task(self._poll())
        if self.kind == VLLM:
            reply = await self._get("/metrics")
            return None if reply is None else _parsed(parse_spec_counters, reply.text)
        if self.kind in (TRTLLM_PROMETHEUS, TRTLLM_ITERATION_COUNTERS):
            per_position = self.kind == TRTLLM_PROMETHEUS
            reply = await self._get("/prometheus/metrics")
            if reply is None:
                return None
            return _parsed(
                lambda text: parse_prometheus(text, per_position), reply.text
            )
        if self.kind == TRTLLM_ITERATIONS:
            return self.totals.counters() if await self._drain() else None
        return None

    async def close(self) -> None:
        """Stop polling (idempotent)."""
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None


def _parsed(
    parse: Callable[[str], SpecCounters | None], text: str
) -> SpecCounters | None:
    try:
        return parse(text)
    except ValueError as exc:
        log.warning("speculative counters unreadable (%s)", exc)
        return None
