"""Load a reference engine: models, tokenizer, Medusa heads, device, dtype and CUDA graphs.

:func:`make_engine` assembles an engine from loaded models (tests and benchmarks share
models between engines); :func:`engine_from_manifest` loads everything a ``build.json``
names and checks that the model files still have the sizes recorded at build time;
:func:`load_engine` does both from an engine directory.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoTokenizer, PreTrainedModel

from trtbench.builders.manifest import BuildManifest, CudaGraphs, read_manifest
from trtbench.builders.reference.adaptive import DraftLenPolicy
from trtbench.builders.reference.decoding import BaselineDecoder
from trtbench.builders.reference.engine import ReferenceEngine
from trtbench.builders.reference.hf_load import (  # noqa: F401  (re-exported)
    SHOWN_KEYS,
    from_pretrained_checked,
    load_causal_lm,
    weight_problems,
)
from trtbench.builders.reference.kv_blocks import (
    KvBlockPool,
    KvCacheSettings,
    pool_blocks,
    slot_cache_bytes_per_token,
)
from trtbench.builders.reference.methods.parts import DecoderParts, decoder_for
from trtbench.builders.reference.ngram import NgramSettings
from trtbench.builders.reference.runner import ModelRunner
from trtbench.core import stacks
from trtbench.core.errors import BuildError, NotAvailableError
from trtbench.spec.speculation import ngram_window

logger = logging.getLogger(__name__)

_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` → ``cuda`` when torch sees a GPU, else ``cpu``.

    Raises:
        NotAvailableError: a CUDA device is asked for and torch sees none.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise NotAvailableError(
            f"device {device!r} needs CUDA but torch {torch.__version__} sees no GPU; "
            "use --device cpu or run on a GPU machine with a CUDA build of torch"
        )
    return dev


def resolve_dtype(name: str, device: torch.device, model_dir: Path) -> torch.dtype:
    """``auto`` → float32 on CPU; on CUDA the checkpoint's dtype (float32 if it names none)."""
    if name != "auto":
        return _DTYPES[name]
    if device.type != "cuda":
        return torch.float32
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    saved = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if isinstance(saved, str):
        saved = _DTYPES.get(saved)
    return saved if isinstance(saved, torch.dtype) else torch.float32


def _capture(decoder: BaselineDecoder, requested: bool) -> CudaGraphs:
    """Capture the decode step of every runner when asked and possible; say why not."""
    device = decoder.target.device
    if not requested:
        return CudaGraphs(requested=False, available=False, reason="not requested")
    if device.type != "cuda":
        return CudaGraphs(
            requested=True,
            available=False,
            reason=f"no CUDA device (engine on {device}, torch {torch.__version__}); "
            "the decode step runs eagerly",
        )
    runners = dict(zip(("target", "draft"), decoder.runners(), strict=False))
    try:
        for role, lengths in decoder.step_lengths().items():
            runners[role].capture(lengths)
    except Exception as exc:  # any capture failure falls back to eager, recorded
        logger.warning("CUDA graph capture failed, running eagerly: %s", exc)
        for runner in runners.values():
            runner.drop_graphs()
        return CudaGraphs(
            requested=True,
            available=False,
            reason=f"capture failed ({type(exc).__name__}: {exc}); running eagerly",
        )
    shapes = ", ".join(
        f"{role} q={list(lengths)}" for role, lengths in decoder.step_lengths().items()
    )
    return CudaGraphs(
        requested=True,
        available=True,
        reason=f"decode step captured for batch 1..{decoder.slots} ({shapes}); the "
        "prefill and Medusa heads run eagerly",
    )


def make_engine(
    mode: str,
    target: PreTrainedModel,
    tokenizer: object,
    *,
    max_seq_len: int,
    max_input_len: int,
    draft: PreTrainedModel | None = None,
    draft_len: int = 4,
    heads: nn.Module | None = None,
    choices: list[list[int]] | None = None,
    cuda_graphs: bool = False,
    max_batch_size: int = 1,
    ngram: NgramSettings | None = None,
    max_concurrency: int | None = None,
    draft_len_schedule: Mapping[int, int] | None = None,
    kv_cache: KvCacheSettings | None = None,
    eagle3: nn.Module | None = None,
    variant: Mapping[str, Any] | None = None,
) -> ReferenceEngine:
    """Assemble an engine from loaded models (all on one device and dtype).

    Args:
        mode: ``baseline``, ``draft_target`` (needs ``draft``), ``medusa`` (needs
            ``heads`` and ``choices``, a prefix-closed tree no deeper than the heads) or
            ``ngram`` (prompt lookup, no extra model; ``ngram``: its window, default 1..2)
            or ``eagle3`` (needs ``eagle3``, an ``eagle3.Eagle3Draft`` over ``target``).
        target, tokenizer: the target model and its tokenizer.
        max_seq_len, max_input_len: per-request limits (tokens).
        draft_len: K for draft_target, ngram and eagle3.
        cuda_graphs: capture the decode step with CUDA graphs (CUDA devices only).
        max_batch_size: sequences decoded together (batch slots of every KV cache).
        max_concurrency, draft_len_schedule: adaptive speculation (``adaptive.py``);
            medusa takes ``max_concurrency`` only.
        kv_cache: the KV block budget (``kv_blocks.py``; None: 32-token blocks, as many as
            the slot cache holds, never short).
        variant: the built variant (build.json's), where a method reads its own fields.

    The decoder is the method's own (``Method.reference_decoder``, a factory of
    ``builders/reference/methods/``).

    Raises:
        BuildError: a model the mode needs is missing, the mode is unknown, or a
            schedule does not fit ``draft_len``.
        ConfigError: a KV budget smaller than one request at ``max_seq_len``.
    """

    def runner(model: PreTrainedModel, widest: int) -> ModelRunner:
        return ModelRunner(model, max_seq_len + widest, slots=max_batch_size)

    try:
        policy = DraftLenPolicy.build(draft_len, max_concurrency, draft_len_schedule)
    except ValueError as exc:
        raise BuildError(f"{exc}; rebuild the engine with a fitting schedule") from None
    parts = DecoderParts(
        target=target,
        runner=runner,
        max_seq_len=max_seq_len,
        max_batch_size=max_batch_size,
        draft_len=draft_len,
        policy=policy,
        draft=draft,
        heads=heads,
        choices=choices,
        eagle3=eagle3,
        ngram=ngram,
        max_concurrency=max_concurrency,
        draft_len_schedule=draft_len_schedule,
        variant=variant or {},
    )
    decoder = decoder_for(
        mode, parts
    )  # the method's own factory (Method.reference_decoder)
    kv, cache = kv_cache or KvCacheSettings(), decoder.target
    # A token's blocks hold every model's KV of it: the draft's (draft_target, eagle3) too,
    # as TensorRT-LLM's PyTorch executor sizes its pool (target + draft bytes per token).
    per_token = sum(slot_cache_bytes_per_token(r.cache.keys) for r in decoder.runners())
    blocks = pool_blocks(kv, per_token, cache.slots, cache.max_cache_len, max_seq_len)
    return ReferenceEngine(
        mode,
        decoder,
        tokenizer,
        max_seq_len=max_seq_len,
        max_input_len=max_input_len,
        cuda_graphs=_capture(decoder, cuda_graphs),
        kv_pool=KvBlockPool(blocks, kv.tokens_per_block, kv.policy),
    )


def _check_unchanged(manifest: BuildManifest) -> None:
    """Raise if model files recorded in build.json are gone or changed size (no hashing)."""
    for role, files in manifest.models.items():
        if files is None:
            continue
        paths = [Path(files.path) / name for name in files.sha256]
        gone = [p for p in paths if not p.is_file()]
        if gone:
            raise BuildError(
                f"{role} model file {gone[0]} recorded in build.json is gone; restore it "
                "or run `trtbench build` again"
            )
        size = sum(p.stat().st_size for p in paths)
        if size != files.bytes:
            raise BuildError(
                f"{role} model files in {files.path} changed since the build "
                f"({files.bytes} -> {size} bytes); run `trtbench build` again"
            )


def engine_from_manifest(
    manifest: BuildManifest, device: str = "auto"
) -> ReferenceEngine:
    """Load the models a reference ``build.json`` names and assemble the engine.

    Raises:
        BuildError: not a reference build, its model files changed or are gone, or a
            model's weights do not match its config.json (:func:`from_pretrained_checked`).
        NotAvailableError: ``device`` asks for CUDA and there is none.
    """
    from trtbench.builders.reference.eagle3 import load_eagle3
    from trtbench.builders.reference.medusa_heads import load_medusa_heads

    if not stacks.backend(manifest.backend).reference_engine:
        raise BuildError(
            f"engine {manifest.name!r} was built for backend {manifest.backend}, not the "
            "reference engine; serve it with that backend or rebuild with --backend reference"
        )
    _check_unchanged(manifest)
    variant = manifest.variant
    dev = resolve_device(device)
    target_dir = Path(manifest.models["target"].path)
    dtype = resolve_dtype(variant.get("dtype", "auto"), dev, target_dir)
    target = load_causal_lm(target_dir, dtype, dev)
    # the method's own models are those its build recorded beside the target (build.py)
    draft = heads = eagle3 = None
    if (files := manifest.models.get("draft")) is not None:
        draft = load_causal_lm(Path(files.path), dtype, dev)
    if (files := manifest.models.get("medusa")) is not None:
        heads = load_medusa_heads(Path(files.path), dtype, dev)
    if (files := manifest.models.get("eagle3")) is not None:
        eagle3 = load_eagle3(Path(files.path), target, dtype, dev)
    speculation = variant.get("speculation") or {}
    low, high = ngram_window(
        variant.get("prompt_lookup_min"),
        variant.get("prompt_lookup_max"),
        variant.get("max_matching_ngram_size"),
    )
    engine = make_engine(
        manifest.mode,
        target,
        AutoTokenizer.from_pretrained(manifest.tokenizer_dir),
        max_seq_len=int(variant["max_seq_len"]),
        max_input_len=int(variant["max_input_len"]),
        draft=draft,
        draft_len=manifest.max_draft_len or 0,
        heads=heads,
        choices=manifest.medusa.choices if manifest.medusa else None,
        cuda_graphs=bool(variant.get("cuda_graphs", False)),
        max_batch_size=int(variant.get("max_batch_size") or 8),
        ngram=NgramSettings(low, high),
        max_concurrency=speculation.get("max_concurrency"),
        draft_len_schedule=speculation.get("draft_len_schedule"),
        kv_cache=kv_settings(variant),
        eagle3=eagle3,
        variant=variant,
    )
    engine.handicap = float(variant.get("handicap") or 0.0)
    return engine


def kv_settings(variant: Mapping[str, Any]) -> KvCacheSettings:
    """The KV budget a built variant records (``trtbench/spec/kv.py``; fraction: the
    deploy's ``kv_cache_free_gpu_mem_fraction`` the build recorded, else 0.9)."""
    return KvCacheSettings(
        tokens_per_block=int(variant.get("tokens_per_block") or 32),
        max_tokens=variant.get("kv_cache_max_tokens"),
        budget_bytes=variant.get("kv_cache_budget_bytes"),
        free_memory_fraction=float(
            variant.get("kv_cache_free_gpu_mem_fraction") or 0.9
        ),
        policy=str(variant.get("batch_scheduler_policy") or "max_utilization"),
    )


def load_engine(engine_dir: Path, device: str = "auto") -> ReferenceEngine:
    """Load the engine described by ``engine_dir/build.json`` (a reference build).

    Args:
        engine_dir: ``RUN_DIR/engines/<variant>``.
        device: ``auto`` (CUDA if available, else CPU), ``cpu``, ``cuda`` or ``cuda:N``.

    Raises:
        BuildError: no build.json, a trtllm build, model files that changed, or weights
            that do not match their config.json.
        DataFileError: build.json is corrupt or newer than this trtbench reads.
        NotAvailableError: ``device`` asks for CUDA on a machine without it.
    """
    return engine_from_manifest(read_manifest(Path(engine_dir)), device)
