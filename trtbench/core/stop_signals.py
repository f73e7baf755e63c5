"""Stop signals: SIGINT, SIGTERM and SIGHUP end every long command the same way.

Schedulers (Kubernetes, Slurm, CI timeouts) send SIGTERM; a closed terminal sends SIGHUP;
a user presses Ctrl-C (SIGINT). While :func:`stop_signals` is active each of them raises
:class:`StopSignal` in the main thread. It derives from ``BaseException`` (like
``KeyboardInterrupt``) so ``except Exception`` never swallows it, but it is not a
``KeyboardInterrupt``: click would turn that into its own "Aborted!" message. Whoever keeps
results catches it, writes what finished, stops servers and re-raises; the CLI exits with
``128 + signal number`` (the shell convention: 130 for SIGINT, 143 for SIGTERM, 129 for
SIGHUP).

An asyncio event loop that must keep running while it winds down (the load generator)
installs its own handlers with :func:`loop_stop_handlers` and puts back the ones of this
module afterwards (``loop.remove_signal_handler`` alone would restore the defaults, and a
later SIGTERM would kill the process without cleanup).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

STOP_SIGNALS: tuple[signal.Signals, ...] = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
)


class StopSignal(BaseException):  # noqa: N818 - named like KeyboardInterrupt, not an error
    """A stop signal arrived. ``signum`` is its number; ``exit_code`` is 128 + it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def name(self) -> str:
        """``SIGTERM`` …"""
        return signal_name(self.signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        return f"stopped by {self.name}"


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15 (``signal <n>`` for a number without a name)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise StopSignal(signum)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Make SIGINT, SIGTERM and SIGHUP raise :class:`StopSignal` inside the block.

    Handlers are set even when a parent left a signal ignored (a background job ignores
    SIGINT), so the command can still be stopped cleanly. Outside the main thread this is
    a no-op (Python delivers signals to the main thread only).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise_stop) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def loop_stop_handlers(
    loop: asyncio.AbstractEventLoop, on_signal: Callable[[int], None]
) -> Iterator[None]:
    """Route the stop signals to ``on_signal(signum)`` inside ``loop`` for the block.

    The Python-level handlers in place before (those of :func:`stop_signals`, or the
    defaults) are restored afterwards. Where the loop cannot take signal handlers (not the
    main thread, or not a Unix loop) nothing is installed.
    """
    installed: list[signal.Signals] = []
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    try:
        for sig in STOP_SIGNALS:
            try:
                loop.add_signal_handler(sig, on_signal, int(sig))
            except (NotImplementedError, RuntimeError, ValueError):
                break
            installed.append(sig)
        yield
    finally:
        for sig in installed:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
            handler = previous[sig]
            if handler is not None:
                with contextlib.suppress(ValueError):
                    signal.signal(sig, handler)
