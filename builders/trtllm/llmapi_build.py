"""The ``trtllm-pytorch`` backend of ``trtbench build``: LLM-API arguments, no engines.

On TensorRT-LLM's LLM-API path nothing is compiled: ``tensorrt_llm.LLM(model, backend="pytorch",
**args)`` loads the Hugging Face checkpoints when the server starts. A build therefore only
resolves the TensorRT-LLM version, checks the variant against that version's contract and
writes, into ``engines/<variant>/``:

- ``llm_api.yaml``: the LLM arguments without ``model`` — the ``extra_llm_api_options`` form
  that ``trtllm-serve`` (``--extra_llm_api_options``, newer ``--config``) and ``trtllm-bench``
  read, and the body of Triton's llmapi ``model.yaml``; for a ``server: trtllm-serve``
  variant with the counter options its contract lists (a warning names those it lacks:
  :func:`counters_unset`);
- ``build.json``: backend ``trtllm-pytorch``, the model dirs, and a ``tensorrt_llm`` block
  ``{version, version_source, path: "llm-api", contract, installed, module_path, llm_args}``.

Works on a CPU machine without tensorrt_llm. Version (:func:`resolve_trtllm_version`): the
spec's ``trtllm_version``, else the installed ``tensorrt_llm`` (package metadata, the module
is not imported), else the newest contract.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trtbench.builders.manifest import (
    BuildManifest,
    CudaGraphs,
    ModelFiles,
    describe_model_dir,
    host_info,
    library_versions,
    utc_now,
    write_manifest,
)
from trtbench.builders.trtllm.llmapi_contract import (
    LLMAPI_VERSIONS,
    LlmApiContract,
    load_llmapi_contract,
    newest_llmapi_version,
)
from trtbench.builders.trtllm.llmapi_files import unchecked_keys
from trtbench.builders.trtllm.llmapi_plan import (
    command_lines,
    counter_options,
    extra_options,
    llm_args_for,
    render_llm_call,
)
from trtbench.core import methods, stacks
from trtbench.core.errors import ConfigError
from trtbench.core.json_files import read_json_object
from trtbench.core.run_dir import RunDir, atomic_target
from trtbench.spec.bench import BenchSpec, VariantSpec

log = logging.getLogger(__name__)
OPTIONS_NAME = "llm_api.yaml"
PATH_NAME = "llm-api"


@dataclass(frozen=True)
class TrtllmVersion:
    """The TensorRT-LLM version an LLM-API plan targets and where that choice came from.

    ``source``: ``spec`` (``trtllm_version``), ``installed`` or ``newest contract``;
    ``installed`` / ``module_path``: the tensorrt_llm found here (None when absent).
    """

    version: str
    source: str
    installed: str | None
    module_path: str | None


def installed_trtllm() -> tuple[str | None, str | None]:
    """``(version, package dir)`` of the tensorrt_llm installed here, without importing it.

    Returns ``(None, None)`` when the module is not found.
    """
    try:
        found = importlib.util.find_spec("tensorrt_llm")
    except (ImportError, ValueError):
        found = None
    if found is None or found.origin is None:
        return None, None
    try:
        version: str | None = importlib.metadata.version("tensorrt_llm")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return version, str(Path(found.origin).parent)


def resolve_trtllm_version(
    spec: BenchSpec, installed: tuple[str | None, str | None] | None = None
) -> tuple[TrtllmVersion, LlmApiContract]:
    """The TensorRT-LLM version of the LLM-API plans and its contract.

    Args:
        spec: the bench spec (``trtllm_version``).
        installed: ``(version, dir)`` of the local tensorrt_llm (default:
            :func:`installed_trtllm`).

    Raises:
        ConfigError: the version has no contract (the message lists the contracts and says
            where the version came from).
    """
    have, where = installed if installed is not None else installed_trtllm()
    if spec.trtllm_version:
        chosen = TrtllmVersion(spec.trtllm_version, "spec", have, where)
    elif have:
        chosen = TrtllmVersion(have, "installed", have, where)
    else:
        chosen = TrtllmVersion(newest_llmapi_version(), "newest contract", None, None)
    if chosen.version not in LLMAPI_VERSIONS:
        origin = (
            "trtllm_version"
            if chosen.source == "spec"
            else f"the installed tensorrt_llm ({where})"
        )
        raise ConfigError(
            f"{origin}: TensorRT-LLM {chosen.version} has no LLM-API contract in trtbench; "
            f"set trtllm_version to one of {', '.join(LLMAPI_VERSIONS)}"
        )
    return chosen, load_llmapi_contract(chosen.version)


def _where(spec: BenchSpec, variant: VariantSpec) -> str:
    return f"variants[{spec.variants.index(variant)}]"


def _model_dir(path: Path, field: str, what: str) -> None:
    if not path.is_dir():
        raise ConfigError(f"{field}: {path} does not exist; set it to {what}")
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"{field}: {path} has no config.json; set it to {what} (save_pretrained layout)"
        )


def model_roles(spec: BenchSpec, variant: VariantSpec) -> dict[str, tuple[Path, str]]:
    """role → (model dir, the spec field naming it) of a trtllm-pytorch variant.

    A method's own checkpoint (``Method.needs_draft_model``) is the variant's
    ``speculative_model``, else its ``Method.models_dir``; its role is that dir's field
    (``draft``), or ``speculative_model`` for a method with none (EAGLE-3)."""
    roles = {"target": (spec.models.target, "models.target")}
    method = methods.METHODS[variant.mode]
    if not method.needs_draft_model:
        return roles
    own = method.models_dir[0] if method.models_dir else None
    if variant.speculative_model is not None:
        field = f"{_where(spec, variant)}.speculative_model"
        roles[own or "speculative_model"] = (variant.speculative_model, field)
    elif own is not None and getattr(spec.models, own) is not None:
        roles[own] = (getattr(spec.models, own), f"models.{own}")
    return roles


def plan_llmapi_variant(
    spec: BenchSpec, variant: VariantSpec, contract: LlmApiContract
) -> dict[str, Any]:
    """Check the variant's model dirs and return its checked LLM kwargs (CPU only).

    Raises:
        ConfigError: a model dir missing or without config.json (naming the field), or
            anything :func:`~trtbench.builders.trtllm.llmapi_plan.llm_args_for` refuses.
    """
    what = {
        "target": "the target model directory",
        "draft": "the draft model directory",
        "speculative_model": "the EAGLE-3 draft checkpoint dir",
    }
    for role, (path, field) in model_roles(spec, variant).items():
        _model_dir(path, field, what[role])
    config = read_json_object(
        spec.models.target / "config.json",
        missing_fix="point models.target at a model saved with save_pretrained",
        bad_fix="save the target model again with save_pretrained",
        label="models.target: ",
    )
    return llm_args_for(spec, variant, contract, config)


def _cuda_graphs(args: dict[str, Any]) -> CudaGraphs:
    config = args.get("cuda_graph_config")
    if config is None:
        return CudaGraphs(
            requested=False,
            available=False,
            reason="cuda_graph_config: null (CUDA graphs off)",
        )
    return CudaGraphs(
        requested=True,
        available=True,
        reason=f"cuda_graph_config {config}: TensorRT-LLM's PyTorch backend captures the "
        "decode step for these batch sizes when the LLM loads (GPU)",
    )


def _draft_len(args: dict[str, Any]) -> int | None:
    spec_config = args.get("speculative_config") or {}
    value = spec_config.get(
        "max_draft_len", spec_config.get("num_nextn_predict_layers")
    )
    return int(value) if value is not None else None


def dry_run_text(
    spec: BenchSpec,
    variant: VariantSpec,
    args: dict[str, Any],
    contract: LlmApiContract,
    out: RunDir,
) -> str:
    """The LLM(...) program and the trtllm-serve / trtllm-bench lines of one variant."""
    options = out.engine_dir(variant.name).resolve() / OPTIONS_NAME
    lines = command_lines(
        args, contract, options, spec.deploy.bind_address, spec.loadtest.dataset
    )
    return "\n".join(
        [
            f"# TensorRT-LLM {contract.version}, PyTorch backend (LLM API):",
            render_llm_call(args, contract),
            f"# {options} holds these arguments without model; serve or benchmark with:",
            *lines,
            *_caveats(args, contract, spec.loadtest.dataset is None),
            *[f"# {line}" for line in counters_unset(variant, args, contract)],
        ]
    )


def counters_unset(
    variant: VariantSpec, args: dict[str, Any], contract: LlmApiContract
) -> list[str]:
    """One line when a ``server: trtllm-serve`` variant's plan lacks a counter option its
    contract does not list (none when set by hand through ``llm_api_options``)."""
    counted = stacks.server(variant.server).llmapi_counters
    missing = counter_options(contract)[1] if counted else []
    missing = [name for name in missing if name not in args]
    if not missing:
        return []
    return [
        f"{', '.join(missing)}: not in trtbench's TensorRT-LLM {contract.version} "
        "contract, so not set; trtllm-serve's speculative counters need it: add "
        f"llm_api_options: {{{': true, '.join(missing)}: true}} to variant {variant.name} "
        "if this release has it (passed unchecked; on 1.3+ also return_perf_metrics: "
        "true for the per-position Prometheus counters)"
    ]


def _caveats(
    args: dict[str, Any], contract: LlmApiContract, no_dataset: bool
) -> list[str]:
    """Comment lines for what the printed plan rests on without having been read at the tag:
    an options flag or a config class name the contract marks unconfirmed, unchecked keys."""
    out = [
        f"# {tool} {entry['options_flag']}: not confirmed for {contract.version} "
        f"({entry.get('note', 'see the contract')})"
        for tool, entry in contract.raw.get("cli", {}).items()
        if not entry.get("confirmed", False)
    ]
    graph_spec = contract.raw["llm_args"].get("cuda_graph_config", {})
    graph_cls = str(graph_spec.get("type", "")).removeprefix("object:")
    note = contract.raw["classes"].get(graph_cls, {}).get("note")
    if args.get("cuda_graph_config") is not None and note:
        out.append(f"# {graph_cls}: {note}")
    if unchecked := unchecked_keys(args, contract):
        out.append(
            f"# not in trtbench's {contract.version} contract, passed unchecked: "
            + ", ".join(unchecked)
        )
    if no_dataset:
        out.append(
            "# <dataset.jsonl>: a trtllm-bench dataset (trtllm-bench prepare-dataset), or "
            "give loadtest.dataset"
        )
    return out


def write_options(path: Path, args: dict[str, Any], version: str, flag: str) -> None:
    """Write ``llm_api.yaml`` (the ``extra_llm_api_options`` form) atomically."""
    head = (
        f"# LLM(...) arguments for TensorRT-LLM {version} (PyTorch backend), written by "
        f"trtbench build.\n# trtllm-serve MODEL {flag} {path.name}; model: see build.json.\n"
    )
    body = yaml.safe_dump(
        extra_options(args), sort_keys=False, default_flow_style=False
    )
    with atomic_target(path) as tmp:
        tmp.write_text(head + body)


def build_llmapi_variant(
    spec: BenchSpec,
    variant: VariantSpec,
    out: RunDir,
    *,
    dry_run: bool = False,
    describe: Callable[[Path], ModelFiles] = describe_model_dir,
) -> BuildManifest:
    """Plan, check and (unless ``dry_run``) write one trtllm-pytorch variant.

    Args:
        spec: the bench spec.
        variant: one of ``spec.variants`` (its backend is trtllm-pytorch).
        out: the run directory; files go to ``out/engines/<variant>/``.
        dry_run: write nothing; the manifest's ``dry_run_text`` holds the LLM(...) call and
            the trtllm-serve / trtllm-bench command lines.
        describe: hashes a model directory (see ``manifest.ModelDescriber``).

    Returns:
        The manifest (written as build.json unless ``dry_run``).

    Raises:
        ConfigError: unknown version, bad model dirs, or a plan the contract refuses.
    """
    started = time.perf_counter_ns()
    version, contract = resolve_trtllm_version(spec)
    args = plan_llmapi_variant(spec, variant, contract)
    engine_dir = out.engine_dir(variant.name)
    models: dict[str, ModelFiles | None] = {
        role: ModelFiles(path=str(path)) if dry_run else describe(path)
        for role, (path, _) in model_roles(spec, variant).items()
    }
    if not dry_run:
        for line in counters_unset(variant, args, contract):  # a dry run prints it
            log.warning("%s", line)
        write_options(
            engine_dir / OPTIONS_NAME,
            args,
            version.version,
            contract.serve_options_flag,
        )
    manifest = BuildManifest(
        backend="trtllm-pytorch",
        variant=variant.model_dump(mode="json"),
        mode=variant.mode,
        max_draft_len=_draft_len(args),
        models=models,
        tokenizer_dir=str(spec.models.target),
        cuda_graphs=_cuda_graphs(args),
        versions=library_versions(),
        host=host_info(),
        build_seconds=(time.perf_counter_ns() - started) / 1e9,
        bytes_on_disk=0 if dry_run else (engine_dir / OPTIONS_NAME).stat().st_size,
        created_at=utc_now(),
        tensorrt_llm={
            "version": version.version,
            "version_source": version.source,
            "path": PATH_NAME,
            "contract": contract.file_name,
            "installed": version.installed,
            "module_path": version.module_path,
            "options_file": OPTIONS_NAME,
            "unchecked": unchecked_keys(args, contract),
            "llm_args": args,
        },
    )
    if dry_run:
        manifest.dry_run_text = dry_run_text(spec, variant, args, contract, out)
    else:
        write_manifest(engine_dir, manifest)
    return manifest
