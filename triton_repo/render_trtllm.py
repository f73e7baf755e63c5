"""The TensorRT-LLM inflight-batcher repository of an engine-path build (pure).

``ensemble`` (preprocessing → tensorrt_llm → postprocessing) with our own Python
pre/postprocessing; draft_target adds ``tensorrt_llm_draft`` and our ``tensorrt_llm_bls``,
which is the model to call (the layout of NVIDIA/TensorRT-LLM
``triton_backend/all_models/inflight_batcher_llm/``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trtbench.core import methods
from trtbench.core.errors import DeployError
from trtbench.spec.bench import DeploySpec
from trtbench.triton_repo import interface as io
from trtbench.triton_repo.interface import RepoMetadata
from trtbench.triton_repo.manifest_fields import (
    base_metadata,
    num_draft_tokens,
    variant_int,
)
from trtbench.triton_repo.pbtxt import (
    EnsembleStep,
    fill_template,
    medusa_brace,
    python_model_files,
    render_parameters,
    render_python_model,
    render_steps,
    render_tensors,
)

if TYPE_CHECKING:  # plain data handed over by the caller (build.json)
    from trtbench.builders.manifest import BuildManifest

EXECUTOR_WORKER = "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker"

# tensorrt_llm input ← ensemble tensor, for the optional request knobs passed through.
PASS_THROUGH = {
    "streaming": "stream",
    "exclude_input_in_output": "exclude_input_in_output",
    "min_tokens": "min_tokens",
    "seed": "seed",
    "temperature": "temperature",
    "runtime_top_k": "top_k",
    "runtime_top_p": "top_p",
    "len_penalty": "length_penalty",
    "repetition_penalty": "repetition_penalty",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "beam_width": "beam_width",
    "return_perf_metrics": "return_perf_metrics",
}
PERF_NAMES = [
    t.name for t in (*io.KV_PERF_OUTPUTS, *io.TIMING_OUTPUTS, *io.SPEC_PERF_OUTPUTS)
]


def ensemble_steps() -> list[EnsembleStep]:
    """preprocessing → tensorrt_llm → postprocessing, with the tensors each step maps."""
    return [
        EnsembleStep(
            "preprocessing",
            {
                "text_input": "text_input",
                "max_tokens": "max_tokens",
                "end_id": "end_id",
                "pad_id": "pad_id",
            },
            {
                "input_ids": "_INPUT_IDS",
                "input_lengths": "_INPUT_LENGTHS",
                "request_output_len": "_REQUEST_OUTPUT_LEN",
                "resolved_end_id": "_END_ID",
                "resolved_pad_id": "_PAD_ID",
            },
        ),
        EnsembleStep(
            "tensorrt_llm",
            {
                "input_ids": "_INPUT_IDS",
                "input_lengths": "_INPUT_LENGTHS",
                "request_output_len": "_REQUEST_OUTPUT_LEN",
                "end_id": "_END_ID",
                "pad_id": "_PAD_ID",
                **PASS_THROUGH,
            },
            {
                "output_ids": "_OUTPUT_IDS",
                "sequence_length": "_SEQUENCE_LENGTH",
                **{name: name for name in PERF_NAMES},
            },
        ),
        EnsembleStep(
            "postprocessing",
            {"output_ids": "_OUTPUT_IDS", "sequence_length": "_SEQUENCE_LENGTH"},
            {"text_output": "text_output", "token_ids": "output_ids"},
        ),
    ]


def trtllm_parameters(
    manifest: BuildManifest, engine_path: Path, deploy: DeploySpec, kv_fraction: float
) -> dict[str, str]:
    """Parameters of one tensorrt_llm model; unset ones keep the backend's defaults.

    Names and defaults: triton-inference-server/tensorrtllm_backend ``docs/model_config.md``.
    """
    graphs = manifest.cuda_graphs.requested and manifest.cuda_graphs.available
    max_batch = variant_int(manifest, "max_batch_size")
    params = {
        "max_beam_width": str(variant_int(manifest, "max_beam_width")),
        "FORCE_CPU_ONLY_INPUT_TENSORS": "no",
        "gpt_model_type": "inflight_fused_batching",
        "gpt_model_path": str(engine_path),
        "batch_scheduler_policy": "guaranteed_no_evict",
        "kv_cache_free_gpu_mem_fraction": f"{kv_fraction:g}",
        "enable_kv_cache_reuse": str(deploy.enable_kv_cache_reuse).lower(),
        "exclude_input_in_output": "true",
        "cuda_graph_mode": str(graphs).lower(),
        "cuda_graph_cache_size": str(
            (
                deploy.cuda_graph_cache_size
                if deploy.cuda_graph_cache_size is not None
                else max_batch
            )
            if graphs
            else 0
        ),
        "executor_worker_path": EXECUTOR_WORKER,
    }
    method = methods.method_of(manifest.mode)
    if method is not None and method.tree:  # Medusa's heads' tree
        if manifest.medusa is None:
            raise DeployError(
                f"build.json of {manifest.name} has no medusa section; rebuild the variant"
            )
        params["decoding_mode"] = "medusa"
        params["medusa_choices"] = medusa_brace(manifest.medusa.choices)
        params["multi_block_mode"] = "false"
    if deploy.gpu_device_ids:
        params["gpu_device_ids"] = ",".join(str(i) for i in deploy.gpu_device_ids)
    return params


def engine_path(manifest: BuildManifest, engine_dir: Path, role: str) -> Path:
    """Absolute engine dir of ``role`` (``target`` / ``draft``) from build.json.

    Raises:
        DeployError: build.json lists no engine for that role.
    """
    if role not in manifest.engines:
        raise DeployError(
            f"build.json of {manifest.name} lists no {role!r} engine (engines: "
            f"{sorted(manifest.engines)}); rebuild the variant with `trtbench build`"
        )
    return (engine_dir / manifest.engines[role]).resolve()


def render_tensorrt_llm(
    name: str, manifest: BuildManifest, params: dict[str, str], decoupled: bool
) -> str:
    """``config.pbtxt`` of one TensorRT-LLM C++ backend model."""
    return fill_template(
        "trtllm/tensorrt_llm.pbtxt",
        comment=f"TensorRT-LLM engine, variant {manifest.name} ({manifest.mode})",
        name=name,
        max_batch_size=variant_int(manifest, "max_batch_size"),
        decoupled=str(decoupled).lower(),
        inputs=render_tensors(io.TRTLLM_INPUTS),
        outputs=render_tensors(io.TRTLLM_OUTPUTS),
        parameters=render_parameters(params),
    )


def render_pipeline(manifest: BuildManifest, deploy: DeploySpec) -> dict[str, str]:
    """ensemble + our preprocessing / postprocessing Python models."""
    max_batch = variant_int(manifest, "max_batch_size")
    tok = {"tokenizer_dir": manifest.tokenizer_dir}
    common = {
        "max_batch_size": max_batch,
        "decoupled": False,
        "instance_count": deploy.instance_count,
    }
    pre = render_python_model(
        "preprocessing",
        "tokenizer",
        inputs=io.PREPROCESSING_INPUTS,
        outputs=io.PREPROCESSING_OUTPUTS,
        parameters={**tok, "add_special_tokens": "true"},
        **common,
    )
    post = render_python_model(
        "postprocessing",
        "detokenizer",
        inputs=io.POSTPROCESSING_INPUTS,
        outputs=io.POSTPROCESSING_OUTPUTS,
        parameters={**tok, "skip_special_tokens": "true"},
        **common,
    )
    ensemble = fill_template(
        "trtllm/ensemble.pbtxt",
        comment=f"preprocessing -> tensorrt_llm -> postprocessing, variant {manifest.name}",
        name="ensemble",
        max_batch_size=max_batch,
        inputs=render_tensors(io.REQUEST_INPUTS),
        outputs=render_tensors(io.ENSEMBLE_OUTPUTS),
        steps=render_steps(ensemble_steps()),
    )
    return {
        "ensemble/config.pbtxt": ensemble,
        **python_model_files("preprocessing", pre, "trtllm/preprocessing.py"),
        **python_model_files("postprocessing", post, "trtllm/postprocessing.py"),
    }


def render_bls(manifest: BuildManifest, deploy: DeploySpec) -> dict[str, str]:
    """Our draft-target BLS model over ``tensorrt_llm`` (target) and ``tensorrt_llm_draft``."""
    max_batch = variant_int(manifest, "max_batch_size")
    config = render_python_model(
        "tensorrt_llm_bls",
        "draft-target speculative decoding over tensorrt_llm + tensorrt_llm_draft",
        max_batch_size=max_batch,
        decoupled=True,
        inputs=(*io.REQUEST_INPUTS, *io.BLS_INPUTS),
        outputs=io.BLS_OUTPUTS,
        # ~one instance per concurrent request (TRT-LLM docs: about the max batch size)
        instance_count=max(deploy.instance_count, max_batch),
        parameters={
            "tokenizer_dir": manifest.tokenizer_dir,
            "tensorrt_llm_model_name": "tensorrt_llm",
            "tensorrt_llm_draft_model_name": "tensorrt_llm_draft",
            "num_draft_tokens": str(num_draft_tokens(manifest)),
            "add_special_tokens": "true",
        },
    )
    return python_model_files("tensorrt_llm_bls", config, "trtllm/tensorrt_llm_bls.py")


def render_trtllm(
    manifest: BuildManifest, engine_dir: Path, deploy: DeploySpec
) -> dict[str, str]:
    """The inflight-batcher repository for a TensorRT-LLM build (see module docstring).

    Raises:
        DeployError: eagle mode, a missing engine role or Medusa section.
    """
    if manifest.mode == methods.LEGACY_EAGLE:
        raise DeployError(
            f"variant {manifest.name}: mode eagle is not deployable by trtbench yet; "
            "use baseline, draft_target or medusa"
        )
    method = methods.method_of(manifest.mode)
    draft_target = method is not None and method.draft_engine
    fraction = deploy.kv_cache_free_gpu_mem_fraction / (2 if draft_target else 1)
    target = engine_path(manifest, engine_dir, "target")
    files = render_pipeline(manifest, deploy)
    files["tensorrt_llm/config.pbtxt"] = render_tensorrt_llm(
        "tensorrt_llm",
        manifest,
        trtllm_parameters(manifest, target, deploy, fraction),
        decoupled=not draft_target,
    )
    trt_models = ["tensorrt_llm"]
    if draft_target:
        draft = engine_path(manifest, engine_dir, "draft")
        draft_manifest = manifest.model_copy(update={"mode": "baseline"})
        files["tensorrt_llm_draft/config.pbtxt"] = render_tensorrt_llm(
            "tensorrt_llm_draft",
            manifest,
            trtllm_parameters(draft_manifest, draft, deploy, fraction),
            decoupled=False,
        )
        files.update(render_bls(manifest, deploy))
        trt_models.append("tensorrt_llm_draft")
    files[io.METADATA_NAME] = trtllm_metadata(manifest, trt_models).to_json()
    return files


def trtllm_metadata(manifest: BuildManifest, trt_models: list[str]) -> RepoMetadata:
    """What a client needs to drive a TensorRT-LLM repository."""
    method = methods.method_of(manifest.mode)
    draft_target = method is not None and method.draft_engine
    models = ["ensemble", "preprocessing", "postprocessing", *trt_models]
    if draft_target:
        models.append("tensorrt_llm_bls")
        inputs, outputs = (*io.REQUEST_INPUTS, *io.BLS_INPUTS), io.BLS_OUTPUTS
    else:
        inputs, outputs = io.REQUEST_INPUTS, io.ENSEMBLE_OUTPUTS
    perf = [t.name for t in outputs if t.name in PERF_NAMES]
    return RepoMetadata(
        **base_metadata(manifest),
        model_name="tensorrt_llm_bls" if draft_target else "ensemble",
        models=models,
        tensorrt_llm_models=trt_models,
        streaming=not draft_target,
        inputs=io.tensor_types(inputs),
        outputs=io.tensor_types(outputs),
        speculative_counts=method.engine_counts if method is not None else "none",
        perf_metrics_outputs=perf,
        extra_inputs={"num_draft_tokens": num_draft_tokens(manifest)}
        if draft_target
        else {},
        text_stream_exact=draft_target,
        batching={
            "strategy": "inflight_fused_batching",
            "max_batch_size": variant_int(manifest, "max_batch_size"),
        },
    )
