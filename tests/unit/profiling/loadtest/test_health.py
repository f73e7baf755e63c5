"""The watcher's policy: an exit stops the tier at once, a sick answer only when it repeats.

The real thing (a SIGKILLed tritonserver noticed within a second) is in
tests/integration/test_faults.py; here the answers are scripted to pin the policy.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tests.support.timing import report_timing
from trtbench.profiling.loadtest.clients import health as h

UNTIL_S = 60.0
"""Bounds the wait for what a test asserts (a hang), never its timing."""


def _watch(
    answers: list[h.Health],
    seconds: float,
    verify_at: float | None = None,
    until: Callable[[list, int], bool] = lambda dead, calls: True,
):
    """Run a watcher over scripted answers for ``seconds``, then until ``until(dead,
    calls)`` holds (a starved loop checks less often, never more); return (reasons with
    the time of death, check count)."""
    dead: list[tuple[str, float]] = []
    calls = 0

    async def check() -> h.Health:
        nonlocal calls
        calls += 1
        return answers[min(calls, len(answers)) - 1]

    async def main() -> None:
        start = time.monotonic()
        watcher = h.Watcher(check, lambda r: dead.append((r, time.monotonic() - start)))
        watcher.start()
        if verify_at is not None:
            await asyncio.sleep(verify_at)
            await watcher.verify()  # returns once the answer is in
            assert dead  # the caller sees the death before it sends again
            await asyncio.sleep(seconds - verify_at)
        else:
            await asyncio.sleep(seconds)
        deadline = time.monotonic() + UNTIL_S
        while not until(dead, calls):
            assert time.monotonic() < deadline, (dead, calls)
            await asyncio.sleep(0.05)
        await watcher.stop()

    asyncio.run(main())
    return dead, calls


def test_an_exit_is_fatal_on_the_first_answer():
    dead, calls = _watch(
        [h.Health("exited with code -9", fatal=True)], 0.6, until=lambda d, c: d
    )
    assert [r for r, _ in dead] == ["exited with code -9"]
    report_timing("watcher: exit reported after", dead[0][1], h.INTERVAL_S + 0.2, "s")
    assert calls == 1  # the first answer counted; the watcher ends after reporting


def test_a_sick_answer_must_repeat_before_it_counts():
    sick = h.Health("not ready (HTTP 503)")
    answers = [sick, h.Health(), sick, sick, h.Health()]
    dead, _ = _watch(answers, 1.6, until=lambda d, c: c >= len(answers))
    assert dead == []  # never CONFIRMATIONS sick answers in a row
    dead, calls = _watch([sick], 1.6, until=lambda d, c: d)
    assert [r for r, _ in dead] == ["not ready (HTTP 503)"]
    assert calls == h.CONFIRMATIONS


def test_verify_checks_at_once_and_waits_for_the_answer():
    dead, calls = _watch([h.Health("gone", fatal=True)], 0.2, verify_at=0.05)
    assert calls == 1  # verify's own check: the interval's tick never came
    report_timing("watcher: verify() reported the death after", dead[0][1], 0.15, "s")


def test_a_check_that_raises_is_a_sick_answer_not_a_crash():
    async def broken() -> h.Health:
        raise RuntimeError("boom")

    got: list[str] = []

    async def main() -> None:
        watcher = h.Watcher(broken, got.append)
        watcher.start()
        await asyncio.sleep(h.INTERVAL_S * (h.CONFIRMATIONS + 1) + 0.2)
        deadline = time.monotonic() + UNTIL_S  # a starved loop checks less often
        while not got:
            assert time.monotonic() < deadline, "no confirmed death"
            await asyncio.sleep(0.05)
        await watcher.stop()

    asyncio.run(main())
    assert got == ["health check failed (RuntimeError: boom)"]


def test_stop_lets_a_check_in_flight_finish():
    # a gRPC check cancelled at the stop would end in gRPC's poller after the loop closed
    ended: list[str] = []

    async def slow() -> h.Health:
        try:
            await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        ended.append("answered")
        return h.Health()

    async def main() -> None:
        watcher = h.Watcher(slow, lambda reason: None)
        verify = asyncio.ensure_future(watcher.verify())  # a check now in flight
        await asyncio.sleep(0)
        await watcher.stop()
        assert ended == ["answered"]
        verify.cancel()

    asyncio.run(main())
