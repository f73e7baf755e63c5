"""What a load test is given: where to send (target), how much and how fast (settings),
and who hears about progress."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from trtbench.core.errors import ConfigError
from trtbench.profiling.loadtest.clients.grpc_client import (
    ModelInterface,
    RequestOptions,
)
from trtbench.profiling.loadtest.workload.schedule import Tier

API_GRPC = "triton-grpc"
API_CHAT = "openai-chat"
API_COMPLETIONS = "openai-completions"
APIS = (API_GRPC, API_CHAT, API_COMPLETIONS)
"""``trtbench loadtest --api``: Triton's gRPC (default) or an OpenAI-compatible HTTP server."""


def check_url(api: str, url: str) -> None:
    """Raise ConfigError (one line) when ``url`` does not fit ``api``: Triton gRPC takes
    ``HOST:PORT`` (its gRPC port, 8001 by default; 8000 is Triton's HTTP port), an OpenAI
    API an ``http(s)://HOST:PORT/v1`` base URL of the server's HTTP port."""
    web = url.startswith(("http://", "https://"))
    if api == API_GRPC and "://" in url:
        raise ConfigError(
            f"--url {url}: --api {API_GRPC} takes HOST:PORT of Triton's gRPC port (8001 by "
            f"default; 8000 is its HTTP port); for an OpenAI server pass --api {API_CHAT} "
            f"or {API_COMPLETIONS}"
        )
    if api != API_GRPC and not web:
        raise ConfigError(
            f"--url {url}: --api {api} takes the server's HTTP base URL, e.g. "
            "http://HOST:8000/v1 (HOST:PORT alone is the Triton gRPC form, port 8001, "
            f"--api {API_GRPC})"
        )


def check_workers_api(api: str, workers: int, field: str = "--workers") -> None:
    """Raise ConfigError (one line) for several client processes with an OpenAI API: its
    speculative counts come from the server's Prometheus counters scraped around each tier in
    the one process that runs the tiers (:mod:`~trtbench.profiling.loadtest.clients.server_counts`),
    which several processes do not do yet."""
    if api != API_GRPC and workers > 1:
        raise ConfigError(
            f"{field} {workers} with --api {api} is not supported yet (the server's "
            f"speculative counters are scraped around each tier in one process); use "
            f"{field} 1"
        )


@dataclass(frozen=True)
class LoadTarget:
    """Where and how to send: ``url`` (gRPC ``HOST:PORT``, or an OpenAI base URL
    ``http://HOST:PORT/v1``), the probed model, the endpoint kind (gRPC: an ``ENDPOINTS``
    key; OpenAI: the path, ``completions`` or ``chat/completions``), the ``api``
    (:data:`APIS`). An OpenAI model's interface has no inputs; its outputs say whether the
    server returns token ids (``output_ids``) or text only (``text_output``).
    ``adaptive_drafting``: the server varies its draft length at run time (SGLang's
    ``speculative_adaptive``), so per-request proposals it reports at the configured length
    are nominal (``clients/sglang_spec.py``)."""

    url: str
    interface: ModelInterface
    endpoint: str
    options: RequestOptions = field(default_factory=RequestOptions)
    api: str = API_GRPC
    health_url: str | None = None  # OpenAI: GET → 200 while the server is up
    adaptive_drafting: bool = False

    @property
    def echo_possible(self) -> bool:
        """The prompt may come back in the output (gRPC models without an exclude input;
        an OpenAI server never echoes: ``echo`` is not sent)."""
        return self.api == API_GRPC and self.interface.echo_possible


@dataclass(frozen=True)
class LoadSettings:
    """Per-tier size and timing. Exactly one of ``requests_per_tier`` / ``duration_s``.

    ``ramp_up_s``: in concurrency mode, worker k of N sends its first request
    ``k · ramp_up_s / N`` after the tier starts (0: all at once — the closed-loop start
    burst, which queues N prefills together). ``repeats``: passes over the tiers, each
    pass in a fresh order (:func:`trtbench.profiling.loadtest.workload.repeats.tier_passes`).
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
    """Receives tier progress (the CLI: one line, each tier pass a cell)."""

    def tier_started(self, variant: str, tier: Tier, total: int | None) -> None: ...
    def request_done(self, ok: bool) -> None: ...
    def tier_ended(self) -> None: ...
