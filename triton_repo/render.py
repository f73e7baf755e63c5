"""Render a Triton model repository from a build manifest and deploy options (pure).

``render_repository(manifest, engine_dir, deploy)`` returns ``{relative path: text}``; the
caller writes it (``write.py``). Layouts (NVIDIA/TensorRT-LLM ``triton_backend/all_models/``):

- ``reference``: one decoupled Python-backend model ``ensemble`` running the PyTorch
  reference engine, with the TensorRT-LLM ensemble's tensor names (``interface.py``); here.
- ``trtllm``: the inflight-batcher layout, in :mod:`trtbench.triton_repo.render_trtllm`.
- ``trtllm-pytorch``: TensorRT-LLM's ``llmapi`` layout (one Python model ``tensorrt_llm``
  reading ``model.yaml``), in :mod:`trtbench.triton_repo.render_llmapi`.

Every repository also gets ``trtbench.json`` (:class:`~.interface.RepoMetadata`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trtbench.core import methods, stacks
from trtbench.spec.bench import DeploySpec
from trtbench.triton_repo import interface as io
from trtbench.triton_repo.interface import RepoMetadata
from trtbench.triton_repo.manifest_fields import base_metadata, variant_int
from trtbench.triton_repo.pbtxt import python_model_files, render_python_model

if TYPE_CHECKING:  # plain data handed over by the caller (build.json)
    from trtbench.builders.manifest import BuildManifest

# torch intra-op threads of the reference model on CPU: the tiny models' matrices gain
# nothing from more, and on 2 shared cores 2 threads were measured to collapse throughput
# (scripts/bench_reference.py).
REFERENCE_CPU_THREADS = 1


def render_reference(
    manifest: BuildManifest, engine_dir: Path, deploy: DeploySpec
) -> dict[str, str]:
    """The reference repository: one Python model ``ensemble`` (see module docstring)."""
    config = render_python_model(
        "ensemble",
        f"reference engine, variant {manifest.name} ({manifest.mode})",
        max_batch_size=variant_int(manifest, "max_batch_size"),
        decoupled=True,
        inputs=io.REQUEST_INPUTS,
        outputs=io.REFERENCE_OUTPUTS,
        instance_count=deploy.instance_count,
        parameters={
            "engine_dir": str(engine_dir.resolve()),
            "device": deploy.reference_device,
            "add_special_tokens": "true",
            "cpu_threads": str(REFERENCE_CPU_THREADS),
        },
    )
    speculative = not methods.drafts_nothing(manifest.mode)
    meta = RepoMetadata(
        **base_metadata(manifest),
        model_name="ensemble",
        models=["ensemble"],
        streaming=True,
        inputs=io.tensor_types(io.REQUEST_INPUTS),
        outputs=io.tensor_types(io.REFERENCE_OUTPUTS),
        speculative_counts="per_response" if speculative else "none",
        perf_metrics_outputs=[
            t.name for t in (*io.TIMING_OUTPUTS, *io.SPEC_PERF_OUTPUTS)
        ],
        batching={
            "strategy": "inflight",
            "max_batch_size": variant_int(manifest, "max_batch_size"),
            "prefill": "one forward per admitted request, between decode steps",
            "cpu_threads": REFERENCE_CPU_THREADS,
        },
    )
    files = python_model_files("ensemble", config, "reference/model.py")
    files[io.METADATA_NAME] = meta.to_json()
    return files


def render_repository(
    manifest: BuildManifest, engine_dir: Path, deploy: DeploySpec
) -> dict[str, str]:
    """All files of the model repository for one built variant.

    Args:
        manifest: the variant's build.json (``trtbench.builders.manifest.BuildManifest``).
        engine_dir: ``RUN_DIR/engines/<variant>`` (engine paths in build.json are relative
            to it).
        deploy: deploy options of the bench spec.

    Returns:
        ``{path relative to the repository root: file text}``, including ``trtbench.json``.

    Raises:
        DeployError: the manifest lacks what its mode needs (draft engine, Medusa tree) or
            asks for a mode this deployer does not serve.
    """
    render = stacks.load(stacks.backend(manifest.backend).repository)
    return render(manifest, engine_dir, deploy)
