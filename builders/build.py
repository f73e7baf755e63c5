"""Build every selected variant of a bench spec with its backend, and record it in run.json.

``build_variants`` is what ``trtbench build`` calls. Each backend is one function
``(spec, variant, out, *, dry_run, describe) -> BuildManifest``; :func:`backend_builder`
picks it per variant (``spec.backend_of(variant)``, or ``--backend`` for all). One
:class:`~trtbench.builders.manifest.ModelDescriber` serves all variants. Every variant is
checked (its backend's dry run, :func:`check_variants`) before the first one is built.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trtbench.builders.manifest import (
    BuildManifest,
    ModelDescriber,
    ModelFiles,
    host_info,
    library_versions,
    utc_now,
)
from trtbench.core import stacks
from trtbench.core.errors import ConfigError, ModelMismatchError
from trtbench.core.methods import METHODS
from trtbench.core.run_dir import RunDir
from trtbench.core.units import format_bytes
from trtbench.spec.bench import BenchSpec, VariantSpec
from trtbench.spec.llmapi import variant_backend_problem
from trtbench.spec.serving import trtllm_serve_problem

logger = logging.getLogger(__name__)

Builder = Callable[..., BuildManifest]


def backend_builder(backend: str) -> Builder:
    """The build function of ``backend`` (:attr:`~trtbench.core.stacks.Backend.build`,
    imported now: ``reference`` imports torch lazily).

    Raises:
        ConfigError: ``backend`` is no backend.
    """
    return stacks.load(stacks.backend(backend).build)


def check_variants(
    spec: BenchSpec,
    names: Sequence[str] = (),
    backend: str | None = None,
    out: RunDir | None = None,
    source: str | None = None,
) -> list[BuildManifest]:
    """Every check the build of the variants named (all when empty) makes, for all of them
    before any is built; nothing is written and no model file is hashed. Each backend's
    dry run is its checks: the reference backend's model directories (config, tokenizer,
    weights against config.json, draft and heads against the target, the Medusa tree),
    the engine-path and LLM-API plans.

    Args:
        spec, names, backend, out: as for :func:`build_variants`.
        source: the spec file, put in front of a message (``bench.yaml: variants[1]…``).

    Returns:
        One dry-run manifest per variant, in spec order (models without hashes).

    Raises:
        ConfigError, ModelMismatchError: the first variant that would fail, naming
            ``source``, the field and the fix; NotAvailableError as :func:`build_variants`.
    """
    out = out or RunDir(Path("runs") / spec.name)
    try:
        variants = spec.select(tuple(names))
        backends = {v.name: variant_backend(spec, v, backend) for v in variants}
        check_engine_path_version(
            spec, [v for v in variants if stacks.backend(backends[v.name]).engines]
        )
        check_llmapi_plans(
            spec, [v for v in variants if stacks.backend(backends[v.name]).llmapi]
        )
        return [
            backend_builder(backends[v.name])(
                spec, v, out, dry_run=True, describe=_unhashed
            )
            for v in variants
        ]
    except (ConfigError, ModelMismatchError) as exc:
        if source is None:
            raise
        raise type(exc)(f"{source}: {exc}") from None


def _unhashed(path: Path) -> ModelFiles:
    """A model directory described without reading its files (the check pass)."""
    return ModelFiles(path=str(path))


def build_variants(
    spec: BenchSpec,
    names: Sequence[str] = (),
    backend: str | None = None,
    out: RunDir | None = None,
    dry_run: bool = False,
    checked: bool = False,
    on_built: Callable[[BuildManifest], None] | None = None,
) -> list[BuildManifest]:
    """Build the variants named (all when empty) and record the build in ``run.json``;
    :func:`check_variants` runs first (unless ``checked``), so bad input of any variant
    fails before the first one is built.

    Args:
        spec: the validated bench spec.
        names: variant names to build, in any order (built in spec order).
        backend: ``reference``, ``trtllm`` or ``trtllm-pytorch`` for every variant
            (default: each variant's ``backend``, else the spec's).
        out: the run directory (default ``runs/<spec name>`` under the current directory).
        dry_run: validate and return the manifests without writing anything.
        checked: the caller ran :func:`check_variants` on the same arguments already.
        on_built: called with each variant's manifest as soon as it is built (progress).

    Returns:
        One manifest per variant, in spec order.

    Raises:
        ConfigError: unknown variant (known names listed) or invalid input.
        ModelMismatchError: draft or Medusa heads incompatible with the target.
        NotAvailableError: backend trtllm without TensorRT-LLM.
    """
    out = out or RunDir(Path("runs") / spec.name)
    variants = spec.select(tuple(names))
    backends = {v.name: variant_backend(spec, v, backend) for v in variants}
    if dry_run:
        check_engine_path_version(
            spec, [v for v in variants if stacks.backend(backends[v.name]).engines]
        )
    elif not checked:
        check_variants(spec, names, backend, out)
    started = utc_now()
    describe = ModelDescriber()
    manifests = []
    for v in variants:
        build = backend_builder(backends[v.name])
        manifests.append(build(spec, v, out, dry_run=dry_run, describe=describe))
        if on_built is not None:
            on_built(manifests[-1])
    if not dry_run:
        _record(spec, backend or spec.backend, out, manifests, started)
        for manifest in manifests:
            logger.info("%s", describe_build(manifest))
    return manifests


def variant_backend(spec: BenchSpec, variant: VariantSpec, override: str | None) -> str:
    """The backend ``variant`` is built with: ``override`` (``--backend``), else its own.

    A ``server: vllm`` variant is built with ``reference`` (its checks of the Hugging Face
    directories are what vLLM loads); a ``server: trtllm-serve`` one with
    ``trtllm-pytorch`` (its ``llm_api.yaml`` is what trtllm-serve reads).

    Raises:
        ConfigError: the variant cannot run on that backend (e.g. medusa on trtllm-pytorch,
            mtp on reference, server: vllm on trtllm, server: trtllm-serve on reference),
            naming the field and the fix.
    """
    chosen = override or spec.backend_of(variant)
    where = f"variants[{spec.variants.index(variant)}]"
    serving = stacks.server(variant.server)
    if serving.own_engine and chosen not in serving.backends:
        via = f" (--backend {override})" if override else ""
        checks = serving.backends[0]
        raise ConfigError(
            f"{where}.server: {serving.name} serves the Hugging Face directories of "
            f"models.*, which the {checks} build checks; backend {chosen}{via} builds for "
            f"Triton: set {where}.backend: {checks} or drop server: {serving.name}"
        )
    problem = trtllm_serve_problem(variant.server, chosen, where)
    if problem or (problem := variant_backend_problem(variant, chosen, where)):
        via = f" (--backend {override})" if override else ""
        raise ConfigError(f"{problem}{via}")
    return chosen


def check_llmapi_plans(spec: BenchSpec, variants: Sequence[VariantSpec]) -> None:
    """Plan and check every trtllm-pytorch variant (CPU only, nothing written), so bad input
    fails before the first variant is built.

    Raises:
        ConfigError: see :func:`~trtbench.builders.trtllm.llmapi_build.plan_llmapi_variant`.
    """
    if not variants:
        return
    from trtbench.builders.trtllm.llmapi_build import (
        plan_llmapi_variant,
        resolve_trtllm_version,
    )

    _, contract = resolve_trtllm_version(spec)
    for v in variants:
        plan_llmapi_variant(spec, v, contract)


def check_engine_path_version(spec: BenchSpec, variants: Sequence[VariantSpec]) -> None:
    """A spec whose ``trtllm_version`` has no TensorRT engine path (after 1.3.0rc20) cannot
    build engine-path variants: one container cannot hold both.

    Raises:
        ConfigError: names the first such variant, the last version with the path and the fix.
    """
    if not variants or spec.trtllm_version is None:
        return
    from trtbench.builders.trtllm.contract import load_contract, version_key

    last = str(load_contract().raw["supported"]["last"])
    have, limit = version_key(spec.trtllm_version), version_key(last)
    if have is not None and limit is not None and have > limit:
        index = spec.variants.index(variants[0])
        raise ConfigError(
            f"variants[{index}].backend: trtllm (the TensorRT engine path) is gone from "
            f"TensorRT-LLM {spec.trtllm_version} (trtllm_version; the last with it is {last}); "
            f"use trtllm_version: 1.2.1 for a spec with both paths, or backend: trtllm-pytorch"
        )


def _record(
    spec: BenchSpec,
    backend: str,
    out: RunDir,
    manifests: list[BuildManifest],
    started: str,
) -> None:
    """Merge this build into run.json's ``build`` section (earlier variants are kept)."""
    previous = out.read_run_json().get("build", {}).get("variants", {})
    variants = {
        **previous,
        **{
            m.name: {
                "mode": m.mode,
                "backend": m.backend,
                "max_draft_len": m.max_draft_len,
                "build_seconds": m.build_seconds,
                "bytes_on_disk": m.bytes_on_disk,
                "cuda_graphs": m.cuda_graphs.model_dump(),
                "tensorrt_llm": _trtllm_record(m),
                "built_at": m.created_at,
            }
            for m in manifests
        },
    }
    out.update_run_json(
        "build",
        {
            "backend": backend,
            "spec": spec.model_dump(mode="json"),
            "variants": variants,
            "versions": library_versions(),
            "host": host_info(),
            "started_at": started,
            "finished_at": utc_now(),
        },
    )


def _trtllm_record(manifest: BuildManifest) -> dict[str, Any] | None:
    """run.json's TensorRT-LLM facts of one variant: version and path (None: reference)."""
    block = (manifest.model_extra or {}).get("tensorrt_llm")
    if not isinstance(block, dict):
        return None
    keep = ("version", "path", "version_source", "installed", "module_path", "contract")
    return {k: block[k] for k in keep if k in block}


def describe_build(manifest: BuildManifest, dry_run: bool = False) -> str:
    """One line per variant: name, mode, draft size, bytes, seconds, CUDA graphs."""
    length = METHODS[manifest.mode].draft_length if manifest.mode in METHODS else "none"
    if length == "max_draft_len":
        draft = f"K={manifest.max_draft_len}"
    elif length == "num_nextn_predict_layers":
        draft = f"K={manifest.max_draft_len} (num_nextn_predict_layers)"
    elif length == "medusa_choices" and manifest.medusa is not None:
        depth = max(len(c) for c in manifest.medusa.choices)
        draft = (
            f"tree={len(manifest.medusa.choices)} nodes, depth {depth}, "
            f"max_draft_len={manifest.max_draft_len}"
        )
    else:
        draft = "no draft"
    graphs = manifest.cuda_graphs
    if not graphs.requested:
        cg = "cuda_graphs=off"
    elif graphs.available:
        cg = "cuda_graphs=on"
    else:
        cg = f"cuda_graphs=unavailable ({graphs.reason})"
    head = f"{manifest.name}: {manifest.backend} {manifest.mode}, {draft}"
    if dry_run:
        checked = (
            "plan passed the TensorRT-LLM contract checks"
            if stacks.backend(manifest.backend).tensorrt_llm
            else "inputs checked"
        )
        return f"would build {head}, {cg} ({checked}; nothing written)"
    unchecked = ((manifest.model_extra or {}).get("tensorrt_llm") or {}).get(
        "unchecked"
    )
    tail = (
        f"; passed unchecked (not in the contract): {', '.join(unchecked)}"
        if unchecked
        else ""
    )
    return (
        f"built {head}, {format_bytes(manifest.bytes_on_disk)} on disk, "
        f"{manifest.build_seconds:.2f} s, {cg}{tail}"
    )
