"""Where the time before the server goes: slot wait, the client's own lag, the wire.

Per request (all ``perf_counter_ns`` of the client, research/loadtest.md §1.9, §1.12, §2):

- ``client_queue_time`` = ready − scheduled: waiting for a ``--max-concurrency`` slot
  (vLLM's ``client_queue_time``); 0 without a cap and in a closed loop.
- ``dispatch_lag`` = sent − ready: the client's own delay between a request being due
  and handing it to gRPC (loop wake-up, building the request); without a cap sent −
  scheduled.
- ``time_to_first_token_with_queue`` = first token − scheduled and
  ``request_latency_with_queue`` = last token − scheduled: latency from the intended
  send time, so a client that falls behind (or a full cap) shows up in the latency
  instead of being left out (coordinated omission; vLLM's queue-inclusive E2EL).
- ``client_to_server_delay`` = server arrival − sent, where the server reports its arrival
  time: ``arrival_time_ns`` of the reference model (first response) or of TensorRT-LLM's
  perf metrics (final response, ``return_perf_metrics``), epoch ns
  (``time.time_ns()``, CLOCK_REALTIME). It is moved onto the client's timeline with the
  offset ``time_ns() − perf_counter_ns()`` measured when the client starts, which holds
  when server and client share a machine (or synced clocks; an NTP step in between shows
  up as a wrong delay). TensorRT-LLM reports steady-clock ns instead, which on Linux is
  already the client's clock (:func:`server_ns_to_client` tells the two apart).
- ``server_queue_time`` = server first scheduled − server arrival and
  ``server_prefill_time`` = server first token − first scheduled, from TensorRT-LLM's
  perf metrics (``first_scheduled_time_ns``, ``first_token_time_ns``): both are
  differences of server readings, so no clock offset enters them. With
  ``client_to_server_delay`` they split TTFT into client → server + server queue + prefill
  + the first response's way back (the rest).

Files written before a column existed read back without it: ready = scheduled, no
server arrival.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.data_files import read_csv_checked
from trtbench.profiling.loadtest.outcome import LoadResult

WARN_MS = 5.0
WARN_TTFT_FRACTION = 0.05
LOOP_LAG_COLUMNS = ("event_loop_lag_p99_ms", "event_loop_lag_max_ms")


def wall_minus_perf_ns(samples: int = 5) -> int:
    """``time.time_ns() − time.perf_counter_ns()`` now, from the tightest of ``samples``
    brackets (perf, wall, perf): add it to a perf_counter reading to get epoch ns."""
    best: tuple[int, int] | None = None
    for _ in range(samples):
        a = time.perf_counter_ns()
        wall = time.time_ns()
        b = time.perf_counter_ns()
        if best is None or b - a < best[0]:
            best = (b - a, wall - (a + b) // 2)
    assert best is not None
    return best[1]


def server_ns_to_client(
    server_ns: int | None, clock_offset_ns: int | None, sent_ns: int
) -> int | None:
    """A server-reported time (ns) on the client's ``perf_counter_ns`` clock.

    Servers report in one of two clocks: epoch ns (``time.time_ns()``: trtbench's reference
    and BLS models) or steady-clock ns (TensorRT-LLM's ``RequestPerfMetrics::TimePoint`` is
    ``std::chrono::steady_clock``, ``cpp/include/tensorrt_llm/executor/types.h``; the
    llmapi model sends ``pd.Timedelta(...).value`` of it). On Linux the steady clock is
    CLOCK_MONOTONIC, the clock of Python's ``perf_counter_ns`` too, shared by every process
    on the machine. The two readings differ by decades, so the one nearer the request's
    ``sent_ns`` is the right one: ``server_ns − clock_offset_ns`` (epoch) or ``server_ns``
    itself (monotonic).

    Args:
        server_ns: the server's value (None or ≤ 0: not reported).
        clock_offset_ns: ``time_ns() − perf_counter_ns()`` of the client
            (:func:`wall_minus_perf_ns`); None: not recorded, the result is None.
        sent_ns: when the request was sent (``perf_counter_ns``).
    """
    if server_ns is None or server_ns <= 0 or clock_offset_ns is None:
        return None
    epoch = server_ns - clock_offset_ns
    return epoch if abs(epoch - sent_ns) <= abs(server_ns - sent_ns) else server_ns


def _col(r: pd.DataFrame, name: str) -> pd.Series:
    if name not in r:
        return pd.Series(np.nan, index=r.index)
    return r[name].astype(float)


def timing_columns(r: pd.DataFrame) -> dict[str, pd.Series]:
    """Per-request queue / lag / delay columns (ms) of request records ``r``.

    Returns:
        ``client_queue_time_ms``, ``dispatch_lag_ms``, ``time_to_first_token_with_queue_ms``,
        ``request_latency_with_queue_ms``, ``client_to_server_delay_ms`` (NaN without a
        server arrival), ``server_queue_time_ms`` (server first scheduled − arrival) and
        ``server_prefill_time_ms`` (server first token − first scheduled; NaN where the
        server reports no such times), each indexed like ``r``.
    """
    scheduled, sent = _col(r, "scheduled_ns"), _col(r, "sent_ns")
    ready = _col(r, "ready_ns").fillna(scheduled)
    arrival, scheduled_server = (
        _col(r, "server_arrival_ns"),
        _col(r, "server_scheduled_ns"),
    )
    return {
        "client_queue_time_ms": (ready - scheduled) / 1e6,
        "dispatch_lag_ms": (sent - ready) / 1e6,
        "time_to_first_token_with_queue_ms": (_col(r, "first_token_ns") - scheduled)
        / 1e6,
        "request_latency_with_queue_ms": (_col(r, "last_token_ns") - scheduled) / 1e6,
        "client_to_server_delay_ms": (arrival - sent) / 1e6,
        "server_queue_time_ms": (scheduled_server - arrival) / 1e6,
        "server_prefill_time_ms": (_col(r, "server_first_token_ns") - scheduled_server)
        / 1e6,
    }


def _dispatch_limit_ms(ttft_p50_ms: float) -> float:
    """The smaller of 5 ms and 5 % of TTFT p50 (5 ms when TTFT is unknown): client lag that
    large moves TTFT by 5 % or more."""
    if np.isnan(ttft_p50_ms):
        return WARN_MS
    return min(WARN_MS, WARN_TTFT_FRACTION * ttft_p50_ms)


def _arrival_limit_ms(ttft_p50_ms: float) -> float:
    """The larger of 5 ms and 5 % of TTFT p50: send → model arrival includes the server's
    own hand-off, so only a delay that is material on both counts is worth a line."""
    if np.isnan(ttft_p50_ms):
        return WARN_MS
    return max(WARN_MS, WARN_TTFT_FRACTION * ttft_p50_ms)


_CHECKS = (
    ("dispatch_lag_p99_ms", _dispatch_limit_ms,
     "p99 dispatch lag (sent − ready) over 5 ms or 5 % of TTFT p50",
     "the client was late sending due requests; lower the load per client process "
     "(--workers N)"),
    ("client_to_server_delay_p99_ms", _arrival_limit_ms,
     "p99 send → model arrival over 5 ms and 5 % of TTFT p50",
     "time in the network, Triton's queue and the hand-off to the model before it saw the "
     "request (the model stamps arrival_time_ns): server-side waiting inside TTFT, not "
     "client lag"),
    ("event_loop_lag_p99_ms", lambda ttft: WARN_MS,
     "p99 event-loop lag of the client over 5 ms",
     "its send and receive stamps are late by as much; use --workers N, or give the client "
     "CPU the server does not take (its own cores: taskset; a higher priority: nice -n -10)"),
)  # fmt: skip


def client_warnings(
    summary: pd.DataFrame, variants: set[str] | None = None
) -> list[str]:
    """One line per variant and check, naming the complete tiers that fail it.

    Checks (p99 per tier): dispatch lag over min(5 ms, 5 % of TTFT p50) — the client's own
    lag; send → model arrival (``client_to_server_delay``) over max(5 ms, 5 % of TTFT p50)
    — the model's arrival stamp includes Triton's queue, so only a material delay is named,
    and as server-side waiting; event-loop lag over 5 ms. Tiers that are not ``complete``
    are not measurements and are skipped. ``summary``: summary.csv rows (columns it lacks
    are skipped); ``variants``: only these (None: all).
    """
    out: list[str] = []
    if variants is not None and "variant" in summary:
        summary = summary[summary["variant"].astype(str).isin(variants)]
    rows = [
        r for r in summary.to_dict("records")
        if str(r.get("tier_status") or "complete") in ("complete", "nan")
    ]  # fmt: skip
    variants_seen = list(dict.fromkeys(str(r["variant"]) for r in rows))
    for column, limit_of, what, why in _CHECKS:
        for variant in variants_seen:
            hits = []
            for r in rows:
                if str(r["variant"]) != variant:
                    continue
                value = float(r.get(column, np.nan))
                limit = limit_of(float(r.get("time_to_first_token_p50_ms", np.nan)))
                if value > limit:
                    hits.append(f"{r['tier']} {value:.2f} ms > {limit:.2f}")
            if hits:
                out.append(f"{variant}: {what} at {', '.join(hits)}: {why}")
    return out


TierKey = tuple[str, str]


def tier_loop_lags(
    results: Mapping[str, LoadResult],
) -> dict[TierKey, tuple[float, float]]:
    """(variant, tier) → (event-loop lag p99 ms, max ms); the largest over a tier's passes."""
    out: dict[TierKey, tuple[float, float]] = {}
    for variant, result in results.items():
        for t in result.tiers:
            if t.loop_lag is None:
                continue
            p99, top = out.get((variant, t.tier), (0.0, 0.0))
            out[(variant, t.tier)] = (
                max(p99, t.loop_lag.p99_ms),
                max(top, t.loop_lag.max_ms),
            )
    return out


def add_loop_lag(
    summary: pd.DataFrame,
    lags: Mapping[TierKey, tuple[float, float]],
    old_summary: Path | None = None,
) -> pd.DataFrame:
    """``summary`` with :data:`LOOP_LAG_COLUMNS` from ``lags`` and, for the tiers not in
    ``lags``, from the earlier ``old_summary`` file where it has them. Rows without a value
    stay NaN.

    Raises:
        DataFileError: ``old_summary`` exists but is damaged.
    """
    out = summary.copy()
    if "variant" not in out:
        return out
    values: dict[TierKey, tuple[float, float]] = {}
    if old_summary is not None and old_summary.is_file():
        old = read_csv_checked(
            old_summary,
            fix="re-run `trtbench loadtest` for its variants, or delete the file",
            keys=("variant", "tier"),
        )
        if set(LOOP_LAG_COLUMNS) <= set(old.columns):
            rows = old[["variant", "tier", *LOOP_LAG_COLUMNS]].itertuples(index=False)
            values = {(str(r[0]), str(r[1])): (r[2], r[3]) for r in rows}
    values.update(lags)
    keys = list(zip(out["variant"].astype(str), out["tier"].astype(str), strict=True))
    for i, column in enumerate(LOOP_LAG_COLUMNS):
        out[column] = [float(values[k][i]) if k in values else np.nan for k in keys]
    return out
