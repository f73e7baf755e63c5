"""``trtbench run --dry-run``: every check ``run`` makes before its first build, then the plan.

:func:`plan_run` runs :func:`~trtbench.pipeline.preflight.preflight_run` (spec, model
directories, every variant's build checks, prompts, ports, the run directory's permissions)
and the design check ``run`` makes before building
(:func:`~trtbench.pipeline.measuring.plan_design`), and returns what the run would do. It
builds nothing, starts nothing and leaves no run directory behind. What a real run needs and
this machine lacks (an NVIDIA GPU, ``tensorrt_llm``, the ``tritonserver`` / ``trtllm-serve``
executables, vLLM's interpreter, mpirun, nsys) does not fail it: the plan names each, so a
GPU spec can be checked on a laptop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trtbench.builders.trtllm.llmapi_build import (
    installed_trtllm,
    resolve_trtllm_version,
)
from trtbench.builders.trtllm.run import gpu_capabilities
from trtbench.core import methods, stacks
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.loadtest import tiers_of
from trtbench.pipeline.measuring import design_line, plan_design
from trtbench.pipeline.preflight import preflight_run
from trtbench.profiling.loadtest.workload.design import Cell
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.spec.bench import BenchSpec, VariantSpec
from trtbench.spec.design import ResolvedDesign
from trtbench.spec.llmapi import ENGINE_PATH_IMAGE
from trtbench.spec.serving import GET_TRTLLM_SERVE


@dataclass(frozen=True)
class RunPlan:
    """What ``trtbench run`` would do, every input checked.

    Attributes:
        spec: the validated spec (with the command line's overrides).
        run_dir: where the run would write (not created).
        variants: the selected variants, in spec order.
        design: the measurement design (rounds, server starts).
        cells: every (round, tier, variant) cell in run order (for ``rounds: auto``, the
            budget's most).
        prompts: the prompts a tier sends, checked against every variant's limits.
        needs: what a real run needs and this machine lacks, one sentence each.
        contract: for LLM-API variants, the TensorRT-LLM version their options were checked
            against and where that came from (None: no LLM-API variant).
    """

    spec: BenchSpec
    run_dir: RunDir
    variants: list[VariantSpec]
    design: ResolvedDesign
    cells: list[Cell]
    prompts: list[Prompt]
    needs: list[str]
    contract: str | None = None


def plan_run(
    spec: BenchSpec,
    run_dir: RunDir,
    variants: Sequence[str] = (),
    source: str | None = None,
) -> RunPlan:
    """Check ``spec`` as ``trtbench run`` does before its first build and plan the run.

    Args:
        spec: the validated bench spec.
        run_dir: where the run would write.
        variants: the variants to run (default: all).
        source: the spec file, named in front of a build check's message.

    Raises:
        ConfigError, ModelMismatchError, ServerStartError: as
            :func:`~trtbench.pipeline.preflight.preflight_run` and
            :func:`~trtbench.spec.design.resolve_design`, except a missing runtime piece
            (named in :attr:`RunPlan.needs` instead).
    """
    needs: list[str] = []
    prompts = preflight_run(spec, run_dir, variants, source, needs)
    selected = spec.select(tuple(variants))
    design, cells = plan_design(spec, selected)
    return RunPlan(
        spec,
        run_dir,
        selected,
        design,
        cells,
        prompts,
        missing_here(spec, selected) + needs,
        contract_line(spec, selected),
    )


def contract_line(spec: BenchSpec, variants: Sequence[VariantSpec]) -> str | None:
    """Which TensorRT-LLM version the LLM-API variants' options were checked against, and
    where it came from (``trtllm_version``, the installed tensorrt_llm, or the newest
    contract trtbench has — then the image's own version may differ); None without one."""
    if not any(stacks.backend(spec.backend_of(v)).llmapi for v in variants):
        return None
    chosen, _ = resolve_trtllm_version(spec)
    why = {
        "spec": "trtllm_version",
        "installed": "the tensorrt_llm installed here",
    }.get(chosen.source)
    if why is None:
        return (
            f"LLM-API options checked against TensorRT-LLM {chosen.version}, the newest "
            "contract (no tensorrt_llm here, no trtllm_version): set trtllm_version to "
            "the version in your image to check against that one"
        )
    return f"LLM-API options checked against TensorRT-LLM {chosen.version} ({why})"


def missing_here(spec: BenchSpec, variants: Sequence[VariantSpec]) -> list[str]:
    """The GPU and ``tensorrt_llm`` a real run of ``variants`` needs and this machine lacks
    (the executables are :func:`~trtbench.pipeline.preflight.preflight_run`'s).

    An NVIDIA GPU: TensorRT-LLM variants (the engine path, trtllm-serve, Triton's llmapi
    model with ``llmapi_runtime: tensorrt_llm``); not the reference engine or vLLM (which
    has a CPU build). ``tensorrt_llm`` importable here: engine builds and Triton's llmapi
    model.
    """
    on_trtllm = [v.name for v in variants if _runs_tensorrt_llm(spec, v)]
    importing = [
        v.name
        for v in variants
        if stacks.backend(spec.backend_of(v)).engines
        or (_runs_tensorrt_llm(spec, v) and stacks.server(v.server).model_repository)
    ]
    out = []
    if on_trtllm and not gpu_capabilities():
        out.append(
            f"an NVIDIA GPU for {_names(on_trtllm)} (TensorRT-LLM): NVML sees none here"
        )
    if importing and installed_trtllm()[0] is None:
        out.append(
            f"tensorrt_llm importable for {_names(importing)} (engine builds, Triton's "
            f"llmapi model): not installed here; run inside {ENGINE_PATH_IMAGE} or "
            f"{GET_TRTLLM_SERVE.removeprefix('run inside ')}"
        )
    return out


def _runs_tensorrt_llm(spec: BenchSpec, v: VariantSpec) -> bool:
    backend = stacks.backend(spec.backend_of(v))
    if backend.engines:
        return True
    reference_served = (
        stacks.server(v.server).model_repository
        and spec.deploy.llmapi_runtime == "reference"
    )
    return backend.llmapi and not reference_served


def _names(names: Sequence[str]) -> str:
    return f"variant{'s' if len(names) > 1 else ''} {', '.join(names)}"


def _method(v: VariantSpec) -> str:
    """The mode and what sets its drafts per step (a tree's name or size, else K)."""
    method = methods.METHODS[v.mode]
    if method.tree:
        tree = v.tree if isinstance(v.tree, str) else f"{len(v.tree)} nodes"
        return f"{v.mode}, tree {tree}"
    if method.has_draft_len:
        return f"{v.mode}, K={v.draft_len}"
    return v.mode


def render_run_plan(plan: RunPlan) -> str:
    """The plan as the terminal prints it: run directory, variants (mode, backend, server),
    tiers, design, cells, requests, prompts, and what a real run needs here."""
    spec, lt = plan.spec, plan.spec.loadtest
    tiers = [t.label for t in tiers_of(lt)]
    width = max(len(v.name) for v in plan.variants)
    per_round = sum(1 for c in plan.cells if c.round == 0)
    rounds = plan.design.rounds
    every = "at most " if plan.design.stop_when_decided else ""
    size = (
        f"{lt.tier_requests} requests"
        if lt.tier_requests is not None
        else f"{lt.duration_s:g} s of requests"
    )
    inputs = [p.input_tokens for p in plan.prompts]
    outputs = [p.output_tokens for p in plan.prompts]
    lines = [
        f"dry run of {spec.name}: every check passed; nothing was built, started or "
        "written",
        f"run dir: {plan.run_dir.root} (not created by a dry run)",
        f"variants ({len(plan.variants)}):",
        *(
            f"  {v.name:<{width}}  {_method(v):<22} backend {spec.backend_of(v)}, "
            f"server {v.server}"
            for v in plan.variants
        ),
        f"tiers ({len(tiers)}): {', '.join(tiers)}",
        design_line(plan.design, len(plan.variants), spec),
        f"cells: {per_round} per round ({len(plan.variants)} variants x {len(tiers)} "
        f"tiers), {every}{len(plan.cells)} in {every}{rounds} round(s)",
        f"requests per cell: {size}; {lt.warmup_requests} warm-up request(s) per server "
        "start",
        f"prompts: {len(plan.prompts)} checked against every variant's limits (input "
        f"{_span(inputs)} tokens, output {_span(outputs)} tokens)",
    ]
    if plan.contract:
        lines.append(plan.contract)
    if plan.needs:
        lines.append("a real run needs what this machine lacks:")
        lines += [f"  - {need}" for need in plan.needs]
    else:
        lines.append("a real run needs nothing this machine lacks")
    return "\n".join(lines)


def _span(values: Sequence[int]) -> str:
    low, high = min(values, default=0), max(values, default=0)
    return str(low) if low == high else f"{low}-{high}"
