"""Where the time before the server goes: slot wait, the client's own lag, the wire.

Per request (all ``perf_counter_ns`` of the client; the queue terms as in ``vllm bench serve``,
the server's timestamps from triton-inference-server/tensorrtllm_backend
``docs/model_config.md``):

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

:func:`client_warnings` names a delay only when its typical (p50) size could move a
reported p50 (TTFT, ITL) by more than that figure's own uncertainty; send → model arrival
only when it is most of TTFT, as server-side waiting.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.core.data_files import read_csv_checked
from trtbench.profiling.loadtest.records.outcome import LoadResult

UNCERTAINTY_FLOOR = 0.10
"""The least uncertainty granted a p50 (a share of it): where the summary has no interval
(one pass) or one narrower than this. Three passes give an interval whose width is itself
rough (a standard deviation from 3 values, 2 degrees of freedom), so a narrow one is often
luck; in two runs of the bundled demo TTFT p50's half-width was 10 % or more in 85 % and
95 % of the tiers (median about 25 %): a shift below 10 % is within what passes already
wobble by."""
ARRIVAL_SHARE = 0.5
"""send → model arrival (server-side) is named when its median passes this share of TTFT
p50: most of the TTFT is then spent before the model sees the request."""
TIMER_ROUNDING_MS = 1.0
"""How late an idle loop's timer wakes are: asyncio's epoll wait rounds its timeout up to
whole milliseconds (``loop_lag`` module). A receive stamp is woken by the socket, not a
timer, and never sees it: only the sampler's lag beyond this is the loop being busy."""
LOOP_LAG_COLUMNS = (
    "event_loop_lag_p50_ms",
    "event_loop_lag_p99_ms",
    "event_loop_lag_max_ms",
)


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


def p50_tolerance_ms(
    p50_ms: float, ci_low_ms: float = np.nan, ci_high_ms: float = np.nan
) -> float:
    """How far a p50 may be moved before the move exceeds its own uncertainty: the larger of
    its 95 % interval's half-width, (high − low) / 2 (summary.csv ``*_ci95_low`` /
    ``*_ci95_high``, over passes), and :data:`UNCERTAINTY_FLOOR` × the p50 (which is all
    there is without an interval). NaN when the p50 is unknown.

    A client delay smaller than this changes the figure less than measuring it again would.
    """
    if not p50_ms >= 0:  # NaN or nonsense
        return np.nan
    half = (ci_high_ms - ci_low_ms) / 2
    floor = UNCERTAINTY_FLOOR * p50_ms
    return max(half, floor) if half >= 0 else floor


def itl_tolerance_ms(
    itl_p50_ms: float,
    tpot_mean_ms: float = np.nan,
    tpot_low_ms: float = np.nan,
    tpot_high_ms: float = np.nan,
) -> float:
    """:func:`p50_tolerance_ms` of ITL p50, which has no interval of its own: it borrows TPOT
    mean's relative half-width (both are the per-token pace of the same requests and passes,
    so a pass that runs slower moves both alike): the larger of ITL p50 × (high − low) /
    (2 × TPOT mean) and :data:`UNCERTAINTY_FLOOR` × ITL p50. NaN without an ITL p50."""
    if not tpot_mean_ms > 0 or not tpot_high_ms >= tpot_low_ms:
        return p50_tolerance_ms(itl_p50_ms)
    relative = (tpot_high_ms - tpot_low_ms) / 2 / tpot_mean_ms
    return p50_tolerance_ms(
        itl_p50_ms, itl_p50_ms * (1 - relative), itl_p50_ms * (1 + relative)
    )


def dispatch_lag_limit_ms(
    ttft_p50_ms: float, ttft_low_ms: float = np.nan, ttft_high_ms: float = np.nan
) -> float:
    """Limit for the p50 dispatch lag (sent − ready): TTFT p50's tolerance
    (:func:`p50_tolerance_ms`).

    TTFT is measured from ``sent``, so the lag is not inside it; it is inside the
    queue-inclusive TTFT / E2E (from ``scheduled``), and each late send lowers the load the
    server is offered. A typical lag moves the queue-inclusive TTFT p50 by about itself (and
    TTFT p50, through the lighter load, by less): it matters once it exceeds TTFT p50's
    uncertainty (queue-inclusive TTFT has no interval of its own and is at least TTFT, so
    TTFT's floor is the stricter limit). A rare lag (p99) moves no p50, so the p50 is
    compared.
    """
    return p50_tolerance_ms(ttft_p50_ms, ttft_low_ms, ttft_high_ms)


def arrival_limit_ms(ttft_p50_ms: float) -> float:
    """Limit for the p50 send → model arrival: :data:`ARRIVAL_SHARE` (half) of TTFT p50.

    The delay is the network, Triton's queue and the hand-off to the model: server-side
    waiting that TTFT rightly includes, so it distorts no figure and is never client lag.
    It is worth a line only when it is most of TTFT: the figure then measures the serving
    front end more than the model the variants differ in."""
    return ARRIVAL_SHARE * ttft_p50_ms


def loop_lag_limit_ms(ttft_tolerance_ms: float, itl_tolerance_ms: float) -> float:
    """Limit for the p50 event-loop lag: :data:`TIMER_ROUNDING_MS` plus the smaller of TTFT
    p50's and ITL p50's tolerance (NaNs ignored; NaN when both are).

    Every send and receive stamp is late by about the loop's lag, so a typical lag moves
    TTFT p50 and the per-token gaps (ITL p50) by about itself; TPOT mean is a long
    difference of two stamps over the token count and barely moves. The sampler's own timer
    wakes are up to 1 ms late on an idle loop, which receive stamps are not, so only the lag
    beyond that is compared. A rare stall (p99, max) late-stamps a few requests and moves no
    p50, so the p50 is compared."""
    tolerances = [t for t in (ttft_tolerance_ms, itl_tolerance_ms) if t >= 0]
    return TIMER_ROUNDING_MS + min(tolerances) if tolerances else np.nan


def _num(row: Mapping[str, object], key: str) -> float:
    value = row.get(key)
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return np.nan


def _ttft_tolerance(r: Mapping[str, object]) -> float:
    return dispatch_lag_limit_ms(
        _num(r, "time_to_first_token_p50_ms"),
        _num(r, "time_to_first_token_p50_ms_ci95_low"),
        _num(r, "time_to_first_token_p50_ms_ci95_high"),
    )


def _loop_limit(r: Mapping[str, object]) -> float:
    itl = itl_tolerance_ms(
        _num(r, "inter_token_latency_p50_ms"),
        _num(r, "time_per_output_token_mean_ms"),
        _num(r, "time_per_output_token_mean_ms_ci95_low"),
        _num(r, "time_per_output_token_mean_ms_ci95_high"),
    )
    return loop_lag_limit_ms(_ttft_tolerance(r), itl)


_CHECKS = (
    (
        "dispatch_lag_p50_ms",
        _ttft_tolerance,
        "p50 dispatch lag (sent − ready) over TTFT p50's uncertainty (95 % half-width, at "
        "least 10 %)",
        "the client was late sending due requests, which moves the queue-inclusive TTFT/E2E "
        "and lowers the offered load; lower the load per client process (--workers N)",
    ),
    (
        "client_to_server_delay_p50_ms",
        lambda r: arrival_limit_ms(_num(r, "time_to_first_token_p50_ms")),
        "server-side: p50 send → model arrival over half of TTFT p50",
        "most of TTFT passed in the network, Triton's queue and the hand-off to the model "
        "before it saw the request (the model stamps arrival_time_ns), so TTFT compares the "
        "serving front end more than the variants; server-side waiting, not client lag",
    ),
    (
        "event_loop_lag_p50_ms",
        _loop_limit,
        "p50 event-loop lag of the client over 1 ms timer rounding + the uncertainty of TTFT "
        "p50 or ITL p50",
        "its send and receive stamps are late by about as much, which moves TTFT and ITL (TPOT "
        "mean barely); use --workers N, or give the client CPU the server does not take (its "
        "own cores: taskset; a higher priority: nice -n -10)",
    ),
)


def client_warnings(
    summary: pd.DataFrame, variants: set[str] | None = None
) -> list[str]:
    """One line per variant and check, naming the complete tiers that fail it.

    A line means a client-side delay could move a reported figure by more than that
    figure's own uncertainty (:func:`p50_tolerance_ms`: the 95 % half-width over passes,
    at least 10 %), or, for send → model arrival, that TTFT is mostly server-side waiting.
    Each compares a tier's typical (p50) delay, as rare ones move no p50:

    - dispatch lag p50 > TTFT p50's tolerance (:func:`dispatch_lag_limit_ms`);
    - send → model arrival p50 > half of TTFT p50 (:func:`arrival_limit_ms`), worded as
      server-side;
    - event-loop lag p50 > 1 ms + the smaller of TTFT p50's and ITL p50's tolerance
      (:func:`loop_lag_limit_ms`; summaries written before ``event_loop_lag_p50_ms``
      existed are not checked: their p99 and max cannot tell a rare stall from a busy loop).

    Tiers that are not ``complete`` are not measurements and are skipped; so are checks
    whose columns a row lacks. ``summary``: summary.csv rows; ``variants``: only these
    (None: all).
    """
    out: list[str] = []
    if variants is not None and "variant" in summary:
        summary = summary[summary["variant"].astype(str).isin(variants)]
    rows = [
        r
        for r in summary.to_dict("records")
        if str(r.get("tier_status") or "complete") in ("complete", "nan")
    ]
    variants_seen = list(dict.fromkeys(str(r["variant"]) for r in rows))
    for column, limit_of, what, why in _CHECKS:
        for variant in variants_seen:
            hits = []
            for r in rows:
                if str(r["variant"]) != variant:
                    continue
                value, limit = _num(r, column), limit_of(r)
                if value > limit:
                    hits.append(f"{r['tier']} {value:.2f} ms > {limit:.2f}")
            if hits:
                out.append(f"{variant}: {what} at {', '.join(hits)}: {why}")
    return out


TierKey = tuple[str, str]


def tier_loop_lags(
    results: Mapping[str, LoadResult],
) -> dict[TierKey, tuple[float, float, float]]:
    """(variant, tier) → (event-loop lag p50 ms, p99 ms, max ms); the largest over a tier's
    passes."""
    out: dict[TierKey, tuple[float, float, float]] = {}
    for variant, result in results.items():
        for t in result.tiers:
            if t.loop_lag is None:
                continue
            p50, p99, top = out.get((variant, t.tier), (0.0, 0.0, 0.0))
            out[(variant, t.tier)] = (
                max(p50, t.loop_lag.p50_ms),
                max(p99, t.loop_lag.p99_ms),
                max(top, t.loop_lag.max_ms),
            )
    return out


def add_loop_lag(
    summary: pd.DataFrame,
    lags: Mapping[TierKey, tuple[float, ...]],
    old_summary: Path | None = None,
) -> pd.DataFrame:
    """``summary`` with :data:`LOOP_LAG_COLUMNS` from ``lags`` and, for the tiers not in
    ``lags``, from the earlier ``old_summary`` file where it has them (a file from before
    ``event_loop_lag_p50_ms`` keeps its p99 and max). Rows without a value stay NaN.

    Raises:
        DataFileError: ``old_summary`` exists but is damaged.
    """
    out = summary.copy()
    if "variant" not in out:
        return out
    values: dict[TierKey, tuple[float, ...]] = {}
    if old_summary is not None and old_summary.is_file():
        old = read_csv_checked(
            old_summary,
            fix="re-run `trtbench loadtest` for its variants, or delete the file",
            keys=("variant", "tier"),
        )
        if any(c in old.columns for c in LOOP_LAG_COLUMNS):
            cols = [
                _col(old, c).tolist() if c in old.columns else [np.nan] * len(old)
                for c in LOOP_LAG_COLUMNS
            ]
            keys = zip(old["variant"].astype(str), old["tier"].astype(str), strict=True)
            values = {k: tuple(v) for k, *v in zip(keys, *cols, strict=True)}
    values.update(lags)
    keys = list(zip(out["variant"].astype(str), out["tier"].astype(str), strict=True))
    for i, column in enumerate(LOOP_LAG_COLUMNS):
        out[column] = [float(values[k][i]) if k in values else np.nan for k in keys]
    return out
