"""Stop signals raise StopSignal (exit 128 + n) and asyncio loops put the handlers back."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from trtbench.core.stop_signals import (
    STOP_SIGNALS,
    StopSignal,
    loop_stop_handlers,
    signal_name,
    stop_signals,
)


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_each_stop_signal_raises_with_the_shell_exit_code(sig, code):
    with pytest.raises(StopSignal) as info, stop_signals():
        os.kill(os.getpid(), sig)
        for _ in range(1000):  # the handler runs between bytecodes
            pass
    assert info.value.signum == sig
    assert info.value.exit_code == code
    assert str(info.value) == f"stopped by {sig.name}"


def test_handlers_are_restored_after_the_block():
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    with stop_signals():
        assert all(signal.getsignal(s) is not before[s] for s in STOP_SIGNALS)
    assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == before


def test_stop_signal_is_not_caught_by_except_exception():
    assert not issubclass(StopSignal, Exception)
    assert not issubclass(StopSignal, KeyboardInterrupt)  # click would print "Aborted!"


def test_a_loop_routes_signals_to_its_callback_and_restores_ours():
    got: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with loop_stop_handlers(loop, got.append):
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(0.05)

    with stop_signals():
        ours = signal.getsignal(signal.SIGTERM)
        asyncio.run(main())
        # remove_signal_handler alone would leave SIG_DFL: a later SIGTERM would kill us
        assert signal.getsignal(signal.SIGTERM) is ours
        with pytest.raises(StopSignal):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
    assert got == [signal.SIGTERM]


def test_signal_names():
    assert signal_name(15) == "SIGTERM"
    assert signal_name(200) == "signal 200"
