"""Bench-spec variant → TensorRT-LLM build plan (pure data; nothing here imports tensorrt_llm).

One :class:`VariantPlan` per variant holds one :class:`EngineStep` per engine:

- baseline / medusa: one engine, ``engines/<variant>/`` itself (role ``target``, subdir ``.``);
- draft_target: ``engines/<variant>/target`` and ``engines/<variant>/draft``.

Each step is the ``tensorrt_llm._tensorrt_engine.LLM(...)`` call (``BuildConfig`` with its
``PluginConfig``, ``KvCacheConfig``, speculative and quantization configs) followed by
``llm.save(engine_dir)``. Medusa first converts base + heads to a TensorRT-LLM checkpoint with
``MedusaForCausalLm.from_hugging_face(...).save_checkpoint`` (per rank), because the LLM API
cannot pass ``max_draft_len`` to the Medusa model config (it would stay at 63). The choices of
plugins and shapes follow ``trtllm-build``'s defaults (NVIDIA/TensorRT-LLM
``tensorrt_llm/commands/build.py``, ``tensorrt_llm/plugin/plugin.py``) and TensorRT-LLM's
``docs/source/legacy/performance/performance-tuning-guide/useful-build-time-flags.md``; the
rules are checked by :mod:`trtbench.builders.trtllm.contract`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trtbench.builders.medusa_tree import resolve_choices, validate_choices
from trtbench.builders.trtllm.calls import (
    Call,
    EnumRef,
    PathArg,
    RankArg,
    call_from_json,
    call_to_json,
)
from trtbench.builders.trtllm.facts import ModelFacts, checkpoint_dtype
from trtbench.core import methods
from trtbench.core.errors import ConfigError
from trtbench.core.methods import METHODS
from trtbench.spec.bench import VariantSpec

# KV-cache share of free GPU memory for the executor the LLM API starts after a build.
BUILD_KV_CACHE_FRACTION = 0.2


@dataclass(frozen=True)
class EngineExpectation:
    """What the built engine's config.json must say (checked after the build)."""

    speculative_decoding_mode: str
    max_draft_len: int
    tp_size: int
    pp_size: int
    max_batch_size: int
    max_input_len: int
    max_seq_len: int
    max_beam_width: int
    plugins: Mapping[str, Any]
    gather_generation_logits: bool = False
    num_medusa_heads: int | None = None
    num_medusa_layers: int | None = None
    quant_algo: str | None = None
    kv_cache_quant_algo: str | None = None


@dataclass(frozen=True)
class EngineStep:
    """One engine: optional checkpoint conversion (per rank), then ``LLM(...)`` + ``save``."""

    role: str
    engine_dir: str
    llm: Call
    expect: EngineExpectation
    convert: Call | None = None
    checkpoint_dir: str | None = None
    world_size: int = 1


@dataclass(frozen=True)
class VariantPlan:
    """Everything needed to build and record one variant (see the module docstring)."""

    name: str
    mode: str
    engine_root: str
    engines: tuple[EngineStep, ...]
    tokenizer_dir: str
    max_draft_len: int | None
    medusa_choices: tuple[tuple[int, ...], ...] | None
    medusa_num_heads: int | None
    medusa_num_layers: int | None
    quantization: str
    draft_acceptance: str
    cuda_graphs: bool
    checkpoint_dtype: str = "float16"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (calls encoded by :func:`call_to_json`)."""
        data = asdict(self)
        data["engines"] = [
            {
                **asdict(e),
                "llm": call_to_json(e.llm),
                "convert": call_to_json(e.convert),
            }
            for e in self.engines
        ]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VariantPlan:
        """Inverse of :meth:`to_json`."""
        engines = tuple(
            EngineStep(
                **{
                    **e,
                    "llm": call_from_json(e["llm"]),
                    "convert": call_from_json(e["convert"]),
                    "expect": EngineExpectation(**e["expect"]),
                }
            )
            for e in data["engines"]
        )
        choices = data["medusa_choices"]
        return cls(
            **{
                **data,
                "engines": engines,
                "medusa_choices": None
                if choices is None
                else tuple(tuple(c) for c in choices),
            }
        )


def _plugins(variant: VariantSpec) -> dict[str, Any]:
    """PluginConfig arguments: tensorrtllm_backend's README example + useful-build-time-flags."""
    fp8 = variant.quantization == "fp8"
    return {
        "gpt_attention_plugin": "auto",
        "gemm_plugin": None if fp8 else "auto",
        "context_fmha": True,
        "remove_input_padding": True,
        "paged_kv_cache": True,
        "use_paged_context_fmha": True,
        "use_fp8_context_fmha": fp8,
        "multiple_profiles": True,
        "reduce_fusion": variant.tp_size > 1,
    }


def _shapes(variant: VariantSpec) -> dict[str, int]:
    shapes = {
        "max_batch_size": variant.max_batch_size,
        "max_input_len": variant.max_input_len,
        "max_seq_len": variant.max_seq_len,
        "max_beam_width": variant.max_beam_width,
    }
    if variant.max_num_tokens is not None:
        shapes["max_num_tokens"] = variant.max_num_tokens
    return shapes


def _llm_call(
    variant: VariantSpec,
    model: str,
    tokenizer: str,
    *,
    mode: str,
    draft_len: int,
    logits: bool,
    spec_config: Call | None = None,
) -> Call:
    """``LLM(...)`` with its BuildConfig; the runtime max_* equal the build's."""
    shapes = _shapes(variant)
    build = Call(
        "BuildConfig",
        {
            **shapes,
            "max_draft_len": draft_len,
            "speculative_decoding_mode": EnumRef("SpeculativeDecodingMode", mode),
            "gather_generation_logits": logits,
            "plugin_config": Call("PluginConfig", _plugins(variant)),
        },
    )
    kwargs: dict[str, Any] = {
        "model": model,
        "tokenizer": tokenizer,
        "tensor_parallel_size": variant.tp_size,
        "pipeline_parallel_size": variant.pp_size,
        "dtype": variant.dtype,
        "build_config": build,
        "kv_cache_config": Call(
            "KvCacheConfig",
            {
                "enable_block_reuse": True,
                "free_gpu_memory_fraction": BUILD_KV_CACHE_FRACTION,
            },
        ),
    }
    if spec_config is not None:
        kwargs["speculative_config"] = spec_config
    if variant.quantization == "fp8":
        fp8 = EnumRef("QuantAlgo", "FP8")
        kwargs["quant_config"] = Call(
            "QuantConfig", {"quant_algo": fp8, "kv_cache_quant_algo": fp8}
        )
    return Call("LLM", {**kwargs, **shapes, "gather_generation_logits": logits})


def _expect(
    variant: VariantSpec, llm: Call, heads: int | None = None, layers: int | None = None
) -> EngineExpectation:
    build = llm.kwargs["build_config"]
    fp8 = "FP8" if variant.quantization == "fp8" else None
    return EngineExpectation(
        speculative_decoding_mode=build.kwargs["speculative_decoding_mode"].member,
        max_draft_len=build.kwargs["max_draft_len"],
        tp_size=variant.tp_size,
        pp_size=variant.pp_size,
        max_batch_size=variant.max_batch_size,
        max_input_len=variant.max_input_len,
        max_seq_len=variant.max_seq_len,
        max_beam_width=variant.max_beam_width,
        plugins=dict(build.kwargs["plugin_config"].kwargs),
        gather_generation_logits=build.kwargs["gather_generation_logits"],
        num_medusa_heads=heads,
        num_medusa_layers=layers,
        quant_algo=fp8,
        kv_cache_quant_algo=fp8,
    )


def _plain_step(
    variant: VariantSpec, role: str, model: str, tokenizer: str, out: Path, **kw: Any
) -> EngineStep:
    llm = _llm_call(variant, model, tokenizer, **kw)
    return EngineStep(role, str(out), llm, _expect(variant, llm))


def _medusa_step(
    variant: VariantSpec, facts: ModelFacts, root: Path, choices: list[list[int]]
) -> EngineStep:
    heads, layers = facts.medusa_num_heads, facts.medusa_num_layers
    draft_len = variant.max_draft_len or len(choices)
    spec = Call(
        "MedusaDecodingConfig",
        {
            "max_draft_len": draft_len,
            "num_medusa_heads": heads,
            "medusa_choices": choices,
        },
    )
    ckpt = root / "checkpoint-target"
    world = variant.tp_size * variant.pp_size
    mapping = Call(
        "Mapping",
        {
            "world_size": world,
            "rank": RankArg(),
            "tp_size": variant.tp_size,
            "pp_size": variant.pp_size,
        },
    )
    convert = Call(
        "MedusaForCausalLm.from_hugging_face",
        {
            "dtype": variant.dtype,
            "mapping": mapping,
            "speculative_model_dir": PathArg(str(facts.medusa_dir)),
            "speculative_config": spec,
            "max_draft_len": draft_len,
        },
        (facts.target_dir,),
    )
    llm = _llm_call(
        variant,
        str(ckpt),
        facts.target_dir,
        mode=METHODS[variant.mode].engine_mode,
        draft_len=draft_len,
        logits=False,
        spec_config=spec,
    )
    expect = _expect(variant, llm, heads, layers)
    return EngineStep("target", str(root), llm, expect, convert, str(ckpt), world)


def _plain_steps(
    variant: VariantSpec, facts: ModelFacts, root: Path
) -> tuple[EngineStep, ...]:
    """baseline: one engine at the root; draft_target: target/ (DTE, K) and draft/."""
    target = facts.target_dir
    method = METHODS[variant.mode]
    if not method.drafts:
        step = _plain_step(
            variant,
            "target",
            target,
            target,
            root,
            mode=method.engine_mode,
            draft_len=0,
            logits=False,
        )
        return (step,)
    if facts.draft_dir is None:
        raise ConfigError(f"variant {variant.name}: draft_target needs models.draft")
    logits = variant.draft_acceptance == "logits"
    return (
        _plain_step(
            variant,
            "target",
            target,
            target,
            root / "target",
            mode=method.engine_mode,
            draft_len=variant.draft_len,
            logits=logits,
        ),
        _plain_step(
            variant,
            "draft",
            facts.draft_dir,
            facts.draft_dir,
            root / "draft",
            mode=METHODS[methods.BASELINE].engine_mode,  # a plain engine
            draft_len=0,
            logits=logits,
        ),
    )


def plan_variant(
    variant: VariantSpec, facts: ModelFacts, engine_root: Path
) -> VariantPlan:
    """The build plan of one variant (pure: no file is read or written).

    Args:
        variant: the variant as validated by the spec.
        facts: from :func:`~trtbench.builders.trtllm.facts.read_model_facts` (covering
            this variant's mode).
        engine_root: ``<run>/engines/<variant>`` (absolute paths go into the plan).

    Raises:
        ConfigError: a Medusa tree that cannot be resolved, or facts missing for the mode.
    """
    root = Path(engine_root)
    choices = heads = layers = None
    if not METHODS[variant.mode].tree:
        steps = _plain_steps(variant, facts, root)
    else:
        if facts.medusa_dir is None:
            raise ConfigError(f"variant {variant.name}: medusa needs models.medusa")
        tree = validate_choices(
            resolve_choices(variant.tree), max_draft_len=None, num_heads=None
        )
        choices = tuple(tree)
        heads, layers = facts.medusa_num_heads, facts.medusa_num_layers
        steps = (_medusa_step(variant, facts, root, [list(c) for c in tree]),)
    return VariantPlan(
        name=variant.name,
        mode=variant.mode,
        engine_root=str(root),
        engines=steps,
        tokenizer_dir=facts.target_dir,
        max_draft_len=steps[0].expect.max_draft_len or None,
        medusa_choices=choices,
        medusa_num_heads=heads,
        medusa_num_layers=layers,
        quantization=variant.quantization,
        draft_acceptance=variant.draft_acceptance,
        cuda_graphs=variant.cuda_graphs,
        checkpoint_dtype=checkpoint_dtype(variant, facts),
    )


def engine_layout(plan: VariantPlan) -> dict[str, str]:
    """``build.json`` ``engines``: role → engine dir relative to ``engines/<variant>``."""
    root = Path(plan.engine_root)
    return {e.role: str(Path(e.engine_dir).relative_to(root)) for e in plan.engines}
