"""The ``trtllm`` backend of ``trtbench build``: plan, check, (dry-run print | build), record.

:func:`build_trtllm_variant` is the backend function ``builders/build.py`` dispatches to.

1. Read the models' config.json (:func:`~trtbench.builders.trtllm.facts.read_model_facts`) and
   make the plan (:func:`~trtbench.builders.trtllm.plan.plan_variant`).
2. Check every call and command line against the TensorRT-LLM 1.2.1 contract, and the GPU's
   compute capability for FP8 when a GPU is visible — all before any GPU work.
3. ``dry_run``: return a manifest carrying the plan text (``dry_run_text``); write nothing.
   Otherwise: require tensorrt_llm (supported version) and a GPU, run the plan
   (:mod:`trtbench.builders.trtllm.run`), write ``engines/<variant>/build.json``.

``build.json`` for trtllm (the deploy stage reads only this): ``engines`` = role → engine dir
relative to ``engines/<variant>`` (``{"target": "."}``; draft_target
``{"target": "target", "draft": "draft"}``); ``tokenizer_dir`` = the target's HF dir;
``max_draft_len``; ``medusa`` = heads, layers, choices; ``cuda_graphs`` = requested /
available (a runtime knob of the C++ executor: always available) / reason; and a ``trtllm``
block (version, speculative mode per role, draft acceptance, logits, KV reuse, per-engine
build time, peak GPU memory and config.json summary).
``tensorrt_llm`` = ``{version, path: "engine", contract, installed}`` (the same block the
LLM-API path writes with ``path: "llm-api"``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trtbench.builders.manifest import (
    BuildManifest,
    CudaGraphs,
    MedusaInfo,
    ModelFiles,
    describe_model_dir,
    dir_bytes,
    host_info,
    library_versions,
    utc_now,
    write_manifest,
)
from trtbench.builders.trtllm.contract import (
    CONTRACT_FILE,
    Contract,
    check_build_argv,
    load_contract,
)
from trtbench.builders.trtllm.facts import read_model_facts
from trtbench.builders.trtllm.plan import (
    VariantPlan,
    engine_layout,
    plan_variant,
)
from trtbench.builders.trtllm.render import build_argv, render_plan
from trtbench.builders.trtllm.rules import check_draft_pair, check_engine
from trtbench.builders.trtllm.run import (
    StepResult,
    gpu_capabilities,
    require_trtllm,
    run_plan,
)
from trtbench.core import methods
from trtbench.core.errors import NotAvailableError
from trtbench.core.run_dir import RunDir
from trtbench.spec.bench import BenchSpec, VariantSpec

logger = logging.getLogger(__name__)

CUDA_GRAPHS_REASON = (
    "runtime knob of the TensorRT-LLM C++ executor (Triton tensorrt_llm parameters "
    "cuda_graph_mode / cuda_graph_cache_size; tensorrtllm_backend docs/model_config.md)"
)
TREE_ATTENTION = (
    "gpt_attention plugin speculative-decoding mode: the packed tree mask "
    "(ceil((max_draft_len+1)/32) int32 words per token), position offsets and generation "
    "lengths verify all draft tokens of a request in one pass"
)


def check_plan(
    plan: VariantPlan,
    contract: Contract,
    capability: tuple[int, int] | None = None,
) -> None:
    """Every engine's calls and trtllm-build command line against the contract.

    Raises:
        ConfigError: the first field or rule broken, with its fix.
    """
    for engine in plan.engines:
        check_engine(engine, contract, plan.name, capability)
        check_build_argv(build_argv(engine), contract)
    if methods.METHODS[plan.mode].draft_engine:
        check_draft_pair(plan.name, plan.engines)


def plan_and_check(
    spec: BenchSpec,
    variant: VariantSpec,
    out: RunDir,
    contract: Contract,
    gpus: list[tuple[str, tuple[int, int]]],
) -> VariantPlan:
    """Plan one variant and check it (CPU only; ``gpus`` from NVML, [] when none).

    Raises:
        ConfigError, ModelMismatchError: bad input, before any GPU work.
    """
    facts = read_model_facts(spec.models, {variant.mode})
    plan = plan_variant(variant, facts, out.engine_dir(variant.name).resolve())
    capability = min((cc for _, cc in gpus), default=None)
    check_plan(plan, contract, capability)
    return plan


def _models(
    plan: VariantPlan, spec: BenchSpec, describe: Callable[[Path], ModelFiles] | None
) -> dict[str, Any]:
    roles = {"target": spec.models.target, "draft": None, "medusa": None}
    if (own := methods.METHODS[plan.mode].models_dir) is not None:
        roles[own[0]] = getattr(spec.models, own[0])  # the dir its drafter loads
    return {
        role: None
        if path is None
        else (describe(path) if describe else ModelFiles(path=str(path)))
        for role, path in roles.items()
    }


def _trtllm_block(
    plan: VariantPlan, version: str, results: list[StepResult]
) -> dict[str, Any]:
    method = methods.METHODS[plan.mode]
    return {
        "version": version,
        "speculative_decoding_mode": {
            e.role: e.expect.speculative_decoding_mode for e in plan.engines
        },
        "tree_attention": TREE_ATTENTION if method.tree else None,
        "draft_acceptance": plan.draft_acceptance
        if method.owns("draft_acceptance")
        else None,
        "gather_generation_logits": {
            e.role: e.expect.gather_generation_logits for e in plan.engines
        },
        "kv_cache_reuse": all(
            e.expect.plugins.get("use_paged_context_fmha") for e in plan.engines
        ),
        "quantization": plan.quantization,
        "plan": "plan.json",
        "log": "build.log",
        "engines": {
            r.role: {
                "build_seconds": r.build_ns / 1e9,
                "peak_gpu_used_bytes": r.peak_gpu_used_bytes,
                "peak_gpu_delta_bytes": r.peak_gpu_delta_bytes,
                "config": asdict(r.summary),
            }
            for r in results
        },
    }


def make_manifest(
    plan: VariantPlan,
    spec: BenchSpec,
    variant: VariantSpec,
    *,
    version: str,
    results: list[StepResult],
    gpus: list[tuple[str, tuple[int, int]]],
    dry_run: bool,
    describe: Callable[[Path], ModelFiles] = describe_model_dir,
) -> BuildManifest:
    """The ``build.json`` of a plan (dry run: models not hashed, no sizes, no timings)."""
    medusa = None
    if plan.medusa_choices is not None:
        medusa = MedusaInfo(
            num_heads=plan.medusa_num_heads or 0,
            num_layers=plan.medusa_num_layers or 0,
            choices=[list(c) for c in plan.medusa_choices],
        )
    root = Path(plan.engine_root)
    return BuildManifest(
        backend="trtllm",
        variant=variant.model_dump(mode="json"),
        mode=plan.mode,
        max_draft_len=plan.max_draft_len,
        models=_models(plan, spec, None if dry_run else describe),
        tokenizer_dir=plan.tokenizer_dir,
        engines=engine_layout(plan),
        medusa=medusa,
        cuda_graphs=CudaGraphs(
            requested=plan.cuda_graphs, available=True, reason=CUDA_GRAPHS_REASON
        ),
        versions=library_versions(),
        host={**host_info(), "gpus": [f"{n} (sm {a}.{b})" for n, (a, b) in gpus]},
        build_seconds=sum(r.build_ns for r in results) / 1e9,
        bytes_on_disk=0 if dry_run else dir_bytes(root),
        created_at=utc_now(),
        trtllm=_trtllm_block(plan, version, results),
        tensorrt_llm={
            "version": version,
            "path": "engine",
            "contract": CONTRACT_FILE,
            "installed": None if dry_run else version,
        },
    )


def build_trtllm_variant(
    spec: BenchSpec,
    variant: VariantSpec,
    out: RunDir,
    *,
    dry_run: bool = False,
    describe: Callable[[Path], ModelFiles] = describe_model_dir,
) -> BuildManifest:
    """Plan, check and (unless ``dry_run``) build one variant with TensorRT-LLM.

    Args:
        spec: the bench spec (model dirs).
        variant: one of ``spec.variants``.
        out: the run directory; engines go to ``out/engines/<variant>/``.
        dry_run: only plan and check; the manifest's ``dry_run_text`` holds the LLM-API
            program and the equivalent command lines. Needs no tensorrt_llm and no GPU.
        describe: hashes a model directory (see ``manifest.ModelDescriber``).

    Returns:
        The manifest (written as build.json unless ``dry_run``).

    Raises:
        ConfigError, ModelMismatchError: bad spec or models (before any GPU work).
        NotAvailableError: tensorrt_llm missing or unsupported, or no GPU (real build only).
        BuildError: the build failed or the engine differs from the plan.
    """
    contract = load_contract()
    gpus = gpu_capabilities()
    plan = plan_and_check(spec, variant, out, contract, gpus)
    if dry_run:
        manifest = make_manifest(
            plan,
            spec,
            variant,
            version=contract.version,
            results=[],
            gpus=gpus,
            dry_run=True,
        )
        manifest.dry_run_text = render_plan(plan, contract)
        return manifest
    version = require_trtllm(contract)
    if not gpus:
        raise NotAvailableError(
            "no NVIDIA GPU is visible (NVML found none); build TensorRT-LLM engines on a "
            f"GPU machine inside {contract.image}, or use --backend reference"
        )
    results = run_plan(plan)
    manifest = make_manifest(
        plan,
        spec,
        variant,
        version=version,
        results=results,
        gpus=gpus,
        dry_run=False,
        describe=describe,
    )
    write_manifest(Path(plan.engine_root), manifest)
    return manifest
