"""What the planner is asked: model, GPUs, workload and the speculative setups, and their checks.

Modes are the methods (``core.methods``), each planned by the arithmetic it declares
(``Method.planner``, :func:`planner_of`): the reference (``baseline``), a draft model
(``draft_target``), heads + tree (``medusa``), and the chains (``eagle3``, ``mtp``, ``ngram``,
``suffix``: ``chain_modes``, ``chain_kinds``). Parallelism (``parallel``) splits every
model over ``tp * pp`` GPUs; the draft model and the heads are split over the same group.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import get_args

from trtbench.builders.medusa_tree import (
    Choices,
    expected_acceptance_length,
    validate_choices,
)
from trtbench.core.errors import ConfigError
from trtbench.core.methods import METHODS, method_of, names_where
from trtbench.core.methods.method import Planner
from trtbench.plan.calibration import Calibration
from trtbench.plan.chain_modes import ChainSetup, chain_tokens_per_step
from trtbench.plan.gpus import GpuSpec
from trtbench.plan.model_shapes import ModelShape
from trtbench.plan.overheads import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    NO_LAUNCH,
    NO_MACHINERY,
    LaunchCost,
    Machinery,
    check_overheads,
)
from trtbench.plan.parallel import Parallelism, check_parallelism, check_tp
from trtbench.plan.speculation import expected_tokens_per_step

DTYPE_BYTES = {
    "float16": 2.0,
    "bfloat16": 2.0,
    "fp8": 1.0,
    "fp4": 0.5625,  # NVFP4: 4 bits + one FP8 scale per 16 weights (4.5 bits)
    "int4": 0.515625,  # AWQ / GPTQ: 4 bits + one 16-bit scale per group of 128 (4.125 bits)
}
"""Bytes per weight (and per KV element) of each ``--dtype``."""
FOUR_BIT = ("fp4", "int4")
"""Weight types whose KV cache stays BF16 under ``--kv-dtype auto`` (4-bit weights, 16-bit
activations and cache, as AWQ deployments and NVFP4 checkpoints run)."""


REFERENCE_PLAN, DRAFT_MODEL_PLAN, MEDUSA_PLAN, CHAIN_PLAN = get_args(Planner)
"""The planner's arithmetics a method declares (``Method.planner``): the reference step (one
target pass per token), a draft model's γ passes + a verify, Medusa's heads + tree verify,
a chain of K drafts (``chain_modes``)."""
REFERENCE = names_where(planner=REFERENCE_PLAN)[0]
"""The reference row: every speedup is its TPOT over a mode's, the recommendation falls back
to it and ``--qps`` compares each mode with it at its own B. It is the method whose arithmetic
is the reference step (the one that drafts nothing): one row the planner means by name, not
a test of each mode (that is ``Method.drafts``)."""


def planner_of(mode: object) -> str | None:
    """The arithmetic ``mode`` is planned by (``Method.planner``; None: not a method)."""
    method = method_of(mode)
    return method.planner if method is not None else None


def drafts(mode: str) -> bool:
    """Whether ``mode`` drafts: every mode but the reference (``Method.drafts``; a chain of a
    name no method has, a library caller's, drafts too)."""
    method = method_of(mode)
    return method is None or method.drafts


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
    """Medusa heads, the tree they verify and per-head per-rank accuracies."""

    num_heads: int
    num_layers: int
    choices: Choices
    accuracies: tuple[tuple[float, ...], ...] = ()
    measured_tokens_per_step: float | None = None

    @property
    def tokens_per_step(self) -> float:
        """A measured E when given (``plan --from-run``), else the tree's expectation."""
        if self.measured_tokens_per_step is not None:
            return self.measured_tokens_per_step
        return expected_acceptance_length(self.choices, self.accuracies)


@dataclass(frozen=True)
class PlanInputs:
    """Everything the planner needs (lengths in tokens; overhead in ms per forward pass).

    ``engine``: the serving stack whose terms (``machinery``, ``compute_efficiency``,
    launch mode) were chosen (``engines``; empty: given directly).

    ``chains``: the chain methods' setups (EAGLE-3, MTP, n-gram, suffix decoding), one per
    mode. ``parallel``: the GPU group (default one GPU). ``overhead_bytes``: per-GPU memory
    held back for the runtime (CUDA context, NCCL buffers), on top of the modelled weights, KV
    and logits.
    ``calibration``: target passes measured on a device (``calibration``; None: roofline).
    """

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
    chains: tuple[ChainSetup, ...] = ()
    parallel: Parallelism = field(default_factory=Parallelism)
    overhead_bytes: float = 0.0
    launch: LaunchCost = field(default_factory=LaunchCost)
    machinery: Machinery = field(default_factory=Machinery)
    draft_tp: int | None = None
    bandwidth_efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY
    compute_efficiency: float = 1.0
    serial_share: float = 0.0
    engine: str = ""
    calibration: Calibration | None = None

    @property
    def pure_roofline(self) -> bool:
        """No launch cost, no machinery, full bandwidth (``--no-overheads``)."""
        return (
            self.launch == NO_LAUNCH
            and self.machinery == NO_MACHINERY
            and self.bandwidth_efficiency == 1.0
            and self.compute_efficiency == 1.0
            and self.serial_share == 0.0
        )

    @property
    def achieved_bandwidth_bytes_per_s(self) -> float:
        """HBM bandwidth x the achieved share (MBU): what a decode pass reads at (with a
        calibration: its effective bandwidth)."""
        if self.calibration is not None:
            return self.calibration.bandwidth_bytes_per_s(self.target)
        return self.gpu.hbm_bandwidth_bytes_per_s * self.bandwidth_efficiency

    @property
    def draft_parallel(self) -> Parallelism:
        """The draft model's GPU group: ``draft_tp`` GPUs (one stage), else the target's."""
        if self.draft_tp is None:
            return self.parallel
        return replace(self.parallel, tp=self.draft_tp, pp=1)

    @property
    def weight_bytes_per_param(self) -> float:
        return DTYPE_BYTES[self.dtype]

    @property
    def kv_bytes_per_element(self) -> float:
        if self.kv_dtype == "auto":
            return 2.0 if self.dtype in FOUR_BIT else DTYPE_BYTES[self.dtype]
        return DTYPE_BYTES[self.kv_dtype]

    @property
    def peak_flops_per_s(self) -> float:
        """Dense tensor peak of the weights' math: FP8 for fp8, FP4 for fp4, else BF16
        (int4 weights are dequantised to 16-bit math, W4A16)."""
        return self.gpu.peak_flops_per_s(
            fp8=self.dtype == "fp8", fp4=self.dtype == "fp4"
        )

    @property
    def achieved_flops_per_s(self) -> float:
        """The dense peak x the achieved share (``compute_efficiency``)."""
        return self.peak_flops_per_s * self.compute_efficiency

    @property
    def decode_context_len(self) -> float:
        return self.input_len + self.output_len / 2

    def set_up(self, mode: str) -> bool:
        """Whether ``mode`` is planned: the reference always, a draft-model or Medusa
        method with its setup given, a chain method with its chain (:meth:`chain`)."""
        plan = planner_of(mode)
        if plan == REFERENCE_PLAN:
            return True
        if plan == DRAFT_MODEL_PLAN:
            return self.draft is not None
        if plan == MEDUSA_PLAN:
            return self.medusa is not None
        return self.chain(mode) is not None

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes planned: those of :meth:`set_up` in the methods' order, the chains in
        the order of :attr:`chains`."""
        fixed = (m for m in METHODS if planner_of(m) != CHAIN_PLAN and self.set_up(m))
        return (*fixed, *(c.mode for c in self.chains))

    def chain(self, mode: str) -> ChainSetup | None:
        """The chain setup of ``mode`` (None when not planned)."""
        return next((c for c in self.chains if c.mode == mode), None)

    def draft_len_of(self, mode: str) -> int:
        """Extra tokens a sequence's KV holds during a step: γ, tree nodes or K (0: baseline)."""
        plan = planner_of(mode)
        if plan == DRAFT_MODEL_PLAN and self.draft:
            return self.draft.draft_len
        if plan == MEDUSA_PLAN and self.medusa:
            return len(self.medusa.choices)
        chain = self.chain(mode)
        return chain.verify_tokens - 1 if chain else 0


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
    _ = inputs.peak_flops_per_s  # raises for FP8 / FP4 on a GPU without them
    if inputs.input_len < 1 or inputs.output_len < 1:
        raise ConfigError("input_len and output_len must be >= 1 token")
    if not inputs.concurrencies or min(inputs.concurrencies) < 1:
        raise ConfigError("concurrencies must be a non-empty list of integers >= 1")
    if not 0.0 < inputs.memory_fraction <= 1.0:
        raise ConfigError("memory_fraction must lie in (0, 1]")
    par = inputs.parallel
    check_parallelism(par)
    check_tp(inputs.target, par.tp)
    check_overheads(inputs.launch, inputs.machinery, inputs.compute_efficiency)
    if not 0.0 < inputs.bandwidth_efficiency <= 1.0:
        raise ConfigError(
            f"--bandwidth-efficiency must lie in (0, 1], got {inputs.bandwidth_efficiency}"
        )
    if inputs.draft:
        expected_tokens_per_step(inputs.draft.alpha, inputs.draft.draft_len)
        draft_tp = inputs.draft_parallel.tp
        if draft_tp > par.gpus:
            raise ConfigError(
                f"--draft-tp {draft_tp} exceeds the {par.gpus} GPU(s) of the group; give "
                f"--draft-tp 1..{par.gpus}"
            )
        check_tp(
            inputs.draft.model,
            draft_tp,
            role="--draft",
            flag="--tp" if inputs.draft_tp is None else "--draft-tp",
            most=par.gpus,
        )
    elif inputs.draft_tp is not None:
        raise ConfigError("--draft-tp places a draft model; give --draft as well")
    if inputs.medusa:
        check_medusa(inputs.medusa)
    for chain in inputs.chains:
        chain_tokens_per_step(chain.rates)


def check_medusa(medusa: MedusaSetup) -> None:
    """The tree is well formed, no deeper than the heads, and covered by the accuracies.

    Raises:
        ConfigError: naming the rule broken (``medusa_tree.validate_choices``).
    """
    validate_choices(medusa.choices, max_draft_len=None, num_heads=medusa.num_heads)
    _ = medusa.tokens_per_step  # raises when the accuracies miss a node
