"""Which speculative counters an OpenAI-compatible server keeps, and reading them per tier.

The load generator reads the server's counters right before and right after each tier pass
(``driver/tier_pass.py``); the difference is the pass's counts. Which counters, and how they
must be read, depends on the server (chosen once, by probing, :meth:`CounterReader.read`):

1. ``GET /metrics`` answering Prometheus text with vLLM's ``vllm:spec_decode_*`` counters:
   vLLM (``server_prometheus``, ``records/spec_counters.py``).
2. ``GET /prometheus/metrics`` with samples of trtllm-serve's per-position counters (they
   count finished requests when ``return_perf_metrics`` is on, so the load test's probe
   request creates them before the first tier): trtllm-serve's Prometheus
   (``trtllm_prometheus``, exact acceptance length and per-position rates). The server
   counts a request when it logs its metrics, which can be just after the client saw
   ``data: [DONE]``; every read therefore waits (at most :data:`PERF_GRACE_S`) until
   ``trtllm_request_success_total`` has counted every request the client finished since the
   first read, and warns when it has not.
3. ``GET /metrics`` answering a JSON list in which an iteration drafted: trtllm-serve's
   iteration stats (``trtllm_iteration_stats``). They are drained on every read, so the
   reader polls them every :data:`POLL_S` seconds in the background while the transport is
   open and keeps running totals; each read returns the totals, so before/after still differ
   by the tier's counts. Iterations lost to the server's bounded queue (a gap in ``iter``)
   are logged.
4. ``GET /perf_metrics`` answering a JSON list in which a request drafted: trtllm-serve's
   per-request entries (``trtllm_perf_metrics``,
   ``records/trtllm_perf_metrics.py``), drained and polled like the iteration stats. Every
   read first waits (at most :data:`PERF_GRACE_S`) until the server has an entry for each
   request the client finished (trtllm-serve queues a chat request's entry just after its
   ``data: [DONE]``); the counts carry both numbers, and a tier whose entries and requests
   differ (entries dropped by the bounded queue, or another client's) gets no figures.
5. ``GET /prometheus/metrics`` whose iteration counters counted drafts (the probe and
   warm-up requests drafted), or that has them while ``GET /metrics`` is no JSON list:
   the draft acceptance rate, no acceptance length (``trtllm_prometheus``, drafts unknown;
   kind ``trtllm-iteration-counters``).
6. ``GET /metrics`` answering a JSON list without a drafting iteration: the iteration stats
   all the same (a baseline's, or a server about to draft); ``[]`` (off, or emptied by the
   server's own Prometheus collector) is logged as a warning with the options to set.

**Which revision wrote them.** A counter's name outlives its meaning: the reader asks the
server its version (``GET /version``: trtllm-serve's and vLLM's ``{"version": ...}``) and
looks at what the server's output shows (rows with ``statsSequence``; iteration counters that
count, i.e. the server's own collector runs), and takes each source's meaning from the table
``records/counter_versions.py`` (docs/metrics.md): trtllm-serve's per-position counters are
read only where a later revision than TensorRT-LLM PR #17082 shows (before it they counted
the prefill step's dummy drafts), its iteration counters only where a revision whose
collector logs every stat shows (some log only the latest one); otherwise the reader logs
the reason and falls back. Iteration rows found missing (gaps in ``statsSequence``, else in
``iter``; before PR #13405 the server's own collector took rows ``GET /metrics`` never saw)
leave the passes that span them without figures.

The per-position Prometheus counters are preferred over everything else from trtllm-serve
because they are cumulative (nothing is lost between reads, and another reader cannot take
them away) and count verify steps (the acceptance length and per-position rates); the
iteration stats over the per-request entries because they count verify steps too; the
per-request entries over the iteration counters because the entries' loss is counted
exactly. SGLang (``/metrics`` with ``sglang:`` samples) is read from its responses
(``clients/sglang_spec.py``); its Prometheus gauges hold a recent window, not totals, and
are refused (kind ``sglang``, no counters). Nothing found: the server keeps no speculative
counters (or none trtbench reads), and tiers get none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

from trtbench.profiling.loadtest.records import counter_versions as versions
from trtbench.profiling.loadtest.records.spec_counters import (
    SpecCounters,
    parse_spec_counters,
)
from trtbench.profiling.loadtest.records.trtllm_counters import (
    SPEC_STATS,
    IterationTotals,
    iteration_entries,
    parse_prometheus,
    requests_counted,
)
from trtbench.profiling.loadtest.records.trtllm_perf_metrics import (
    PerfMetricsTotals,
    entry_counts,
    perf_metrics_entries,
)

log = logging.getLogger(__name__)

POLL_S = 0.5
TIMEOUT_S = 10.0
PERF_GRACE_S = 2.0
"""How long a read waits for the ``/perf_metrics`` entries of finished requests."""
PERF_SETTLE_S = 0.05
VLLM, TRTLLM_PROMETHEUS, TRTLLM_ITERATIONS, TRTLLM_ITERATION_COUNTERS, NONE = (
    "vllm",
    "trtllm-prometheus",
    "trtllm-iteration-stats",
    "trtllm-iteration-counters",
    "none",
)
TRTLLM_PERF, SGLANG = "trtllm-perf-metrics", "sglang"
SGLANG_GAUGE = "sglang:spec_accept_length"


def server_root(base_url: str) -> str:
    """``http://HOST:PORT`` of an OpenAI base URL (its path dropped)."""
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"


class CounterReader:
    """The speculative counters of one server, read with its own semantics (module doc).

    Args:
        client: an open HTTP client (the transport's health client).
        base_url: the server's OpenAI base URL (``http://HOST:PORT/v1``).
        finished: how many requests the client has finished so far (streams that ended
            with ``[DONE]``); what ``/perf_metrics`` entries are matched against.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        finished: Callable[[], int] | None = None,
    ) -> None:
        self.client = client
        self.root = server_root(base_url)
        self.kind: str | None = None
        self.version: str | None = None  # GET /version, where the server answers it
        self.markers: set[str] = set()  # what the probe saw (counter_versions markers)
        self.totals = IterationTotals()
        self.perf = PerfMetricsTotals()
        self._finished = finished or (lambda: 0)
        self._base = 0  # requests finished before the first tier (not matched)
        self._missing = 0  # requests without an entry, as last logged
        # (server's counted requests, client's finished requests) at the first read
        self._counted_base: tuple[float, int] | None = None
        self._poller: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def _get(self, path: str) -> httpx.Response | None:
        try:
            reply = await self.client.get(self.root + path, timeout=TIMEOUT_S)
        except httpx.HTTPError as exc:
            log.warning("cannot read %s%s (%s)", self.root, path, type(exc).__name__)
            return None
        return reply if reply.status_code == 200 else None

    async def _server_version(self) -> str | None:
        """``GET /version``'s ``version`` (trtllm-serve's ``OpenAIServer.version``, vLLM's
        ``show_version``); None where it does not answer one."""
        reply = await self._get("/version")
        with contextlib.suppress(ValueError, AttributeError):
            version = reply.json().get("version") if reply is not None else None
            return str(version) if version else None
        return None

    def _refused(self, row: versions.Semantics) -> bool:
        """Whether a source's meaning at this server's revision keeps trtbench from reading
        it; logs the reason when it does."""
        if row.read != versions.REFUSED:
            return False
        log.warning("%s: %s", self.root, versions.reason(row, self.version))
        return True

    async def _probe(self) -> str:
        self.version = await self._server_version()
        metrics = await self._get("/metrics")
        is_json = metrics is not None and metrics.text.lstrip().startswith("[")
        if metrics is not None and not is_json:
            with contextlib.suppress(ValueError):
                vllm = parse_spec_counters(metrics.text)
                if vllm is not None:
                    if vllm.draft_tokens > 0 and not vllm.drafts > 0:
                        self.markers.add(versions.NO_NUM_DRAFTS)
                    self._refused(
                        versions.semantics_for(
                            versions.VLLM_PROMETHEUS, self.version, self.markers
                        )
                    )
                    return VLLM
            if SGLANG_GAUGE in metrics.text:
                log.info(
                    "%s/metrics: SGLang's %s / sglang:spec_accept_rate are gauges over "
                    "the last decode_log_interval window, not totals: not read per tier "
                    "(its requests' spec_tokens_details are)",
                    self.root,
                    SGLANG_GAUGE,
                )
                return SGLANG
        drafted, iterations = False, 0
        if is_json:
            # what queued before the first tier (this read took it) is not a tier's; where
            # its rows ended is kept to see a gap at the next read
            with contextlib.suppress(ValueError):
                entries = iteration_entries(metrics.text)
                self.totals.add(entries)
                drafted = any(_drafted(e) for e in entries)
                iterations = len(entries)
            if self.totals.sequenced:
                self.markers.add(versions.STATS_SEQUENCE)
            self.totals = self.totals.fresh()
        text = await self._counted_prometheus() or ""
        counters = None
        with contextlib.suppress(ValueError):
            counters = parse_prometheus(text, per_position=False) if text else None
        if counters is not None and counters.draft_tokens > 0:
            self.markers.add(versions.COLLECTOR)
        with contextlib.suppress(ValueError):
            found = parse_prometheus(text) if text else None
            if found is not None and found.drafts > 0:  # per-position samples
                row = versions.semantics_for(
                    versions.PER_POSITION, self.version, self.markers
                )
                if not self._refused(row):
                    return TRTLLM_PROMETHEUS
        if drafted:
            return TRTLLM_ITERATIONS
        if await self._probe_perf():
            return TRTLLM_PERF
        if counters is not None and (counters.draft_tokens > 0 or not is_json):
            row = versions.semantics_for(
                versions.ITERATION_COUNTERS, self.version, self.markers
            )
            if not self._refused(row):
                return TRTLLM_ITERATION_COUNTERS
        if is_json:
            if iterations == 0:
                log.warning(
                    "%s/metrics answered [] after the probe and warm-up requests: "
                    "trtllm-serve keeps no iteration stats (enable_iter_perf_stats off) or "
                    "its own Prometheus collector drains them (return_perf_metrics on, "
                    "before TensorRT-LLM PR #13405; aibrix issue 2004); the tiers may get "
                    "no acceptance figures. Set llm_api_options: {enable_iter_perf_stats: "
                    "true, return_perf_metrics: false} (docs/metrics.md)",
                    self.root,
                )
            return TRTLLM_ITERATIONS
        return NONE

    async def _probe_perf(self) -> bool:
        """Whether ``/perf_metrics`` holds an entry that drafted (the load test's probe and
        warm-up requests have finished by now); its entries, and those of the requests
        still being queued, are not a tier's."""
        reply = await self._get("/perf_metrics")
        if reply is None:
            return False
        try:
            entries = perf_metrics_entries(reply.text)
            counted = [entry_counts(e) for e in entries]
        except ValueError as exc:
            log.warning("%s/perf_metrics: not perf metrics (%s)", self.root, exc)
            return False
        if not any(c is not None and c[0] > 0 for c in counted):
            if entries:
                log.info(
                    "%s/perf_metrics: %d requests, none with speculative_decoding (no "
                    "speculation, or a TorchSampler before TensorRT-LLM PR #17082): not read",
                    self.root,
                    len(entries),
                )
            return False
        self.perf = PerfMetricsTotals(counts_known=True)
        self.perf.add(entries)
        await self._perf_settled()
        self.perf = PerfMetricsTotals(counts_known=True)
        self._base = self._finished()
        return True

    async def _drain(self) -> bool:
        """One read of the iteration stats into the running totals; False when it failed."""
        async with self._lock:
            reply = await self._get("/metrics")
            if reply is None:
                return False
            try:
                copies, evicted = self.totals.dp_copies, self.totals.evicted
                lost = self.totals.add(iteration_entries(reply.text))
            except ValueError as exc:
                log.warning("%s/metrics: not iteration stats (%s)", self.root, exc)
                return False
            if lost:
                log.warning(
                    "trtllm-serve lost %d iteration stats between two reads of "
                    "%s/metrics (%s): the tiers that span them get no acceptance figures",
                    lost,
                    self.root,
                    self.totals.loss_cause(lost, self.totals.evicted - evicted),
                )
            if copies == 0 and self.totals.dp_copies:
                log.info(
                    "%s/metrics: attention data parallelism (rows of attentionDpRank > 0 "
                    "repeat rank 0's speculative stats): rank 0's rows only are counted",
                    self.root,
                )
            return True

    async def _drain_perf(self) -> bool:
        """One read of ``/perf_metrics`` into the running totals; False when it failed."""
        async with self._lock:
            reply = await self._get("/perf_metrics")
            if reply is None:
                return False
            try:
                self.perf.add(perf_metrics_entries(reply.text))
            except ValueError as exc:
                log.warning("%s/perf_metrics: not perf metrics (%s)", self.root, exc)
                return False
            return True

    async def _perf_settled(self) -> bool:
        """Drain ``/perf_metrics`` until it has given an entry for every request finished
        since the first tier, or :data:`PERF_GRACE_S` passed; False when a read failed."""
        deadline = time.monotonic() + PERF_GRACE_S
        while True:
            if not await self._drain_perf():
                return False
            want = self._finished() - self._base
            if self.perf.seen >= want or time.monotonic() >= deadline:
                return True
            await asyncio.sleep(PERF_SETTLE_S)

    async def _read_perf(self) -> SpecCounters | None:
        if not await self._perf_settled():
            return None
        requests = self._finished() - self._base
        counts = self.perf.counters(requests)
        if counts.unmatched_requests > self._missing:
            log.warning(
                "%s/perf_metrics has no entry for %d of %d finished requests (dropped by "
                "its queue of perf_metrics_max_requests, or read by another client): the "
                "tiers that miss them get no acceptance figures",
                self.root,
                counts.unmatched_requests,
                requests,
            )
        self._missing = max(self._missing, counts.unmatched_requests)
        return counts

    async def _counted_prometheus(self) -> str | None:
        """``/prometheus/metrics`` once its per-request counters include every request the
        client finished (module doc, 2.), or after :data:`PERF_GRACE_S`; None when a read
        failed. Without ``trtllm_request_success_total`` (not declared) the first read."""
        deadline = time.monotonic() + PERF_GRACE_S
        while True:
            reply = await self._get("/prometheus/metrics")
            if reply is None:
                return None
            try:
                counted = requests_counted(reply.text)
            except ValueError:
                return reply.text  # _parsed reports it
            finished = self._finished()
            if counted is None:
                return reply.text
            base_counted, base_finished = self._counted_base or (0.0, 0)
            short = (finished - base_finished) - (counted - base_counted)
            if short <= 0 or time.monotonic() >= deadline:
                if short > 0:
                    log.warning(
                        "%s/prometheus/metrics has counted %d fewer finished requests "
                        "than the client after %.1f s: the tier's counts may miss them",
                        self.root,
                        int(short),
                        PERF_GRACE_S,
                    )
                if self._counted_base is None:
                    self._counted_base = (counted, finished)
                return reply.text
            await asyncio.sleep(PERF_SETTLE_S)

    async def _poll(self) -> None:
        drain = self._drain_perf if self.kind == TRTLLM_PERF else self._drain
        while True:
            await asyncio.sleep(POLL_S)
            await drain()

    async def read(self) -> SpecCounters | None:
        """The counters now (cumulative); None when the server keeps none or a read failed."""
        if self.kind is None:
            self.kind = await self._probe()
            log.info(
                "speculative counters of %s: %s (server version %s)",
                self.root,
                self.kind,
                self.version or "not reported",
            )
            if self.kind in (TRTLLM_ITERATIONS, TRTLLM_PERF):
                self._poller = asyncio.create_task(self._poll())
        if self.kind == VLLM:
            reply = await self._get("/metrics")
            return None if reply is None else _parsed(parse_spec_counters, reply.text)
        if self.kind in (TRTLLM_PROMETHEUS, TRTLLM_ITERATION_COUNTERS):
            per_position = self.kind == TRTLLM_PROMETHEUS
            text = await self._counted_prometheus()
            if text is None:
                return None
            return _parsed(lambda t: parse_prometheus(t, per_position), text)
        if self.kind == TRTLLM_ITERATIONS:
            return self.totals.counters() if await self._drain() else None
        if self.kind == TRTLLM_PERF:
            return await self._read_perf()
        return None

    async def close(self) -> None:
        """Stop polling (idempotent)."""
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None


def _drafted(entry: dict) -> bool:
    """Whether one iteration stats entry proposed drafts."""
    spec = entry.get(SPEC_STATS)
    return isinstance(spec, dict) and bool(spec.get("numDraftTokens"))


def _parsed(
    parse: Callable[[str], SpecCounters | None], text: str
) -> SpecCounters | None:
    try:
        return parse(text)
    except ValueError as exc:
        log.warning("speculative counters unreadable (%s)", exc)
        return None
