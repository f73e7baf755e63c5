"""Render Triton's ``llmapi`` repository for a TensorRT-LLM LLM-API (PyTorch backend) build.

Layout (TensorRT-LLM ``triton_backend/all_models/llmapi``, facts in
:mod:`~trtbench.triton_repo.llmapi_interface`)::

    tensorrt_llm/config.pbtxt     python backend, the llmapi tensors, max_batch_size 0, decoupled
    tensorrt_llm/1/model.yaml     {model, backend: pytorch, **llm_api.yaml, triton_config}
    tensorrt_llm/1/model.py       who runs it (deploy.llmapi_runtime, below)
    trtbench.json                 RepoMetadata

``config.pbtxt`` also states ``max_batch_size: 0`` and ``decoupled: true`` although upstream
leaves them to ``auto_complete_config``: tritonserver runs with
``--disable-auto-complete-config`` here (and under ``launch_triton_server.py``), which skips
that hook; the values equal ``model.yaml``'s ``triton_config``, so an auto-complete that does
run sets nothing different.

Runtimes: ``tensorrt_llm`` copies every ``*.py`` of ``deploy.llmapi_model_dir/1/``
(TensorRT-LLM's ``model.py`` and the ``helpers.py`` it imports; GPU + TensorRT-LLM);
``reference`` uses trtbench's template ``llmapi_reference/model.py`` (the reference engine,
CPU or GPU) and its helper modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from trtbench.core import methods
from trtbench.core.errors import DeployError
from trtbench.spec.bench import DeploySpec
from trtbench.triton_repo import llmapi_interface as lio
from trtbench.triton_repo.interface import METADATA_NAME, RepoMetadata, tensor_types
from trtbench.triton_repo.manifest_fields import base_metadata, variant_int
from trtbench.triton_repo.pbtxt import python_model_files, render_python_model

if TYPE_CHECKING:  # plain data handed over by the caller (build.json)
    from trtbench.builders.manifest import BuildManifest

LLM_API_YAML = "llm_api.yaml"
REFERENCE_TEMPLATE = "llmapi_reference/model.py"
REFERENCE_CPU_THREADS = 1  # as render.REFERENCE_CPU_THREADS (measured there)


def read_llm_api_yaml(engine_dir: Path) -> dict[str, Any]:
    """``engine_dir/llm_api.yaml``: the LLM arguments ``trtbench build`` wrote (no ``model``).

    Raises:
        DeployError: missing, unreadable, not YAML or not a mapping.
    """
    path = engine_dir / LLM_API_YAML
    fix = "run `trtbench build` again for this variant"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DeployError(f"{path} is missing; {fix}") from None
    except (OSError, yaml.YAMLError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DeployError(f"{path} cannot be read ({first}); {fix}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise DeployError(f"{path} is not a mapping of LLM arguments; {fix}")
    return doc


def target_model(manifest: BuildManifest) -> str:
    """The target model dir: build.json ``models.target.path``, else
    ``tensorrt_llm.llm_args.model``, else the tokenizer dir (the target's, by design)."""
    files = manifest.models.get("target")
    if files is not None:
        return files.path
    extra = (manifest.model_extra or {}).get("tensorrt_llm") or {}
    model = (extra.get("llm_args") or {}).get("model")
    return str(model) if model else manifest.tokenizer_dir


def model_yaml(manifest: BuildManifest, engine_dir: Path) -> dict[str, Any]:
    """``tensorrt_llm/1/model.yaml`` as data: ``model`` and ``backend`` first, then the
    build's LLM arguments, then ``triton_config``."""
    args = read_llm_api_yaml(engine_dir)
    args.pop("triton_config", None)
    doc: dict[str, Any] = {"model": target_model(manifest), "backend": "pytorch"}
    doc.update(args)
    doc["triton_config"] = dict(lio.TRITON_CONFIG)
    return doc


def _runtime_files(deploy: DeploySpec, config: str) -> dict[str, str]:
    """config.pbtxt, model.py and what model.py imports, for the chosen runtime."""
    name = lio.LLMAPI_MODEL_NAME
    runtime = deploy.llmapi_runtime
    if runtime == "reference":
        return python_model_files(name, config, REFERENCE_TEMPLATE)
    source = deploy.llmapi_model_dir
    if source is None:
        raise DeployError(
            "deploy.llmapi_model_dir is not set: llmapi_runtime tensorrt_llm copies "
            "TensorRT-LLM's model.py from triton_backend/all_models/llmapi/tensorrt_llm; set "
            "deploy.llmapi_model_dir to that folder, or llmapi_runtime: reference"
        )
    version_dir = Path(source) / "1"
    if not (version_dir / "model.py").is_file():
        raise DeployError(
            f"deploy.llmapi_model_dir {source} has no 1/model.py; point it at "
            "TensorRT-LLM's triton_backend/all_models/llmapi/tensorrt_llm folder"
        )
    files = {f"{name}/config.pbtxt": config}
    for path in sorted(version_dir.glob("*.py")):
        try:
            files[f"{name}/1/{path.name}"] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise DeployError(
                f"{path} cannot be read ({exc}); check llmapi_model_dir"
            ) from None
    return files


def render_llmapi(
    manifest: BuildManifest, engine_dir: Path, deploy: DeploySpec
) -> dict[str, str]:
    """All files of the llmapi repository for one trtllm-pytorch variant.

    Args:
        manifest: the variant's build.json (backend ``trtllm-pytorch``).
        engine_dir: ``RUN_DIR/engines/<variant>`` holding ``llm_api.yaml``.
        deploy: deploy options (``llmapi_runtime``, ``llmapi_model_dir``, ``instance_count``,
            ``reference_device``).

    Returns:
        ``{path relative to the repository root: file text}``, including ``trtbench.json``.

    Raises:
        DeployError: ``llm_api.yaml`` missing or not a mapping; runtime ``tensorrt_llm``
            without ``llmapi_model_dir`` or with one lacking ``1/model.py``.
    """
    runtime = deploy.llmapi_runtime
    reference = runtime == "reference"
    params = (
        {"device": deploy.reference_device, "cpu_threads": str(REFERENCE_CPU_THREADS)}
        if reference
        else {}
    )
    config = render_python_model(
        lio.LLMAPI_MODEL_NAME,
        f"TensorRT-LLM llmapi model ({runtime} runtime), variant {manifest.name} "
        f"({manifest.mode})",
        max_batch_size=lio.TRITON_CONFIG["max_batch_size"],
        decoupled=lio.TRITON_CONFIG["decoupled"],
        inputs=lio.LLMAPI_INPUTS,
        outputs=lio.LLMAPI_OUTPUTS,
        # TensorRT-LLM's model needs gpu_device_ids per instance beyond one
        instance_count=deploy.instance_count if reference else 1,
        parameters=params,
    )
    doc = model_yaml(manifest, engine_dir)
    files = _runtime_files(deploy, config)
    files[f"{lio.LLMAPI_MODEL_NAME}/1/model.yaml"] = yaml.safe_dump(
        doc, sort_keys=False, default_flow_style=False
    )
    meta = RepoMetadata(
        **{
            **base_metadata(manifest),
            # the LLM API starts its own workers for TP/PP: one tritonserver process
            "world_size": 1,
        },
        model_name=lio.LLMAPI_MODEL_NAME,
        models=[lio.LLMAPI_MODEL_NAME],
        streaming=True,
        decoupled=True,
        inputs=tensor_types(lio.LLMAPI_INPUTS),
        outputs=tensor_types(lio.LLMAPI_OUTPUTS),
        output_ids=False,
        speculative_counts="none"
        if methods.drafts_nothing(manifest.mode)
        else "perf_metrics",
        perf_metrics_outputs=lio.perf_output_names(runtime),
        extra_inputs=dict(lio.REQUEST_EXTRAS),
        text_output="cumulative",
        runtime=runtime,
        batching={
            "strategy": "inflight" if reference else "llm_api",
            "max_batch_size": int(doc.get("max_batch_size") or 0)
            or variant_int(manifest, "max_batch_size"),
        },
    )
    files[METADATA_NAME] = meta.to_json()
    return files
