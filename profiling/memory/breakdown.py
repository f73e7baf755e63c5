"""Per-variant memory breakdown: weights, KV-cache pool and the peak seen in the load test.

:func:`memory_breakdown` is pure (plain data in → one DataFrame row per variant, written as
``memory_breakdown.csv`` through :data:`MEMORY_BREAKDOWN_SCHEMA`). :func:`load_variant_inputs`
is the only function here that reads files: a variant's ``build.json`` (as plain JSON; the
builders package is not imported), its models' ``config.json`` and weight-file sizes.

Definitions:

- **Weights** of a role (target, draft, medusa, eagle3): bytes of the model directory's weight
  files (``*.safetensors``, ``*.bin``, ``*.pt``, ``*.pth``, ``*.engine``), i.e. in the
  checkpoint's dtype; when the directory is not on this machine, ``models.<role>.bytes`` from
  build.json (which also counts config and tokenizer files) — ``weight_source`` says which.
  The EAGLE-3 checkpoint (the variant's ``speculative_model``) is ``models.eagle3`` in a
  reference build.json and ``models.speculative_model`` of an eagle3 variant in a
  trtllm-pytorch one (``builders/trtllm/llmapi_build.model_roles``).
- **KV bytes per token** of a decoder: ``2 × num_hidden_layers × num_key_value_heads ×
  head_dim × dtype_bytes`` — one K and one V vector per layer and KV head (grouped-query
  attention: ``num_key_value_heads`` defaults to ``num_attention_heads``; ``head_dim``
  defaults to ``hidden_size / num_attention_heads``), keys of the Hugging Face config
  (``LlamaConfig``). ``dtype_bytes`` is the KV-cache dtype when given (fp8 KV: 1), else the
  config's ``dtype``/``torch_dtype``. An EAGLE-3 draft's is that of its own config (one
  decoder layer: ``2 × 1 × its KV heads × head_dim × dtype_bytes``).
- **KV-cache pool**: ``max_blocks × tokens_per_block × KV bytes per token``, from TensorRT-LLM's
  ``nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=max|tokens_per}`` (NVIDIA/TensorRT-LLM
  ``triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/``; a block holds its tokens
  for every layer). The series whose ``model`` label contains ``draft`` belong to the draft
  model, the others to the target. An EAGLE-3 draft has no pool of its own: its layer's KV
  lives in the target's blocks (TensorRT-LLM's PyTorch backend, one-model EAGLE-3, its default:
  the KV cache manager gets the target's layers + ``get_num_spec_layers`` = the draft's,
  ``_torch/speculative/utils.py``; the reference engine sizes its one pool by target + draft
  bytes per token), so ``eagle3_kv_pool_bytes`` is its share of those blocks,
  ``target_kv_max_blocks × tokens_per_block × eagle3 KV bytes per token``, beside the target's
  share. A draft model without series of its own (the reference engine: one pool sized by
  target + draft bytes per token) has its share the same way: ``draft_kv_pool_bytes`` = the
  target's block tokens × the draft's KV bytes per token.
- **Peaks** over the readings of the load-test phases (``phase`` starting ``tier:``): device
  memory used (sum over GPUs per reading, NVML), the server tree's device memory (NVML
  per-process), and the tree's RSS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from trtbench.core import methods
from trtbench.core.data_files import check_json_fields, read_json_document
from trtbench.core.errors import ConfigError
from trtbench.core.export import conform, write_csv
from trtbench.core.json_files import read_json_object
from trtbench.core.run_dir import BUILD_JSON_SCHEMA_VERSION
from trtbench.profiling.memory.breakdown_schema import MEMORY_BREAKDOWN_SCHEMA
from trtbench.profiling.memory.server_metrics_views import kv_cache_blocks

ROLES = ("target", "draft", "medusa", "eagle3")
# build.json keys a role may be recorded under, in order (trtllm-pytorch: speculative_model)
MANIFEST_KEYS = {"eagle3": ("eagle3", "speculative_model")}
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".engine")
LOADTEST_PHASE_PREFIX = "tier:"
DTYPE_BYTES = {
    "float64": 8,
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "fp8": 1,
    "int8": 1,
}


@dataclass(frozen=True)
class VariantMemoryInputs:
    """What the breakdown of one variant needs, as plain data.

    Attributes:
        variant: variant name.
        mode: baseline | draft_target | medusa | eagle3 | ngram.
        weight_bytes: role → bytes (None or absent: the variant has no such role).
        weight_source: how ``weight_bytes`` were obtained (``files`` / ``build.json``).
        kv_bytes_per_token: role (target, draft, eagle3) → KV bytes per token (None:
            unknown).
        server_metrics: this variant's server-metrics rows (or None).
        memory: this variant's memory-sampler rows (or None).
    """

    variant: str
    mode: str = ""
    weight_bytes: Mapping[str, int | None] = field(default_factory=dict)
    weight_source: str = ""
    kv_bytes_per_token: Mapping[str, int | None] = field(default_factory=dict)
    server_metrics: pd.DataFrame | None = None
    memory: pd.DataFrame | None = None


def dtype_bytes(name: str) -> int:
    """Bytes per element of a dtype named like ``float16``, ``torch.bfloat16`` or ``fp8``.

    Raises:
        ConfigError: unknown dtype name.
    """
    key = name.removeprefix("torch.").lower()
    if key not in DTYPE_BYTES:
        raise ConfigError(
            f"unknown dtype {name!r} for KV bytes per token; pass the KV-cache dtype's size "
            f"(one of {sorted(DTYPE_BYTES)})"
        )
    return DTYPE_BYTES[key]


def kv_bytes_per_token(
    config: Mapping[str, Any], kv_dtype_bytes: int | None = None
) -> int:
    """KV-cache bytes per token of a decoder, from its Hugging Face config (formula above).

    Args:
        config: ``config.json`` as a dict (``num_hidden_layers``, ``num_attention_heads``,
            ``hidden_size``; optional ``num_key_value_heads``, ``head_dim``, ``dtype`` or
            ``torch_dtype``).
        kv_dtype_bytes: bytes per KV element; None takes the config's dtype.

    Raises:
        ConfigError: a required key or the dtype is missing.
    """
    missing = [
        k
        for k in ("num_hidden_layers", "num_attention_heads", "hidden_size")
        if k not in config
    ]
    if missing:
        raise ConfigError(f"model config lacks {missing}; it is not a decoder config")
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    if kv_dtype_bytes is None:
        dtype = config.get("dtype") or config.get("torch_dtype")
        if not dtype:
            raise ConfigError(
                "model config has no dtype/torch_dtype; pass the KV-cache dtype size"
            )
        kv_dtype_bytes = dtype_bytes(str(dtype))
    return 2 * int(config["num_hidden_layers"]) * kv_heads * head_dim * kv_dtype_bytes


def _kv_pools(
    server_metrics: pd.DataFrame | None, per_token: Mapping[str, int | None]
) -> dict[str, Any]:
    """KV pool columns from the KV block metrics (NA when the family was not scraped)."""
    out: dict[str, Any] = {"kv_source": ""}
    if server_metrics is None or server_metrics.empty:
        return out
    blocks = kv_cache_blocks(server_metrics)
    if blocks.empty:
        return out
    per_model = blocks.groupby("model")[["max_blocks", "tokens_per_block"]].max()
    out["kv_source"] = "server_metrics"
    is_draft = per_model.index.str.contains("draft")
    for role, mine in (("target", ~is_draft), ("draft", is_draft)):
        rows = per_model[mine].dropna()
        if rows.empty:
            continue
        out[f"{role}_kv_max_blocks"] = int(rows["max_blocks"].sum())
        if role == "target":
            out["kv_tokens_per_block"] = int(rows["tokens_per_block"].max())
        bpt = per_token.get(role)
        if bpt is not None:
            tokens = (rows["max_blocks"] * rows["tokens_per_block"]).sum()
            out[f"{role}_kv_pool_bytes"] = int(tokens) * int(bpt)
        if role != "target":
            continue
        tokens = int((rows["max_blocks"] * rows["tokens_per_block"]).sum())
        if per_token.get("eagle3") is not None:
            out["eagle3_kv_pool_bytes"] = tokens * int(per_token["eagle3"])
        if per_token.get("draft") is not None and not is_draft.any():
            # no draft series: the draft's KV shares the target's blocks (reference engine)
            out["draft_kv_pool_bytes"] = tokens * int(per_token["draft"])
    return out


def _peaks(memory: pd.DataFrame | None, prefix: str) -> dict[str, Any]:
    """Peak device / process / RSS memory over the load-test phases' readings."""
    if memory is None or memory.empty:
        return {}
    rows = memory[memory["phase"].astype(str).str.startswith(prefix)]
    if rows.empty:
        return {"peak_readings": 0}
    per_reading = rows.groupby("t_ns").agg(
        device=("mem_used_bytes", lambda s: s.sum(min_count=1)),
        proc=("proc_used_bytes", lambda s: s.sum(min_count=1)),
        rss=("rss_bytes", "first"),
    )
    sources = sorted(set(rows["source"].dropna().astype(str)))
    out: dict[str, Any] = {
        "memory_source": "+".join(sources),
        "peak_readings": len(per_reading),
    }
    for col, name in (("device", "device_used"), ("proc", "proc_used"), ("rss", "rss")):
        peak = pd.to_numeric(per_reading[col], errors="coerce").max()
        if pd.notna(peak):
            out[f"peak_{name}_bytes"] = int(peak)
    return out


def memory_breakdown(
    variants: Sequence[VariantMemoryInputs], phase_prefix: str = LOADTEST_PHASE_PREFIX
) -> pd.DataFrame:
    """One row per variant in :data:`MEMORY_BREAKDOWN_SCHEMA` order (definitions above).

    Args:
        variants: inputs per variant (see :func:`load_variant_inputs`).
        phase_prefix: phases whose readings count for the peaks.
    """
    rows = []
    for v in variants:
        weights = {r: v.weight_bytes.get(r) for r in ROLES}
        present = [b for b in weights.values() if b is not None]
        rows.append(
            {
                "variant": v.variant,
                "mode": v.mode,
                "target_weights_bytes": weights["target"],
                "draft_weights_bytes": weights["draft"],
                "medusa_heads_bytes": weights["medusa"],
                "eagle3_weights_bytes": weights["eagle3"],
                "weights_total_bytes": sum(present) if present else None,
                "weight_source": v.weight_source,
                "target_kv_bytes_per_token": v.kv_bytes_per_token.get("target"),
                "draft_kv_bytes_per_token": v.kv_bytes_per_token.get("draft"),
                "eagle3_kv_bytes_per_token": v.kv_bytes_per_token.get("eagle3"),
                **_kv_pools(v.server_metrics, v.kv_bytes_per_token),
                **_peaks(v.memory, phase_prefix),
            }
        )
    frame = pd.DataFrame(rows, columns=[c.name for c in MEMORY_BREAKDOWN_SCHEMA])
    frame = conform(frame, MEMORY_BREAKDOWN_SCHEMA)
    ints = [
        c
        for c in frame.columns
        if c.endswith(("_bytes", "_blocks", "_block", "_token"))
    ]
    return frame.astype({c: "Int64" for c in [*ints, "peak_readings"]})


def write_memory_breakdown_csv(frame: pd.DataFrame, path: Path) -> Path:
    """Write :func:`memory_breakdown`'s frame to ``path``."""
    return write_csv(frame, path, MEMORY_BREAKDOWN_SCHEMA)


def weight_file_bytes(model_dir: Path) -> int:
    """Bytes of the weight files (``WEIGHT_SUFFIXES``) anywhere under ``model_dir``."""
    return sum(
        p.stat().st_size
        for p in model_dir.rglob("*")
        if p.is_file() and p.suffix in WEIGHT_SUFFIXES
    )


def load_variant_inputs(
    build_json: Path,
    *,
    memory: pd.DataFrame | None = None,
    server_metrics: pd.DataFrame | None = None,
    kv_dtype_bytes: int | None = None,
) -> VariantMemoryInputs:
    """Gather a variant's breakdown inputs from its ``build.json`` and model directories.

    Args:
        build_json: ``engines/<variant>/build.json`` (keys used: ``variant.name``, ``mode``,
            ``models.<role>.path`` / ``.bytes``; eagle3: :data:`MANIFEST_KEYS`).
        memory, server_metrics: this variant's rows of the two timelines.
        kv_dtype_bytes: KV-cache element size when it differs from the model dtype.

    Raises:
        ConfigError: build.json is missing (the message says to rebuild), or a model's
            ``config.json`` is not a JSON object (the message names the file).
        DataFileError: build.json is not JSON (truncated), has a ``schema_version`` newer
            than this code reads, or a field used here of the wrong type.
    """
    fix = "run `trtbench build` again"
    if not build_json.is_file():
        raise ConfigError(f"build manifest {build_json} does not exist; {fix}")
    manifest = read_json_document(
        build_json, max_schema_version=BUILD_JSON_SCHEMA_VERSION, fix=fix
    )
    fields: dict[str | tuple[str, ...], type | tuple[type, ...]] = {
        "models": dict,
        "variant": dict,
        "mode": str,
    }
    keys = {r: MANIFEST_KEYS.get(r, (r,)) for r in ROLES}
    for key in {k for ks in keys.values() for k in ks}:
        fields[("models", key)] = dict
        fields[("models", key, "path")] = str
        fields[("models", key, "bytes")] = int
    check_json_fields(manifest, build_json, fields, fix=fix)
    method = methods.method_of(manifest.get("mode"))
    if method is None or method.drafter != "eagle3_head":
        keys["eagle3"] = ("eagle3",)  # speculative_model is an EAGLE-3 head's only
    models = manifest.get("models") or {}
    weights: dict[str, int | None] = {}
    per_token: dict[str, int | None] = {}
    source = "files"
    for role in ROLES:
        entry = next((models[k] for k in keys[role] if models.get(k)), None)
        if not entry:
            continue
        path = Path(entry.get("path", ""))
        if path.is_dir():
            weights[role] = weight_file_bytes(path)
        else:
            weights[role], source = entry.get("bytes"), "build.json"
        config = path / "config.json"
        if role != "medusa" and config.is_file():
            field = "speculative_model" if role == "eagle3" else f"models.{role}"
            hf_config = read_json_object(
                config,
                label=f"{role} model config ",
                missing_fix=fix,
                bad_fix=f"fix it or point {field} at a model directory, then {fix}",
            )
            per_token[role] = kv_bytes_per_token(hf_config, kv_dtype_bytes)
    return VariantMemoryInputs(
        variant=str(
            (manifest.get("variant") or {}).get("name") or build_json.parent.name
        ),
        mode=str(manifest.get("mode", "")),
        weight_bytes=weights,
        weight_source=source,
        kv_bytes_per_token=per_token,
        server_metrics=server_metrics,
        memory=memory,
    )
