"""A request-rate target (``trtbench plan --qps``) turned into each mode's concurrency.

Little's law (Little 1961; as GuideLLM and ``vllm bench serve --request-rate`` relate rate and
concurrency): a server that completes λ requests per second, each in W seconds, holds
``L = λ W`` of them at once. A request's W is its prefill plus its decode::

    W(B) = prefill + (output_len - 1) x TPOT(B)      prefill = one pass of input_len tokens

and TPOT grows with the concurrency B, so a mode serves λ at the smallest integer B with
``B >= λ W(B)``; none up to the memory limit means λ is beyond what the mode can serve
(:attr:`QpsPoint.saturated`). A faster mode finishes requests sooner and so serves the same
λ at a lower concurrency: the speedup at a rate compares each mode at its own B. Queueing
delay is not modelled (W is the service time).
"""

from __future__ import annotations

from dataclasses import dataclass

from trtbench.core.errors import ConfigError
from trtbench.plan.memory import max_fitting_concurrency
from trtbench.plan.planner import (
    REFERENCE,
    PlanInputs,
    estimate_step,
    forward_pass_cost,
)


@dataclass(frozen=True)
class QpsPoint:
    """One mode at one request rate.

    Attributes:
        mode, qps: the mode and the rate (requests/s).
        concurrency: the B that serves it (the largest that fits when saturated).
        tpot_s, latency_s: TPOT and W at that B (s).
        saturated: no B within memory serves the rate.
        speedup_ratio: baseline TPOT at its own B / this mode's TPOT (NaN when either is
            saturated).
    """

    mode: str
    qps: float
    concurrency: int
    tpot_s: float
    latency_s: float
    saturated: bool
    speedup_ratio: float = float("nan")


def _tpot(inputs: PlanInputs, mode: str, batch: int) -> float:
    step = estimate_step(inputs, mode, batch)
    return step.step_s / step.tokens_per_step


def qps_point(inputs: PlanInputs, mode: str, qps: float) -> QpsPoint:
    """The concurrency at which ``mode`` serves ``qps`` requests/s (module doc).

    Raises:
        ConfigError: ``qps`` not > 0.
    """
    if not qps > 0:
        raise ConfigError(f"--qps must be > 0 requests/s, got {qps}")
    prefill = forward_pass_cost(inputs, inputs.target, 1, inputs.input_len).time_s
    limit = max(min(max_fitting_concurrency(inputs, mode), inputs.crossover_limit), 1)
    lo, hi = 1, limit

    def latency(batch: int) -> float:
        return prefill + (inputs.output_len - 1) * _tpot(inputs, mode, batch)

    if hi < qps * latency(hi):
        return QpsPoint(mode, qps, hi, _tpot(inputs, mode, hi), latency(hi), True)
    while lo < hi:  # the smallest B with B >= qps x W(B)
        mid = (lo + hi) // 2
        if mid >= qps * latency(mid):
            hi = mid
        else:
            lo = mid + 1
    return QpsPoint(mode, qps, lo, _tpot(inputs, mode, lo), latency(lo), False)


def qps_points(inputs: PlanInputs, rates: tuple[float, ...]) -> list[QpsPoint]:
    """Every mode at every rate, each with its speedup over the baseline at that rate."""
    out = []
    for qps in rates:
        points = {m: qps_point(inputs, m, qps) for m in inputs.modes}
        base = points[REFERENCE]
        for point in points.values():
            ok = not (point.saturated or base.saturated)
            ratio = base.tpot_s / point.tpot_s if ok else float("nan")
            out.append(QpsPoint(**{**point.__dict__, "speedup_ratio": ratio}))
    return out
