"""What the roofline does not see: kernel-launch cost per pass and the speculation machinery.

A roofline pass (``planner.forward_pass_cost``) is the time the GPU needs to move the bytes or
do the FLOPs. Two costs come on top, and they decide where speculation stops paying:

* **Launch cost per forward pass** (:class:`LaunchCost`). A decoder layer runs on the order of
  a dozen kernels (norms, fused QKV GEMM, rotary embedding, attention, output GEMM, the
  all-reduces, gate/up GEMM, activation, down GEMM); a pass adds a few more (embedding, final
  norm, LM head, sampling). ``kernels = kernels_per_layer x layers + kernels_per_pass``.

  - With CUDA graphs (TensorRT-LLM's PyTorch backend, vLLM and SGLang by default for decode):
    one graph launch per pass, and each node still costs the GPU a small gap between
    kernels: ``pass = GPU time + graph_launch + kernels x node``, added because the gaps
    serialise with the kernels. NVIDIA's "Getting Started with CUDA Graphs" measures about
    3.4 µs per ~2.9 µs kernel inside a graph against 3.8 µs with stream launches, i.e. about
    0.5 µs per node (https://developer.nvidia.com/blog/cuda-graphs/).
  - Eager (no graphs): the host issues each kernel (4–6 µs per launch measured with CUDA 13;
    ~20 µs per PyTorch op including its dispatch, NVIDIA's Nsight Systems guide), running ahead
    of the GPU asynchronously, so the slower side sets the pace: ``pass = max(GPU time,
    kernels x launch)``. gpt-fast's Llama-7B on an A100 at batch 1 ran 25.5 tok/s eager and
    107 tok/s with CUDA graphs (pytorch.org blog "Accelerating Generative AI with PyTorch
    II: GPT, Fast"): launch-bound eager decoding is that large.

  ``trtbench plan --from-trace`` replaces the defaults by what ``trtbench analyze nsys`` measured
  on one decode step of the target (:func:`launch_from_steps`).

* **Achieved bandwidth** (MBU): a decode pass reads its bytes at a share of the HBM peak.
  gpt-fast reports 72 % model bandwidth utilisation for its CUDA-graph decode of Llama-7B on
  an A100 (pytorch.org blog "GPT, Fast"); the planner divides memory time by 0.72
  (``--bandwidth-efficiency``).

* **Compute efficiency** (``--compute-efficiency``): the share of the dense tensor peak a
  decode GEMM achieves once a pass is compute-bound (a verify of B x (K+1) tokens at large
  B); FLOP time is divided by it. It is one of the terms fitted per serving stack
  (``engines``), as is:

* **Speculation machinery** (:class:`Machinery`): what a step does besides the forwards —
  scheduling, sampling, KV bookkeeping of drafted and rolled-back tokens, tree masks,
  draft-input preparation. Every step pays ``sequence x B`` (per sequence: scheduling and
  sampling, the baseline's too); a speculative step adds ``pass x passes + token x B x q``:
  a fixed cost for each forward pass it launches (a draft model or EAGLE / MTP chain: K + 1
  passes; an EAGLE tree: depth + 1; Medusa and n-gram: 1) and a cost per verified token of
  each sequence (q = K + 1, tree nodes + 1). vLLM measured the machinery alone with K = 0
  (no drafts): +6.6 % TPOT at concurrency 2 and +21.6 % at 189 (vllm-project/vllm issue
  49548): a part per step and a part that grows with the sequences. The three coefficients
  differ from stack to stack (a draft loop captured in one CUDA graph, or a scheduler that
  expands every sequence into K + 1 rows); ``engines`` holds each stack's values, fitted on
  its own published rows.

* **Draft placement**: a draft model runs with its own tensor-parallel degree (``--draft-tp``;
  default the target's, as vLLM's ``draft_tensor_parallel_size`` and TensorRT-LLM's two-model
  mode do). At tp 8 a 1B draft pays two all-reduces per layer for very little compute; at tp
  1 its whole weights are read by one GPU, and no all-reduce is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.core.data_files import read_table_checked
from trtbench.core.errors import ConfigError
from trtbench.profiling.traces.launch_steps import WHOLE_TRACE
from trtbench.profiling.traces.schemas import STEP_SCHEMA

DEFAULT_KERNELS_PER_LAYER = 14.0
DEFAULT_KERNELS_PER_PASS = 8.0
DEFAULT_LAUNCH_US = 6.0
DEFAULT_GRAPH_LAUNCH_US = 20.0
DEFAULT_NODE_US = 0.5
DEFAULT_BANDWIDTH_EFFICIENCY = 0.72  # gpt-fast's MBU with CUDA graphs (module doc)
DEFAULT_HEAD_KERNELS = 3.0  # a Medusa head: its ResBlock GEMM, activation, LM-head GEMM


@dataclass(frozen=True)
class LaunchCost:
    """Kernel-launch cost of one forward pass (module doc).

    Attributes:
        cuda_graphs: decode passes replayed as CUDA graphs (else eager launches).
        kernels_per_layer: kernels one decoder layer runs.
        kernels_per_pass: kernels of a pass outside the layers (embedding, LM head, sampling).
        launch_us: host time of one eager launch (µs).
        graph_launch_us: time of one graph launch (µs).
        node_us: GPU-side cost of one graph node beyond its kernel (µs).
        source: where the figures come from (``defaults`` or the trace's path).
        kernel_us: the shortest GPU time of one kernel (µs): a pass takes at least
            ``kernels x kernel_us`` however few bytes each kernel moves (a stack's fitted
            term, ``engines``; 0: no floor).
    """

    cuda_graphs: bool = True
    kernels_per_layer: float = DEFAULT_KERNELS_PER_LAYER
    kernels_per_pass: float = DEFAULT_KERNELS_PER_PASS
    launch_us: float = DEFAULT_LAUNCH_US
    graph_launch_us: float = DEFAULT_GRAPH_LAUNCH_US
    node_us: float = DEFAULT_NODE_US
    source: str = "defaults"
    kernel_us: float = 0.0

    def kernels(self, layers: int) -> float:
        """Kernels of one pass of a model with ``layers`` decoder layers."""
        return self.kernels_per_layer * layers + self.kernels_per_pass

    def pass_s(self, layers: int, gpu_s: float) -> float:
        """Time of one pass (s) whose GPU work takes ``gpu_s`` (roofline + communication)."""
        kernels = self.kernels(layers)
        gpu_s = max(gpu_s, kernels * self.kernel_us * 1e-6)
        if self.cuda_graphs:
            return gpu_s + (self.graph_launch_us + kernels * self.node_us) * 1e-6
        return max(gpu_s, kernels * self.launch_us * 1e-6)

    def extra_kernels_s(self, kernels: float) -> float:
        """Cost of ``kernels`` more kernels inside a pass (graph nodes or eager launches)."""
        return kernels * (self.node_us if self.cuda_graphs else self.launch_us) * 1e-6

    def describe(self) -> str:
        """One line for the plan's header."""
        if self.cuda_graphs:
            how = (
                f"CUDA graphs: {self.graph_launch_us:g} µs per graph launch + "
                f"{self.node_us:g} µs per node"
            )
        else:
            how = f"eager: {self.launch_us:g} µs per launch, max(GPU, host)"
        return (
            f"launch cost ({self.source}): {self.kernels_per_layer:g} kernels per layer + "
            f"{self.kernels_per_pass:g} per pass, {how}"
        )


@dataclass(frozen=True)
class Machinery:
    """Speculation machinery and per-sequence step cost (µs; module doc): every step pays
    ``sequence_us x B``; a speculative step adds ``pass_us x passes + token_us x B x q``."""

    pass_us: float = 0.0
    token_us: float = 0.0
    sequence_us: float = 0.0

    def every_step_s(self, batch: int) -> float:
        """Seconds every step (any mode) pays at concurrency ``batch``."""
        return self.sequence_us * batch * 1e-6

    def speculative_s(self, batch: int, passes: int, verify_tokens: int) -> float:
        """Seconds a speculative step adds: ``passes`` forward passes, ``verify_tokens``
        verified per sequence."""
        return (self.pass_us * passes + self.token_us * batch * verify_tokens) * 1e-6


def check_overheads(
    launch: LaunchCost, machinery: Machinery, compute_efficiency: float = 1.0
) -> None:
    """Every figure ≥ 0, a compute efficiency in (0, 1].

    Raises:
        ConfigError: naming the option.
    """
    for flag, value in (
        ("--kernels-per-layer", launch.kernels_per_layer),
        ("--launch-us", launch.launch_us),
        ("--graph-launch-us", launch.graph_launch_us),
        ("--graph-node-us", launch.node_us),
        ("--kernel-us", launch.kernel_us),
        ("--machinery-pass-us", machinery.pass_us),
        ("--machinery-token-us", machinery.token_us),
        ("--sequence-us", machinery.sequence_us),
    ):
        if not np.isfinite(value) or value < 0:
            raise ConfigError(f"{flag} must be a number >= 0, got {value}")
    if not 0.0 < compute_efficiency <= 1.0:
        raise ConfigError(
            f"--compute-efficiency must lie in (0, 1], got {compute_efficiency}"
        )


def launch_from_steps(path: Path, target_layers: int) -> LaunchCost:
    """Launch cost measured on a decode-step trace of the target (``trtbench analyze``).

    Reads ``steps.csv`` or ``steps.parquet`` (``path``, or in the folder ``path``;
    docs/csv_schemas.md) and takes the
    medians over its steps that launched kernels: kernels per step (all of them counted as
    per-layer kernels: ``kernels / target_layers``, none per pass), graph mode when the median
    step made a graph launch, the host time per launch call (``launch_overhead_ns /
    launch_calls``: the graph launch with graphs, one launch eager) and, with graphs, the GPU
    idle time inside the step per kernel as the per-node cost.

    Raises:
        ConfigError: no such file, or no step that launched kernels.
        DataFileError: the file is not a steps table (its columns are checked).
    """
    path = Path(path)
    candidates = (
        [path / "steps.csv", path / "steps.parquet"] if path.is_dir() else [path]
    )
    file = next((f for f in candidates if f.is_file()), None)
    if not path.exists():
        raise ConfigError(
            f"--from-trace {path} does not exist; give the folder `trtbench analyze nsys "
            "REPORT.sqlite --out DIR` wrote (or its steps.csv)"
        )
    if file is None:
        ranks = sorted(
            f.parent.name
            for pattern in ("*/steps.csv", "*/steps.parquet")
            for f in (path.glob(pattern) if path.is_dir() else ())
        )
        if ranks:  # the top folder of a multi-rank analysis: one folder per rank
            raise ConfigError(
                f"--from-trace {path}: the per-rank analysis of {len(ranks)} trace(s); "
                f"give one rank's folder, e.g. {path / ranks[0]} (ranks: "
                f"{', '.join(dict.fromkeys(ranks))})"
            )
        raise ConfigError(
            f"--from-trace {path}: no steps.csv there; run `trtbench analyze nsys "
            "REPORT.sqlite --out DIR` on a decode-step capture of the target and give DIR"
        )
    fix = "give the steps.csv (or steps.parquet) that `trtbench analyze` wrote"
    steps = read_table_checked(file, STEP_SCHEMA, fix=fix)
    if (steps["s_name"].astype(str) == WHOLE_TRACE).all():
        raise ConfigError(
            f"--from-trace {file}: the trace has no decode steps (one whole-trace row: no "
            "step ranges, no graph launches), so its launch figures are not a step's; "
            "capture decode steps on a GPU (NVTX ranges decode_step#N, or CUDA-graph "
            "replays: `trtbench profile nsys -- CMD`) and analyze that"
        )
    steps = steps[pd.to_numeric(steps["kernels"], errors="coerce") > 0]
    if steps.empty:
        raise ConfigError(f"--from-trace {file}: no step launched a kernel; {fix}")

    def median(values: pd.Series) -> float:
        return float(pd.to_numeric(values, errors="coerce").median())

    kernels = median(steps["kernels"])
    graphs = median(steps["graph_launches"]) >= 1
    per_call_us = median(steps["launch_overhead_ns"] / steps["launch_calls"]) / 1e3
    node_us = median(steps["gpu_idle_ns"] / steps["kernels"]) / 1e3
    return LaunchCost(
        cuda_graphs=graphs,
        kernels_per_layer=kernels / target_layers,
        kernels_per_pass=0.0,
        launch_us=per_call_us if not graphs else DEFAULT_LAUNCH_US,
        graph_launch_us=per_call_us if graphs else DEFAULT_GRAPH_LAUNCH_US,
        node_us=node_us if graphs and np.isfinite(node_us) else DEFAULT_NODE_US,
        source=str(file),
    )


NO_LAUNCH = LaunchCost(
    kernels_per_layer=0.0,
    kernels_per_pass=0.0,
    graph_launch_us=0.0,
    node_us=0.0,
    source="none: pure roofline",
)
"""No launch cost: the pure roofline (``--no-overheads``; the planner before these terms)."""
NO_MACHINERY = Machinery()
"""No speculation machinery (``--no-overheads``)."""
PURE_ROOFLINE: dict[str, object] = {
    "launch": NO_LAUNCH,
    "machinery": NO_MACHINERY,
    "bandwidth_efficiency": 1.0,
    "compute_efficiency": 1.0,
    "serial_share": 0.0,
}
"""``PlanInputs`` keywords of the pure roofline (``--no-overheads``)."""
