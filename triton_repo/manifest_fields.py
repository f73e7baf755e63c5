"""The build-manifest fields every repository layout needs (pure accessors).

Shared by the reference layout (:mod:`trtbench.triton_repo.render`) and the TensorRT-LLM
layout (:mod:`trtbench.triton_repo.render_trtllm`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trtbench.spec.bench import DEFAULT_DRAFT_LEN, VariantSpec

if TYPE_CHECKING:  # plain data handed over by the caller (build.json)
    from trtbench.builders.manifest import BuildManifest


def variant_int(manifest: BuildManifest, key: str) -> int:
    """An integer field of the manifest's variant (``max_batch_size`` …); absent or null:
    the bench spec's default for it (:class:`~trtbench.spec.bench.VariantSpec`)."""
    value = manifest.variant.get(key)
    return VariantSpec.model_fields[key].default if value is None else int(value)


def num_draft_tokens(manifest: BuildManifest) -> int:
    """Draft tokens per step K of a draft_target build (the spec's default when unset)."""
    return manifest.max_draft_len or DEFAULT_DRAFT_LEN


def base_metadata(manifest: BuildManifest) -> dict[str, Any]:
    """Metadata fields that come straight from build.json."""
    graphs = manifest.cuda_graphs
    return {
        "variant": manifest.name,
        "backend": manifest.backend,
        "mode": manifest.mode,
        "max_draft_len": manifest.max_draft_len,
        "medusa_choices": manifest.medusa.choices if manifest.medusa else None,
        "max_batch_size": variant_int(manifest, "max_batch_size"),
        "max_input_len": variant_int(manifest, "max_input_len"),
        "max_seq_len": variant_int(manifest, "max_seq_len"),
        "tokenizer_dir": manifest.tokenizer_dir,
        "world_size": variant_int(manifest, "tp_size")
        * variant_int(manifest, "pp_size"),
        "cuda_graphs": {
            "requested": graphs.requested,
            "enabled": graphs.requested and graphs.available,
            "reason": graphs.reason,
        },
    }
