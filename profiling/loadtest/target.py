"""What a load test is given: where to send (target), how much and how fast (settings),
and who hears about progress."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from trtbench.profiling.loadtest.grpc_client import ModelInterface, RequestOptions
from trtbench.profiling.loadtest.schedule import Tier


@dataclass(frozen=True)
class LoadTarget:
    """Where and how to send: gRPC ``url``, the probed model, the endpoint kind."""

    url: str
    interface: ModelInterface
    endpoint: str
    options: RequestOptions = field(default_factory=RequestOptions)


@dataclass(frozen=True)
class LoadSettings:
    """Per-tier size and timing. Exactly one of ``requests_per_tier`` / ``duration_s``.

    ``ramp_up_s``: in concurrency mode, worker k of N sends its first request
    ``k · ramp_up_s / N`` after the tier starts (0: all at once — the closed-loop start
    burst, which queues N prefills together). ``repeats``: passes over the tiers, each
    pass in a fresh order (:func:`trtbench.profiling.loadtest.repeats.tier_passes`).
    """

    requests_per_tier: int | None = 32
    duration_s: float | None = None
    warmup_requests: int = 2
    request_timeout_s: float = 120.0
    arrival: str = "poisson"
    burstiness: float = 1.0
    ramp_up_s: float = 0.0
    repeats: int = 1


class Progress(Protocol):
    """Receives tier progress (a rich progress bar in the CLI)."""

    def tier_started(self, variant: str, tier: Tier, total: int | None) -> None: ...
    def request_done(self, ok: bool) -> None: ...
    def tier_ended(self) -> None: ...
