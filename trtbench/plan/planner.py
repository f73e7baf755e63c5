"""Analytic planner: predicted step time, tokens per step, speedup and memory per concurrency.

Formulas (research/speedup_anchors.md):

* Tokens per target step of a draft chain of length γ with per-token acceptance α (§2.2,
  Leviathan et al. 2023): ``E[N] = (1 - α^(γ+1)) / (1 - α)``.
* Wall-time gain with draft/target step cost ratio c and verify/target cost ratio v (§2.3,
  Thm 3.8 generalised): ``S = E[N] / (γ c + v)``; optimal γ maximises it (§2.4).
* Medusa: ``E = 1 + Σ_nodes Π a_i(k_i)`` (§2.5, ``medusa_tree.expected_acceptance_length``).
* Roofline of one forward pass over B sequences, each with T new tokens and context L (§2.6)::

      bytes = weight_bytes + B * L * kv_bytes_per_token          (weights + KV read once)
      flops = 2 * matmul_params * B * T + 4 * layers * q_dim * B * T * L   (linears + attention)
      time  = max(bytes / HBM bandwidth, flops / dense peak) + step overhead

  Activations and KV writes are ignored (§2.6). L is the mean context while decoding,
  ``input_len + output_len / 2``.
* Steps: baseline = target(B, 1); draft-target = γ draft(B, 1) + target(B, γ+1); Medusa =
  target(B, 1 + nodes) + heads (their weights read once, 2 FLOP per head parameter per
  sequence). Time per output token = step / tokens per step; speedup = baseline TPOT / TPOT.
* Memory: weights + draft weights + Medusa heads + B * KV per sequence, where a sequence holds
  ``input_len + output_len`` (+ γ or tree nodes) tokens in the target's and the draft's cache.
  It fits when the total is at most ``memory_fraction`` of the GPU's memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from trtbench.builders.medusa_tree import (
    Choices,
    expected_acceptance_length,
    validate_choices,
)
from trtbench.errors import ConfigError
from trtbench.plan.gpus import GpuSpec
from trtbench.plan.model_shapes import ModelShape
from trtbench.plan.speculation import expected_tokens_per_step, optimal_draft_len

BASELINE, DRAFT_TARGET, MEDUSA = "baseline", "draft_target", "medusa"
DTYPE_BYTES = {"float16": 2.0, "bfloat16": 2.0, "fp8": 1.0}


def medusa_head_params(target: ModelShape, num_heads: int, num_layers: int) -> float:
    """Parameters of FasterDecoding Medusa heads: each has ``num_layers`` residual blocks
    (H×H weight + bias) and its own H×V lm_head: ``K * (layers*(H²+H) + H*V)``."""
    h = target.hidden
    return num_heads * (num_layers * (h * h + h) + h * target.vocab)


@dataclass(frozen=True)
class DraftSetup:
    """A draft model proposing ``draft_len`` tokens per step, each accepted with ``alpha``."""

    model: ModelShape
    draft_len: int
    alpha: float


@dataclass(frozen=True)
class MedusaSetup:
    """Medusa heads, the tree they verify and per-head per-rank accuracies (§2.5)."""

    num_heads: int
    num_layers: int
    choices: Choices
    accuracies: tuple[tuple[float, ...], ...] = ()
    measured_tokens_per_step: float | None = None

    @property
    def tokens_per_step(self) -> float:
        """A measured E when given (``plan --from-run``), else the §2.5 expectation."""
        if self.measured_tokens_per_step is not None:
            return self.measured_tokens_per_step
        return expected_acceptance_length(self.choices, self.accuracies)


@dataclass(frozen=True)
class PlanInputs:
    """Everything the planner needs (lengths in tokens; overhead in ms per forward pass)."""

    target: ModelShape
    gpu: GpuSpec
    input_len: int
    output_len: int
    concurrencies: tuple[int, ...]
    dtype: str = "bfloat16"
    kv_dtype: str = "auto"
    draft: DraftSetup | None = None
    medusa: MedusaSetup | None = None
    memory_fraction: float = 0.9
    step_overhead_ms: float = 0.0
    crossover_limit: int = 4096

    @property
    def weight_bytes_per_param(self) -> float:
        return DTYPE_BYTES[self.dtype]

    @property
    def kv_bytes_per_element(self) -> float:
        return DTYPE_BYTES[self.dtype if self.kv_dtype == "auto" else self.kv_dtype]

    @property
    def peak_flops_per_s(self) -> float:
        return self.gpu.peak_flops_per_s(fp8=self.dtype == "fp8")

    @property
    def decode_context_len(self) -> float:
        return self.input_len + self.output_len / 2

    @property
    def modes(self) -> tuple[str, ...]:
        extra = ((DRAFT_TARGET,) if self.draft else ()) + (
            (MEDUSA,) if self.medusa else ()
        )
        return (BASELINE, *extra)


@dataclass(frozen=True)
class PassCost:
    """Roofline cost of one forward pass: bytes moved, FLOPs, time and what bounds it."""

    bytes_moved: float
    flops: float
    time_s: float
    bound: str


def forward_pass_cost(
    inputs: PlanInputs, model: ModelShape, batch: int, new_tokens: int
) -> PassCost:
    """Roofline of one pass of ``model`` over ``batch`` sequences × ``new_tokens`` (module doc)."""
    ctx = inputs.decode_context_len
    kv = model.kv_bytes_per_token(inputs.kv_bytes_per_element)
    moved = model.params * inputs.weight_bytes_per_param + batch * ctx * kv
    tokens = batch * new_tokens
    flops = (
        2 * model.matmul_params * tokens + 4 * model.layers * model.q_dim * tokens * ctx
    )
    t_mem = moved / inputs.gpu.hbm_bandwidth_bytes_per_s
    t_cmp = flops / inputs.peak_flops_per_s
    bound = "memory" if t_mem >= t_cmp else "compute"
    return PassCost(
        moved, flops, max(t_mem, t_cmp) + inputs.step_overhead_ms / 1e3, bound
    )


@dataclass(frozen=True)
class StepEstimate:
    """One decoding step of one mode at one concurrency."""

    step_s: float
    tokens_per_step: float
    bound: str


def estimate_step(inputs: PlanInputs, mode: str, batch: int) -> StepEstimate:
    """Predicted step time and tokens per step of ``mode`` at concurrency ``batch``."""
    if mode == BASELINE:
        cost = forward_pass_cost(inputs, inputs.target, batch, 1)
        return StepEstimate(cost.time_s, 1.0, cost.bound)
    if mode == DRAFT_TARGET and inputs.draft:
        d = inputs.draft
        draft = forward_pass_cost(inputs, d.model, batch, 1)
        verify = forward_pass_cost(inputs, inputs.target, batch, d.draft_len + 1)
        step = d.draft_len * draft.time_s + verify.time_s
        return StepEstimate(
            step, expected_tokens_per_step(d.alpha, d.draft_len), verify.bound
        )
    if mode == MEDUSA and inputs.medusa:
        m = inputs.medusa
        verify = forward_pass_cost(inputs, inputs.target, batch, 1 + len(m.choices))
        heads = medusa_head_params(inputs.target, m.num_heads, m.num_layers)
        t_heads = max(
            heads
            * inputs.weight_bytes_per_param
            / inputs.gpu.hbm_bandwidth_bytes_per_s,
            2 * heads * batch / inputs.peak_flops_per_s,
        )
        return StepEstimate(verify.time_s + t_heads, m.tokens_per_step, verify.bound)
    raise ConfigError(f"mode {mode!r} is not set up in this plan; give its options")


@dataclass(frozen=True)
class MemoryEstimate:
    """Device memory of one mode at one concurrency (bytes)."""

    weights_bytes: float
    extra_weights_bytes: float
    kv_per_sequence_bytes: float
    kv_cache_bytes: float
    total_bytes: float
    fits: bool


def estimate_memory(inputs: PlanInputs, mode: str, batch: int) -> MemoryEstimate:
    """Weights, draft/heads weights and KV cache × concurrency; fit against the GPU."""
    wb, kvb = inputs.weight_bytes_per_param, inputs.kv_bytes_per_element
    seq = inputs.input_len + inputs.output_len
    weights = inputs.target.params * wb
    extra, kv_seq = 0.0, inputs.target.kv_bytes_per_token(kvb) * seq
    if mode == DRAFT_TARGET and inputs.draft:
        d = inputs.draft
        extra = d.model.params * wb
        kv_seq = (
            inputs.target.kv_bytes_per_token(kvb) + d.model.kv_bytes_per_token(kvb)
        ) * (seq + d.draft_len)
    elif mode == MEDUSA and inputs.medusa:
        m = inputs.medusa
        extra = medusa_head_params(inputs.target, m.num_heads, m.num_layers) * wb
        kv_seq = inputs.target.kv_bytes_per_token(kvb) * (seq + len(m.choices))
    total = weights + extra + batch * kv_seq
    fits = total <= inputs.memory_fraction * inputs.gpu.memory_bytes
    return MemoryEstimate(weights, extra, kv_seq, batch * kv_seq, total, fits)


def max_fitting_concurrency(inputs: PlanInputs, mode: str) -> int:
    """Largest concurrency whose memory fits (0: not even the weights fit)."""
    one = estimate_memory(inputs, mode, 1)
    room = (
        inputs.memory_fraction * inputs.gpu.memory_bytes
        - one.weights_bytes
        - one.extra_weights_bytes
    )
    return max(int(room // one.kv_per_sequence_bytes), 0)


@dataclass(frozen=True)
class PlanRow:
    """Prediction for one mode at one concurrency (times in ms, memory in bytes)."""

    mode: str
    concurrency: int
    step_time_ms: float
    tokens_per_step: float
    tpot_ms: float
    output_tokens_per_s: float
    speedup_ratio: float
    bound: str
    weights_bytes: float
    extra_weights_bytes: float
    kv_cache_bytes: float
    total_memory_bytes: float
    fits: bool


def speedup_at(inputs: PlanInputs, mode: str, batch: int) -> float:
    """Baseline TPOT / ``mode`` TPOT at concurrency ``batch`` (1.0 for the baseline)."""
    base = estimate_step(inputs, BASELINE, batch)
    step = estimate_step(inputs, mode, batch)
    return (base.step_s / base.tokens_per_step) / (step.step_s / step.tokens_per_step)


def crossover_concurrency(inputs: PlanInputs, mode: str) -> int | None:
    """Smallest concurrency in 1..``crossover_limit`` where ``mode`` is slower than baseline.

    Returns None when speculation still pays at the limit (memory is not considered here).
    """
    for batch in range(1, inputs.crossover_limit + 1):
        if speedup_at(inputs, mode, batch) < 1.0:
            return batch
    return None


@dataclass(frozen=True)
class Plan:
    """The planner's answer: rows per (mode, concurrency) plus per-mode and per-tier verdicts."""

    inputs: PlanInputs
    rows: tuple[PlanRow, ...]
    recommended: dict[int, str] = field(default_factory=dict)
    crossover: dict[str, int | None] = field(default_factory=dict)
    max_concurrency: dict[str, int] = field(default_factory=dict)
    draft_cost_ratio: float | None = None
    optimal_draft: tuple[int, float] | None = None


def plan_row(inputs: PlanInputs, mode: str, batch: int) -> PlanRow:
    """Step, throughput, speedup and memory of one mode at one concurrency."""
    step = estimate_step(inputs, mode, batch)
    mem = estimate_memory(inputs, mode, batch)
    tpot = step.step_s / step.tokens_per_step
    return PlanRow(
        mode, batch, step.step_s * 1e3, step.tokens_per_step, tpot * 1e3,
        batch / tpot, speedup_at(inputs, mode, batch), step.bound, mem.weights_bytes,
        mem.extra_weights_bytes, mem.kv_cache_bytes, mem.total_bytes, mem.fits,
    )  # fmt: skip


def recommend(rows: Sequence[PlanRow]) -> str:
    """The mode to serve at one concurrency: the fastest that fits, if faster than baseline.

    Returns ``"none fits"`` when not even the baseline fits.
    """
    fitting = [r for r in rows if r.fits]
    if not fitting:
        return "none fits"
    best = max(fitting, key=lambda r: r.speedup_ratio)
    if best.speedup_ratio > 1.0:
        return best.mode
    return BASELINE if any(r.mode == BASELINE for r in fitting) else best.mode


def make_plan(inputs: PlanInputs) -> Plan:
    """Predict every mode at every concurrency (module doc for the formulas).

    Raises:
        ConfigError: invalid inputs (dtype unknown, FP8 on a GPU without FP8, bad lengths,
            a Medusa tree the accuracies do not cover).
    """
    check_inputs(inputs)
    rows = tuple(
        plan_row(inputs, m, b) for b in inputs.concurrencies for m in inputs.modes
    )
    recommended = {
        b: recommend([r for r in rows if r.concurrency == b])
        for b in inputs.concurrencies
    }
    spec_modes = [m for m in inputs.modes if m != BASELINE]
    cost_ratio = optimal = None
    if inputs.draft:
        d = inputs.draft
        cost_ratio = (
            forward_pass_cost(inputs, d.model, 1, 1).time_s
            / forward_pass_cost(inputs, inputs.target, 1, 1).time_s
        )
        optimal = optimal_draft_len(d.alpha, cost_ratio)
    return Plan(
        inputs, rows, recommended,
        {m: crossover_concurrency(inputs, m) for m in spec_modes},
        {m: max_fitting_concurrency(inputs, m) for m in inputs.modes},
        cost_ratio, optimal,
    )  # fmt: skip


def check_inputs(inputs: PlanInputs) -> None:
    """Validate what pydantic at the CLI cannot see (library callers too).

    Raises:
        ConfigError: naming the field and the fix.
    """
    for name, value in (("dtype", inputs.dtype), ("kv_dtype", inputs.kv_dtype)):
        if value not in DTYPE_BYTES and not (name == "kv_dtype" and value == "auto"):
            raise ConfigError(
                f"{name} {value!r} is not one of {', '.join(DTYPE_BYTES)}"
            )
    inputs.gpu.peak_flops_per_s(fp8=inputs.dtype == "fp8")
    if inputs.input_len < 1 or inputs.output_len < 1:
        raise ConfigError("input_len and output_len must be >= 1 token")
    if not inputs.concurrencies or min(inputs.concurrencies) < 1:
        raise ConfigError("concurrencies must be a non-empty list of integers >= 1")
    if not 0.0 < inputs.memory_fraction <= 1.0:
        raise ConfigError("memory_fraction must lie in (0, 1]")
    if inputs.draft:
        expected_tokens_per_step(inputs.draft.alpha, inputs.draft.draft_len)
    if inputs.medusa:
        check_medusa(inputs.medusa)


def check_medusa(medusa: MedusaSetup) -> None:
    """The tree is well formed, no deeper than the heads, and covered by the accuracies.

    Raises:
        ConfigError: naming the rule broken (``medusa_tree.validate_choices``).
    """
    validate_choices(medusa.choices, max_draft_len=None, num_heads=medusa.num_heads)
    _ = medusa.tokens_per_step  # raises when the accuracies miss a node
