"""Load shape: tiers and intended send times, separate from sending.

Two modes (those of ``vllm bench serve`` and AIPerf):

- concurrency (closed loop): N requests outstanding; a request is scheduled the moment a
  slot frees, so there are no send times to draw.
- request rate (open loop): inter-arrival times are constant (1/rate), exponential
  (Poisson process) or Gamma(shape=b, scale=1/(rate·b)) with burstiness b (vLLM
  ``--burstiness``: b = 1 is Poisson, b < 1 burstier, larger b more regular). The mean
  interval is 1/rate in every case.

Randomness comes only from the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Literal, get_args

import numpy as np

Arrival = Literal["constant", "poisson", "gamma"]
ARRIVALS: tuple[str, ...] = get_args(Arrival)
NS_PER_S = 1_000_000_000
_BLOCK = 1024


@dataclass(frozen=True)
class Tier:
    """One load level: closed-loop ``concurrency`` or open-loop ``request_rate_per_s``
    (``max_concurrency``: at most that many requests of the open loop in flight)."""

    concurrency: int | None = None
    request_rate_per_s: float | None = None
    max_concurrency: int | None = None

    @property
    def label(self) -> str:
        """``c<N>`` or ``r<rate>`` (``r2.5``), used in CSV rows and request ids."""
        if self.concurrency is not None:
            return f"c{self.concurrency}"
        return f"r{self.request_rate_per_s:g}"


def plan_tiers(
    concurrency: Sequence[int] = (),
    request_rate: Sequence[float] | None = None,
    max_concurrency: int | None = None,
) -> list[Tier]:
    """Tiers in the order given: request rates when any are given, else concurrencies.

    ``max_concurrency`` caps every request-rate tier (its label stays ``r<rate>``).

    Raises:
        ValueError: no tier, a concurrency < 1, a rate ≤ 0, two tiers with the same
            label (``2,2``; rates 2.5 and 2.500001 both label ``r2.5``), or a
            ``max_concurrency`` < 1 or without request rates.
    """
    if max_concurrency is not None and (not request_rate or max_concurrency < 1):
        raise ValueError(
            f"max concurrency {max_concurrency} needs request rates and must be ≥ 1 "
            "(it caps an open loop; a closed loop's size is its concurrency)"
        )
    if request_rate:
        bad = [r for r in request_rate if not r > 0]
        if bad:
            raise ValueError(f"request rates must be > 0, got {bad}")
        tiers = [Tier(None, float(r), max_concurrency) for r in request_rate]
    else:
        bad_c = [c for c in concurrency if c < 1]
        if bad_c or not concurrency:
            raise ValueError(f"concurrency values must be ≥ 1, got {list(concurrency)}")
        tiers = [Tier(concurrency=int(c)) for c in concurrency]
    labels = [t.label for t in tiers]
    twice = next((label for i, label in enumerate(labels) if label in labels[:i]), None)
    if twice is not None:
        kind = "request rate" if request_rate else "concurrency"
        raise ValueError(
            f"{kind} {twice[1:]} is listed twice (tiers {', '.join(labels)}); give each "
            "tier once"
        )
    return tiers


def interarrival_s(
    n: int,
    rate_per_s: float,
    arrival: Arrival,
    rng: np.random.Generator,
    burstiness: float = 1.0,
) -> np.ndarray:
    """``n`` inter-arrival times in seconds with mean ``1/rate_per_s``.

    Raises:
        ValueError: rate or burstiness ≤ 0, or an unknown arrival process.
    """
    if not rate_per_s > 0 or not burstiness > 0:
        raise ValueError("rate_per_s and burstiness must be > 0")
    if arrival == "constant":
        return np.full(n, 1.0 / rate_per_s)
    if arrival == "poisson":
        return rng.exponential(1.0 / rate_per_s, size=n)
    if arrival == "gamma":
        return rng.gamma(burstiness, 1.0 / (rate_per_s * burstiness), size=n)
    raise ValueError(f"unknown arrival {arrival!r}; use one of {', '.join(ARRIVALS)}")


def iter_send_offsets_ns(
    rate_per_s: float,
    arrival: Arrival,
    rng: np.random.Generator,
    burstiness: float = 1.0,
) -> Iterator[int]:
    """Endless intended send times, ns after the tier start; the first is 0.

    Offset i is the sum of the first i inter-arrival times (drawn in blocks, so a
    duration-bounded tier can take as many as it needs).
    """
    offset = 0.0
    while True:
        for gap in interarrival_s(_BLOCK, rate_per_s, arrival, rng, burstiness):
            yield int(round(offset * NS_PER_S))
            offset += float(gap)


def send_offsets_ns(
    n: int,
    rate_per_s: float,
    arrival: Arrival,
    rng: np.random.Generator,
    burstiness: float = 1.0,
) -> np.ndarray:
    """The first ``n`` offsets of :func:`iter_send_offsets_ns` (same draws) as int64."""
    offsets = iter_send_offsets_ns(rate_per_s, arrival, rng, burstiness)
    return np.fromiter(islice(offsets, n), dtype=np.int64, count=n)
