"""Analytic planner: predicted step time, tokens per step, speedup and memory per concurrency.

Formulas:

* Tokens per target step of a draft chain of length γ with per-token acceptance α
  (Leviathan et al. 2023, arXiv 2211.17192): ``E[N] = (1 - α^(γ+1)) / (1 - α)``.
* Wall-time gain with draft/target step cost ratio c and verify/target cost ratio v
  (Leviathan Thm 3.8 generalised): ``S = E[N] / (γ c + v)``; optimal γ maximises it.
* Medusa: ``E = 1 + Σ_nodes Π a_i(k_i)`` (Medusa paper, arXiv 2401.10774, App. C;
  ``medusa_tree.expected_acceptance_length``).
* Roofline of one forward pass over B sequences, each with T new tokens and context L,
  per GPU of a ``tp x pp`` group (``parallel`` module doc; tp = pp = 1: one GPU)::

      bytes = weights read(B*T) / tp + B * L * kv_bytes_per_token * ceil(kv_heads/tp) / kv_heads
      flops = (2 * matmul_params * B * T + 4 * layers * q_dim * B * T * L) / tp
      gpu   = max(bytes / (HBM bandwidth x MBU), flops / (dense peak x MFU)) + communication

  (weights read: all of a dense model; of a MoE model the shared part and the experts its
  B*T tokens touch, ``moe_shapes``; MFU: the stack's compute efficiency, ``overheads``.)
      time  = launch(gpu) + step overhead

      communication = 2 * layers * (latency + 2 (tp-1)/tp * B*T*hidden*2 B / link bandwidth)
                      + (pp - 1) * (latency + B*T*hidden*2 B / link bandwidth)

  (pp stages each do 1/pp of the work one after another, so bytes and FLOPs sum to the tp
  share.) Activations and KV writes are ignored. L is the mean context while decoding,
  ``input_len + output_len / 2``. MBU is the share of the HBM bandwidth a decode pass
  achieves (``overheads`` module doc; 1 for the pure roofline). ``launch(gpu)`` adds the pass's kernel-launch cost (CUDA
  graphs: graph launch + per-node cost; eager: max with the host's launch time;
  ``overheads`` module doc). With ``--calibration`` a target pass is the measured
  T(B, q) instead (``calibration`` module doc).
* Steps: baseline = target(B, 1); draft-target = γ draft(B, 1) + target(B, γ+1), the draft
  on its own ``--draft-tp`` group; Medusa = target(B, 1 + nodes) + heads (their weights read
  once, 2 FLOP per head parameter per sequence, 3 kernels per head); EAGLE-3 / MTP = K
  head(B, 1) + target(B, K+1); an EAGLE tree = head(B, 1) + (depth-1) head(B, top-k) +
  target(B, tokens+1); n-gram = B x lookup + target(B, K+1) (``chain_modes``). Every step
  adds ``sequence x B``, a speculative step the machinery ``pass x passes + token x B x q``
  (``overheads.Machinery``). Time per output token = step / tokens per step; speedup =
  baseline TPOT / TPOT.
* Memory per GPU: ``memory`` module doc.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from trtbench.core.errors import ConfigError
from trtbench.plan.calibration import calibrated_pass_s
from trtbench.plan.inputs import (
    DRAFT_MODEL_PLAN,
    DTYPE_BYTES,
    MEDUSA_PLAN,
    REFERENCE,
    REFERENCE_PLAN,
    DraftSetup,
    MedusaSetup,
    PlanInputs,
    check_inputs,
    check_medusa,
    drafts,
    medusa_head_params,
    planner_of,
)
from trtbench.plan.memory import (
    MemoryEstimate,
    estimate_memory,
    max_fitting_concurrency,
)
from trtbench.plan.model_shapes import ModelShape
from trtbench.plan.overheads import DEFAULT_HEAD_KERNELS
from trtbench.plan.parallel import Parallelism, communication_s, kv_share
from trtbench.plan.speculation import expected_tokens_per_step, optimal_draft_len

__all__ = [
    "DTYPE_BYTES",
    "REFERENCE",
    "DraftSetup",
    "MedusaSetup",
    "MemoryEstimate",
    "PlanInputs",
    "check_inputs",
    "check_medusa",
    "estimate_memory",
    "max_fitting_concurrency",
    "medusa_head_params",
]


@dataclass(frozen=True)
class PassCost:
    """Roofline cost of one forward pass on one GPU of the group (module doc).

    Attributes:
        bytes_moved: bytes one GPU reads, summed over the pipeline stages.
        flops: FLOPs one GPU does, summed over the stages.
        time_s: roofline time + communication + launch cost + step overhead (s).
        bound: ``memory`` or ``compute``.
        communication_s: the all-reduce and pipeline-send part of ``time_s`` (s).
        launch_s: the kernel-launch part of ``time_s`` (s).
    """

    bytes_moved: float
    flops: float
    time_s: float
    bound: str
    communication_s: float = 0.0
    launch_s: float = 0.0


def forward_pass_cost(
    inputs: PlanInputs,
    model: ModelShape,
    batch: int,
    new_tokens: int,
    par: Parallelism | None = None,
) -> PassCost:
    """Roofline of one pass of ``model`` over ``batch`` sequences × ``new_tokens`` on the
    group ``par`` (default the target's), with its launch cost (module doc)."""
    ctx, par = inputs.decode_context_len, par or inputs.parallel
    kv = model.kv_bytes_per_token(inputs.kv_bytes_per_element)
    kv_gpu = kv * kv_share(model, par.tp)  # one GPU's KV heads
    tokens = batch * new_tokens
    weights = model.read_params(tokens) * inputs.weight_bytes_per_param / par.tp
    moved = weights + batch * ctx * kv_gpu
    flops = (
        2 * model.matmul_params * tokens + 4 * model.layers * model.q_dim * tokens * ctx
    ) / par.tp
    t_mem = moved / inputs.achieved_bandwidth_bytes_per_s
    t_cmp = flops / inputs.achieved_flops_per_s
    bound = "memory" if t_mem >= t_cmp else "compute"
    comm = communication_s(par, model, batch, new_tokens)
    gpu = max(t_mem, t_cmp) + inputs.serial_share * min(t_mem, t_cmp) + comm
    with_launch = inputs.launch.pass_s(model.layers, gpu)
    cal = inputs.calibration
    if cal is not None and model is inputs.target:  # measured, launches included
        gpu = with_launch = calibrated_pass_s(cal, model, batch, new_tokens, ctx)
    time = with_launch + inputs.step_overhead_ms / 1e3
    return PassCost(moved, flops, time, bound, comm, with_launch - gpu)


@dataclass(frozen=True)
class StepEstimate:
    """One decoding step of one mode at one concurrency."""

    step_s: float
    tokens_per_step: float
    bound: str
    communication_s: float = 0.0


def _medusa_heads_s(inputs: PlanInputs, batch: int) -> float:
    """Medusa heads on one GPU: their weights read once, 2 FLOP per parameter per sequence."""
    m, tp = inputs.medusa, inputs.parallel.tp
    assert m is not None
    heads = medusa_head_params(inputs.target, m.num_heads, m.num_layers) / tp
    kernels = DEFAULT_HEAD_KERNELS * m.num_heads * m.num_layers
    return max(
        heads * inputs.weight_bytes_per_param / inputs.achieved_bandwidth_bytes_per_s,
        2 * heads * batch / inputs.achieved_flops_per_s,
    ) + inputs.launch.extra_kernels_s(kernels)


def estimate_step(inputs: PlanInputs, mode: str, batch: int) -> StepEstimate:
    """Predicted step time and tokens per step of ``mode`` at concurrency ``batch``.

    Raises:
        ConfigError: ``mode`` is not among ``inputs.modes``.
    """
    target, machinery = inputs.target, inputs.machinery
    every = machinery.every_step_s(batch)
    plan = planner_of(mode)  # the arithmetic the method declares (Method.planner)
    if plan == REFERENCE_PLAN:
        cost = forward_pass_cost(inputs, target, batch, 1)
        return StepEstimate(cost.time_s + every, 1.0, cost.bound, cost.communication_s)
    if plan == DRAFT_MODEL_PLAN and inputs.draft:
        d = inputs.draft
        draft = forward_pass_cost(inputs, d.model, batch, 1, inputs.draft_parallel)
        verify = forward_pass_cost(inputs, target, batch, d.draft_len + 1)
        step = d.draft_len * draft.time_s + verify.time_s + every
        step += machinery.speculative_s(batch, d.draft_len + 1, d.draft_len + 1)
        comm = d.draft_len * draft.communication_s + verify.communication_s
        e = expected_tokens_per_step(d.alpha, d.draft_len)
        return StepEstimate(step, e, verify.bound, comm)
    if plan == MEDUSA_PLAN and inputs.medusa:
        m = inputs.medusa
        q = 1 + len(m.choices)
        verify = forward_pass_cost(inputs, target, batch, q)
        step = verify.time_s + _medusa_heads_s(inputs, batch) + every
        step += machinery.speculative_s(batch, 1, q)
        return StepEstimate(
            step, m.tokens_per_step, verify.bound, verify.communication_s
        )
    chain = inputs.chain(mode)
    if chain is not None:
        q = chain.verify_tokens
        verify = forward_pass_cost(inputs, target, batch, q)
        drafting, comm = batch * chain.lookup_s, verify.communication_s
        passes = 1
        if chain.head is not None:
            first = forward_pass_cost(inputs, chain.head, batch, 1)
            later = forward_pass_cost(inputs, chain.head, batch, chain.tree_topk)
            drafting = first.time_s + (chain.draft_len - 1) * later.time_s
            comm += (
                first.communication_s + (chain.draft_len - 1) * later.communication_s
            )
            passes += chain.draft_len
        step = drafting + verify.time_s + every
        step += machinery.speculative_s(batch, passes, q)
        return StepEstimate(step, chain.tokens_per_step, verify.bound, comm)
    raise ConfigError(f"mode {mode!r} is not set up in this plan; give its options")


@dataclass(frozen=True)
class PlanRow:
    """Prediction for one mode at one concurrency (times in ms, memory in bytes per GPU)."""

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
    communication_ms: float = 0.0


def speedup_at(inputs: PlanInputs, mode: str, batch: int) -> float:
    """Baseline TPOT / ``mode`` TPOT at concurrency ``batch`` (1.0 for the baseline, the
    reference row)."""
    base = estimate_step(inputs, REFERENCE, batch)
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
        mode,
        batch,
        step.step_s * 1e3,
        step.tokens_per_step,
        tpot * 1e3,
        batch / tpot,
        speedup_at(inputs, mode, batch),
        step.bound,
        mem.weights_bytes,
        mem.extra_weights_bytes,
        mem.kv_cache_bytes,
        mem.total_bytes,
        mem.fits,
        step.communication_s * 1e3,
    )


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
    return REFERENCE if any(r.mode == REFERENCE for r in fitting) else best.mode


def make_plan(inputs: PlanInputs) -> Plan:
    """Predict every mode at every concurrency (module doc for the formulas).

    Raises:
        ConfigError: invalid inputs (dtype unknown, FP8 on a GPU without FP8, bad lengths,
            a Medusa tree the accuracies do not cover, a tp that does not divide the heads).
    """
    check_inputs(inputs)
    rows = tuple(
        plan_row(inputs, m, b) for b in inputs.concurrencies for m in inputs.modes
    )
    recommended = {
        b: recommend([r for r in rows if r.concurrency == b])
        for b in inputs.concurrencies
    }
    spec_modes = [m for m in inputs.modes if drafts(m)]
    cost_ratio = optimal = None
    if inputs.draft:
        d = inputs.draft
        cost_ratio = (
            forward_pass_cost(inputs, d.model, 1, 1, inputs.draft_parallel).time_s
            / forward_pass_cost(inputs, inputs.target, 1, 1).time_s
        )
        optimal = optimal_draft_len(d.alpha, cost_ratio)
    return Plan(
        inputs,
        rows,
        recommended,
        {m: crossover_concurrency(inputs, m) for m in spec_modes},
        {m: max_fitting_concurrency(inputs, m) for m in inputs.modes},
        cost_ratio,
        optimal,
    )
