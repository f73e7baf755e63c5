"""A reference engine from TensorRT-LLM ``LLM(...)`` arguments (an llmapi ``model.yaml``).

The reference runtime of Triton's ``llmapi`` model reads the same ``model.yaml`` TensorRT-LLM's
own ``model.py`` would (every key but ``triton_config`` is an ``LLM`` argument) and maps what
the reference engine can honour: ``model`` (target dir), ``tokenizer``, ``speculative_config``
(``decoding_type`` DraftTarget → ``draft_target`` with ``speculative_model`` as the draft and
``max_draft_len`` as K; Eagle3 → ``eagle3`` with ``speculative_model`` as the EAGLE-3
checkpoint, ``eagle3.py``; NGram → ``ngram`` with ``max_draft_len`` as K,
``max_matching_ngram_size`` as the largest suffix size (down to 1, as TensorRT-LLM) and
``is_use_oldest``; ``is_keep_all`` / ``is_public_pool`` have no counterpart: every request
looks up its own tokens, see ``ngram.py``; ``max_concurrency`` / ``draft_len_schedule`` of
either → adaptive speculation, ``adaptive.py``; absent or null → ``baseline``),
``max_batch_size``, ``max_seq_len``,
``max_input_len``, ``cuda_graph_config`` (a mapping → CUDA graphs requested, null → off) and
``dtype``, ``kv_cache_config`` (``max_tokens``, ``tokens_per_block`` and
``max_gpu_total_bytes`` → the KV block budget, ``kv_blocks.py``) and
``scheduler_config.capacity_scheduler_policy`` (absent: ``max_utilization``, the reference
default; TensorRT-LLM's own is GUARANTEED_NO_EVICT). Other keys
(the rest of ``kv_cache_config``, ``disable_overlap_scheduler``, parallel sizes …)
tune TensorRT-LLM's runtime and have no reference counterpart; they are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import AutoConfig, AutoTokenizer

from trtbench.builders.reference.adaptive import DraftLenPolicy
from trtbench.builders.reference.engine import ReferenceEngine
from trtbench.builders.reference.kv_blocks import KvCacheSettings
from trtbench.builders.reference.loading import (
    load_causal_lm,
    make_engine,
    resolve_device,
    resolve_dtype,
)
from trtbench.builders.reference.ngram import NgramSettings
from trtbench.core import methods, stacks
from trtbench.core.errors import ConfigError
from trtbench.core.methods import METHODS
from trtbench.spec.speculation import DEFAULT_NGRAM_MAX

# decoding_type → the reference mode serving it (None: the reference engine lacks it yet).
DECODING_MODES: dict[str, str | None] = {
    **{
        m.llmapi_decoding_type: m.name if stacks.REFERENCE in m.backends else None
        for m in METHODS.values()
        if m.llmapi_decoding_type is not None
    },
    "Eagle": None,  # EAGLE-1: an LLM-API decoding type trtbench does not compare
}
# The trtbench mode name of decoding types the reference engine lacks (for the message).
_MISSING_MODE = {"Eagle": "eagle (EAGLE-1)", "MTP": "mtp"}
DEFAULT_MAX_BATCH_SIZE = 8  # as loading.engine_from_manifest
DEFAULT_MAX_INPUT_LEN = 1024  # TensorRT-LLM BaseLlmArgs.max_input_len default
DEFAULT_DRAFT_LEN = 4


@dataclass(frozen=True)
class ReferencePlan:
    """What the reference engine will run for one set of LLM arguments (paths as given)."""

    mode: str
    target: Path
    tokenizer: Path
    draft: Path | None
    draft_len: int
    max_batch_size: int
    max_seq_len: int | None
    max_input_len: int
    cuda_graphs: bool
    dtype: str
    ngram: NgramSettings | None = None
    max_concurrency: int | None = None
    draft_len_schedule: dict[int, int] | None = None
    kv_cache: KvCacheSettings | None = None


def reference_mode(llm_args: Mapping[str, Any]) -> str:
    """The reference mode for ``llm_args['speculative_config']``.

    Returns:
        ``baseline`` (no speculative_config), ``draft_target`` (DraftTarget) or ``ngram``
        (NGram).

    Raises:
        ConfigError: a decoding_type the reference engine cannot serve (Eagle3, MTP, NGram:
            names the missing reference mode) or one it does not know.
    """
    spec = llm_args.get("speculative_config")
    if spec is None:
        return methods.BASELINE
    if not isinstance(spec, Mapping):
        raise ConfigError(
            f"speculative_config must be a mapping with decoding_type, got {spec!r}"
        )
    kind = str(spec.get("decoding_type", ""))
    mode = DECODING_MODES.get(kind)
    if mode is not None:
        return mode
    if kind in _MISSING_MODE:
        raise ConfigError(
            f"the reference engine cannot serve decoding_type {kind} yet: it has no "
            f"{_MISSING_MODE[kind]} mode; serve this variant with "
            "deploy.llmapi_runtime: tensorrt_llm on a GPU with TensorRT-LLM"
        )
    known = ", ".join(k for k, v in DECODING_MODES.items() if v)
    raise ConfigError(
        f"speculative_config.decoding_type {kind!r} is unknown to the reference engine; "
        f"it serves: {known} (or no speculative_config for baseline)"
    )


def plan_from_llm_args(llm_args: Mapping[str, Any]) -> ReferencePlan:
    """Map LLM arguments onto the reference engine (pure: reads no file).

    Raises:
        ConfigError: no ``model``, an unservable ``speculative_config`` (see
            :func:`reference_mode`), DraftTarget without ``speculative_model``, an unknown
            ``dtype``, a non-positive limit, or a ``draft_len_schedule`` that does not fit
            ``max_draft_len``.
    """
    if not llm_args.get("model"):
        raise ConfigError("the LLM arguments name no model (model: <target dir>)")
    mode = reference_mode(llm_args)
    spec = llm_args.get("speculative_config") or {}
    draft = None
    method = methods.METHODS[mode]
    if method.needs_draft_model:
        if not spec.get("speculative_model"):
            raise ConfigError(
                f"speculative_config ({spec.get('decoding_type')}) has no speculative_model: "
                "set it to the draft model (EAGLE-3 checkpoint) directory"
            )
        draft = Path(str(spec["speculative_model"]))
    dtype = str(llm_args.get("dtype") or "auto")
    if dtype not in ("auto", "float32", "float16", "bfloat16"):
        raise ConfigError(
            f"dtype {dtype!r} is not one the reference engine runs; use auto, float32, "
            "float16 or bfloat16"
        )
    limits = {
        "max_batch_size": llm_args.get("max_batch_size") or DEFAULT_MAX_BATCH_SIZE,
        "max_input_len": llm_args.get("max_input_len") or DEFAULT_MAX_INPUT_LEN,
        "max_draft_len": spec.get("max_draft_len") or DEFAULT_DRAFT_LEN,
    }
    bad = {k: v for k, v in limits.items() if int(v) < 1}
    if bad:
        raise ConfigError(f"{', '.join(bad)} must be >= 1, got {bad}")
    model = Path(str(llm_args["model"]))
    k = int(limits["max_draft_len"]) if method.drafts else 0
    return ReferencePlan(
        mode=mode,
        target=model,
        tokenizer=Path(str(llm_args.get("tokenizer") or model)),
        draft=draft,
        draft_len=k,
        max_batch_size=int(limits["max_batch_size"]),
        max_seq_len=int(llm_args["max_seq_len"])
        if llm_args.get("max_seq_len")
        else None,
        max_input_len=int(limits["max_input_len"]),
        # TensorRT-LLM's default (key absent) is a CudaGraphConfig, i.e. on; null is off.
        cuda_graphs=llm_args.get("cuda_graph_config", {}) is not None,
        dtype=dtype,
        kv_cache=_kv_cache(
            llm_args.get("kv_cache_config") or {},
            llm_args.get("scheduler_config") or {},
        ),
        **_speculation(mode, spec, k),
    )


def _kv_cache(
    config: Mapping[str, Any], scheduler: Mapping[str, Any]
) -> KvCacheSettings:
    """``kv_cache_config`` → the KV budget (``max_gpu_total_bytes`` taken whole) and
    ``scheduler_config.capacity_scheduler_policy`` → its admission policy.

    Raises:
        ConfigError: a capacity policy other than MAX_UTILIZATION / GUARANTEED_NO_EVICT.
    """
    policy = str(scheduler.get("capacity_scheduler_policy") or "MAX_UTILIZATION")
    if policy.upper() not in ("MAX_UTILIZATION", "GUARANTEED_NO_EVICT"):
        raise ConfigError(
            f"scheduler_config.capacity_scheduler_policy {policy!r} is not served by the "
            "reference engine; use MAX_UTILIZATION or GUARANTEED_NO_EVICT"
        )
    total = config.get("max_gpu_total_bytes") or None
    return KvCacheSettings(
        tokens_per_block=int(config.get("tokens_per_block") or 32),
        max_tokens=config.get("max_tokens"),
        budget_bytes=int(total) if total else None,
        free_memory_fraction=1.0,
        policy=policy.lower(),
    )


def _speculation(mode: str, spec: Mapping[str, Any], k: int) -> dict[str, Any]:
    """The ngram window and adaptive-speculation fields of a ReferencePlan."""
    out: dict[str, Any] = {"max_concurrency": spec.get("max_concurrency")}
    schedule = spec.get("draft_len_schedule")
    if schedule:
        out["draft_len_schedule"] = {int(b): int(n) for b, n in schedule.items()}
        try:
            DraftLenPolicy.build(k, None, out["draft_len_schedule"])
        except ValueError as exc:
            raise ConfigError(f"speculative_config.{exc}") from None
    if methods.METHODS[mode].owns("max_matching_ngram_size"):
        size = int(spec.get("max_matching_ngram_size") or DEFAULT_NGRAM_MAX)
        if size < 1:
            raise ConfigError(
                f"speculative_config.max_matching_ngram_size is {size}; use 1 or more"
            )
        out["ngram"] = NgramSettings(1, size, bool(spec.get("is_use_oldest", True)))
    return out


def engine_from_llm_args(
    llm_args: Mapping[str, Any], device: str = "auto"
) -> ReferenceEngine:
    """Load the models the LLM arguments name and assemble the reference engine.

    ``max_seq_len`` absent: the target's ``max_position_embeddings``. ``max_input_len`` is
    capped at ``max_seq_len - 1``. CUDA graphs are captured only on a CUDA device.

    Raises:
        ConfigError: see :func:`plan_from_llm_args`.
        BuildError: a model directory cannot be loaded or its weights do not match.
        NotAvailableError: ``device`` asks for CUDA and there is none.
    """
    plan = plan_from_llm_args(llm_args)
    dev = resolve_device(device)
    dtype = resolve_dtype(plan.dtype, dev, plan.target)
    max_seq_len = plan.max_seq_len or int(
        AutoConfig.from_pretrained(plan.target).max_position_embeddings
    )
    target = load_causal_lm(plan.target, dtype, dev)
    draft = eagle3 = None
    if METHODS[plan.mode].drafter == "eagle3_head" and plan.draft:
        from trtbench.builders.reference.eagle3 import load_eagle3

        eagle3 = load_eagle3(plan.draft, target, dtype, dev)
    elif plan.draft:
        draft = load_causal_lm(plan.draft, dtype, dev)
    return make_engine(
        plan.mode,
        target,
        AutoTokenizer.from_pretrained(plan.tokenizer),
        max_seq_len=max_seq_len,
        max_input_len=min(plan.max_input_len, max_seq_len - 1),
        draft=draft,
        draft_len=plan.draft_len or DEFAULT_DRAFT_LEN,
        cuda_graphs=plan.cuda_graphs,
        max_batch_size=plan.max_batch_size,
        ngram=plan.ngram,
        max_concurrency=plan.max_concurrency,
        draft_len_schedule=plan.draft_len_schedule,
        kv_cache=plan.kv_cache,
        eagle3=eagle3,
    )
