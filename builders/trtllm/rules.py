"""Cross-field rules of TensorRT-LLM 1.2.1 builds, checked on plans before any GPU work.

Each rule has an id in the ``constraints`` list of ``builders/trtllm/data/trtllm_1_2_1_contract.json``
(with its source) and appears in the error message as ``[TensorRT-LLM rule <id>]``:
context logits with draft tokens, speculative mode vs draft length, beam search with
speculation, the attention plugin / packed input / paged KV that speculative decoding needs,
profiles vs opt_num_tokens, shapes, runtime vs build limits, KV dtype, the Medusa tree against
max_draft_len and the heads, FP8 (gemm plugin off, FP8 context FMHA, compute capability,
no FP8 Medusa), paged context FMHA on both draft-target engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from trtbench.builders.medusa_tree import validate_choices
from trtbench.builders.trtllm.calls import Call, EnumRef
from trtbench.builders.trtllm.contract import (
    RUNTIME_SHAPES,
    Contract,
    check_call,
    check_fp8_capability,
)
from trtbench.core.errors import ConfigError


class EngineLike(Protocol):
    """What :func:`check_engine` reads from a plan's engine step."""

    role: str
    llm: Call
    convert: Call | None


def _fail(where: str, rule: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message} [TensorRT-LLM rule {rule}]")


def _spec_mode(build: Call) -> str:
    mode = build.get("speculative_decoding_mode")
    return mode.member if isinstance(mode, EnumRef) else "NONE"


def _check_speculative(where: str, build: Call, plugins: Call) -> None:
    mode, draft_len = _spec_mode(build), build.get("max_draft_len", 0)
    if build.get("gather_context_logits") and draft_len > 0:
        raise _fail(
            where,
            "context_logits_with_draft",
            "gather_context_logits cannot be used with max_draft_len > 0; gather "
            "generation logits instead",
        )
    if (mode == "NONE") != (draft_len == 0):
        raise _fail(
            where,
            "spec_mode_needs_draft_len",
            f"speculative_decoding_mode {mode} with max_draft_len {draft_len}; give a "
            "draft length > 0 exactly when speculating",
        )
    if mode == "NONE":
        return
    if build.get("max_beam_width", 1) > 1:
        raise _fail(
            where,
            "beam_with_speculation",
            f"max_beam_width {build.get('max_beam_width')} with {mode} speculative "
            "decoding; set max_beam_width: 1 (acceptance is greedy token matching)",
        )
    paged = plugins.get("paged_kv_cache") is True or build.get(
        "kv_cache_type"
    ) == EnumRef("KVCacheType", "PAGED")
    attention = plugins.get("gpt_attention_plugin", "auto") is not None
    packed = plugins.get("remove_input_padding", True)
    if not (paged and attention and packed):
        raise _fail(
            where,
            "spec_needs_attention_plugin",
            "speculative decoding needs gpt_attention_plugin, remove_input_padding and "
            "a paged KV cache; enable all three",
        )


def _check_shapes(where: str, llm: Call, build: Call, plugins: Call) -> None:
    if plugins.get("multiple_profiles") and build.get("opt_num_tokens") is not None:
        raise _fail(
            where,
            "profiles_vs_opt_num_tokens",
            "multiple_profiles with opt_num_tokens set; drop opt_num_tokens",
        )
    seq = build.get("max_seq_len")
    if seq is not None and build.get("max_input_len", 1024) > seq:
        raise _fail(
            where,
            "input_le_seq",
            "max_input_len exceeds max_seq_len; raise max_seq_len",
        )
    for key in RUNTIME_SHAPES:
        run, built = llm.get(key), build.get(key)
        if run is not None and run != built:
            raise _fail(
                where,
                "runtime_le_build",
                f"LLM {key}={run} differs from build_config {key}={built}; pass the "
                "same value to both",
            )
    kv = llm.get("kv_cache_config")
    if kv is not None and kv.get("dtype", "auto") != "auto":
        raise _fail(
            where,
            "kv_dtype_auto",
            "KvCacheConfig.dtype must be 'auto' on the TensorRT backend; quantize the "
            "KV cache with QuantConfig(kv_cache_quant_algo=QuantAlgo.FP8)",
        )


def _check_medusa(where: str, build: Call, spec: Call, convert: Call | None) -> None:
    heads = spec.get("num_medusa_heads")
    if heads is None:
        raise _fail(
            where,
            "medusa_heads_explicit",
            "MedusaDecodingConfig.num_medusa_heads is not set (TensorRT-LLM would read "
            "num_medusa_heads, not medusa_num_heads, from the heads' config.json); set it",
        )
    draft_len = build.get("max_draft_len", 0)
    if spec.get("max_draft_len") != draft_len or (
        convert is not None and convert.get("max_draft_len") != draft_len
    ):
        raise _fail(
            where,
            "medusa_tree",
            "max_draft_len differs between BuildConfig, MedusaDecodingConfig and the "
            "checkpoint conversion; use one value",
        )
    try:
        validate_choices(
            spec.get("medusa_choices") or [], max_draft_len=draft_len, num_heads=heads
        )
    except ConfigError as exc:
        raise _fail(where, "medusa_tree", str(exc)) from None


def _check_fp8(
    where: str, plugins: Call, quant: Call | None, medusa: bool, cc: Any
) -> None:
    if quant is None or quant.get("quant_algo") != EnumRef("QuantAlgo", "FP8"):
        return
    if medusa:
        raise _fail(
            where,
            "fp8_medusa",
            "quantization: fp8 with Medusa needs a ModelOpt-quantized Medusa checkpoint, "
            "which trtbench does not make; use quantization: none for medusa variants",
        )
    if plugins.get("gemm_plugin") is not None or not plugins.get(
        "use_fp8_context_fmha", True
    ):
        raise _fail(
            where,
            "fp8_gemm_plugin_off",
            "FP8 engines need gemm_plugin disabled and use_fp8_context_fmha enabled",
        )
    check_fp8_capability(cc)


def check_engine(
    engine: EngineLike,
    contract: Contract,
    where: str = "",
    compute_capability: tuple[int, int] | None = None,
) -> None:
    """Check one engine step: every call against the tables, then the cross-field rules.

    Args:
        engine: ``role``, ``llm`` (the ``LLM`` call) and ``convert`` (checkpoint call or None).
        contract: from :func:`load_contract`.
        where: prefix for messages (the variant name).
        compute_capability: of the visible GPU, for the FP8 rule (None: not checked).

    Raises:
        ConfigError: naming the field or rule and the fix.
    """
    here = f"{where}[{engine.role}]"
    check_call(engine.llm, contract, f"{here} ")
    if engine.convert is not None:
        check_call(engine.convert, contract, f"{here} ")
    build = engine.llm.get("build_config") or Call("BuildConfig")
    plugins = build.get("plugin_config") or Call("PluginConfig")
    _check_speculative(here, build, plugins)
    _check_shapes(here, engine.llm, build, plugins)
    spec = engine.llm.get("speculative_config")
    medusa = isinstance(spec, Call) and spec.name == "MedusaDecodingConfig"
    if medusa:
        _check_medusa(here, build, spec, engine.convert)
    _check_fp8(
        here, plugins, engine.llm.get("quant_config"), medusa, compute_capability
    )


def check_draft_pair(where: str, engines: Sequence[EngineLike]) -> None:
    """draft_target: paged context FMHA on target and draft (KV cache reuse).

    Raises:
        ConfigError: an engine has use_paged_context_fmha off.
    """
    for engine in engines:
        build = engine.llm.get("build_config") or Call("BuildConfig")
        plugins = build.get("plugin_config") or Call("PluginConfig")
        if not plugins.get("use_paged_context_fmha", True):
            raise _fail(
                f"{where}[{engine.role}]",
                "draft_target_paged_context_fmha",
                "draft-target needs use_paged_context_fmha on target and draft",
            )
