"""Bench-spec fields of TensorRT-LLM's LLM-API path (the PyTorch backend, ``trtllm-pytorch``).

A variant picks its path with ``backend`` (its own, else the spec's): ``reference`` (trtbench's
PyTorch engine), ``trtllm`` (TensorRT engines; TensorRT-LLM <= 1.3.0rc20, the only Medusa path)
or ``trtllm-pytorch`` (``tensorrt_llm.LLM`` with ``backend="pytorch"``, modes baseline,
draft_target, eagle3, mtp, ngram). The fields below map onto the ``LLM(...)`` arguments
(``builders/trtllm/llmapi_plan.py``); each is refused where it does not apply, with a message
naming the field and the fix. Field names follow ``tensorrt_llm/llmapi/llm_args.py``
(``DecodingBaseConfig``, ``Eagle3DecodingConfig``, ``MTPDecodingConfig``, ``NGramDecodingConfig``,
``CudaGraphConfig``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from trtbench.core import methods, stacks
from trtbench.spec.speculation import check_speculation_fields

Mode = Literal[tuple(methods.METHODS)]  # type: ignore[valid-type]  # the method modules'
Backend = Literal["reference", "trtllm", "trtllm-pytorch"]

LLMAPI_BACKEND = stacks.TRTLLM_PYTORCH
LLMAPI_ONLY_MODES = methods.LLMAPI_ONLY_MODES  # + the reference backend, but for MTP
LAST_ENGINE_PATH_VERSION = "1.3.0rc20"
ENGINE_PATH_IMAGE = "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"
ENGINE_PATH_ONLY = (
    "{label} runs only on the TensorRT engine path: use backend: trtllm (TensorRT-LLM <= "
    f"{LAST_ENGINE_PATH_VERSION}; NGC {ENGINE_PATH_IMAGE} carries 1.2.1)"
)
"""The refusal of a ``Method.engine_path_only`` method on the LLM API (Medusa)."""
LLMAPI_PATH_KEYS = (
    "speculative_model",
    "llmapi_model_dir",
    "extra_llm_api_options",
)  # resolved like models.*
# Variant fields that only mean something to the LLM-API path.
LLMAPI_FIELDS = (
    "speculative_model",
    "num_nextn_predict_layers",
    "max_matching_ngram_size",
    "speculative_options",
    "cuda_graph_batch_sizes",
    "cuda_graph_padding",
    "overlap_scheduler",
    "speculation",
    "llm_api_options",
    "extra_llm_api_options",
)
# LLM(...) keys a variant sets through its own fields, so llm_api_options may not carry them.
RESERVED_LLM_KEYS = ("model", "backend", "speculative_config")
# speculative_config keys set through variant fields, so speculative_options may not carry them.
RESERVED_SPEC_KEYS = {
    "decoding_type": "mode",
    "max_draft_len": "max_draft_len",
    "speculative_model": "speculative_model",
    "num_nextn_predict_layers": "num_nextn_predict_layers",
    "max_matching_ngram_size": "max_matching_ngram_size",
    "max_concurrency": "speculation.max_concurrency",
    "draft_len_schedule": "speculation.draft_len_schedule",
}


class SpeculationSpec(BaseModel):
    """Runtime controls of the speculative config (TensorRT-LLM ``DecodingBaseConfig``).

    ``max_concurrency``: no speculation when more requests than this are in flight.
    ``draft_len_schedule``: batch size → draft length (e.g. ``{4: 4, 8: 2, 32: 1}``);
    keys >= 1, values >= 0 and <= the variant's draft length.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    max_concurrency: int | None = Field(default=None, ge=1)
    draft_len_schedule: (
        dict[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=0)]] | None
    ) = None


class LlmApiVariantFields(BaseModel):
    """The LLM-API fields of a variant (base of :class:`trtbench.spec.bench.VariantSpec`).

    ``speculative_model``: the draft checkpoint dir (eagle3: required, the EAGLE-3 heads, on
    every backend; draft_target: default ``models.draft``). ``num_nextn_predict_layers`` (mtp; default the
    target config.json's). ``max_matching_ngram_size`` (ngram; default the contract's, 2).
    ``speculative_options``: more ``speculative_config`` keys. ``cuda_graph_batch_sizes`` /
    ``cuda_graph_padding``: ``cuda_graph_config`` when ``cuda_graphs: true``.
    ``overlap_scheduler``: false → ``disable_overlap_scheduler: true``. ``speculation``: see
    :class:`SpeculationSpec`. ``extra_llm_api_options``: a hand-written YAML of ``LLM(...)``
    keys (the file ``trtllm-serve --extra_llm_api_options`` takes), merged over the variant's
    own keys as trtllm-serve would; its ``speculative_config`` must keep the mode's
    ``decoding_type``. ``llm_api_options``: more top-level ``LLM(...)`` keys, merged last
    (nested mappings key by key). Every key is checked against the TensorRT-LLM contract of
    the spec's ``trtllm_version``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    speculative_model: Path | None = None
    num_nextn_predict_layers: int | None = Field(default=None, ge=1)
    max_matching_ngram_size: int | None = Field(default=None, ge=1)
    speculative_options: dict[str, Any] = Field(default_factory=dict)
    cuda_graph_batch_sizes: list[Annotated[int, Field(ge=1)]] | None = None
    cuda_graph_padding: bool = False
    overlap_scheduler: bool = True
    speculation: SpeculationSpec | None = None
    llm_api_options: dict[str, Any] = Field(default_factory=dict)
    extra_llm_api_options: Path | None = None


class _Variant(Protocol):
    name: str
    mode: str
    max_draft_len: int | None
    cuda_graphs: bool
    max_batch_size: int
    draft_acceptance: str
    quantization: str
    max_beam_width: int
    model_fields_set: set[str]

    @property
    def draft_len(self) -> int: ...

    speculative_model: Path | None
    num_nextn_predict_layers: int | None
    max_matching_ngram_size: int | None
    speculative_options: dict[str, Any]
    cuda_graph_batch_sizes: list[int] | None
    speculation: SpeculationSpec | None
    llm_api_options: dict[str, Any]
    prompt_lookup_min: int | None
    prompt_lookup_max: int | None


def _only_for(field: str, modes: tuple[str, ...], mode: str) -> str:
    if modes == methods.owners(methods.SPECULATIVE_FIELDS[0]):
        return f"{field} is only for speculative modes, not {mode}; remove it"
    return f"{field} is only for mode {' and '.join(modes)}, not {mode}; remove it"


def check_method_fields(v: _Variant) -> None:
    """Variant ``v`` sets only the fields of its own method (the registry's
    :attr:`~trtbench.core.methods.Method.fields`); a field counts as set when its value is
    not its default.

    Raises:
        ValueError: the first field of another method, naming its methods and the fix.
    """
    defaults = type(v).model_fields
    methods.METHODS[v.mode].check_variant(v)  # its own checks (Method.check)
    for field in methods.METHOD_FIELDS:
        allowed = methods.owners(field)
        if v.mode not in allowed and getattr(v, field) != defaults[field].get_default(
            call_default_factory=True
        ):
            raise ValueError(_only_for(field, allowed, v.mode))


def check_llmapi_mode_fields(v: _Variant) -> None:
    """The LLM-API fields of variant ``v`` fit its mode and its other fields.

    Raises:
        ValueError: the message names the field and the fix (pydantic turns it into the
            spec's one-line ConfigError).
    """
    check_method_fields(v)
    for key in v.speculative_options:
        if key in RESERVED_SPEC_KEYS:
            raise ValueError(
                f"speculative_options.{key} is set by the variant's "
                f"{RESERVED_SPEC_KEYS[key]}; set that field instead"
            )
    for key in v.llm_api_options:
        if key in RESERVED_LLM_KEYS:
            raise ValueError(
                f"llm_api_options.{key} is set by trtbench (models, mode, speculative_options); "
                "remove it"
            )
    _check_cuda_graph_fields(v)
    check_speculation_fields(v)


def _check_cuda_graph_fields(v: _Variant) -> None:
    given = v.model_fields_set
    for field in ("cuda_graph_batch_sizes", "cuda_graph_padding"):
        if field in given and not v.cuda_graphs:
            raise ValueError(
                f"{field} needs cuda_graphs: true; set it or remove {field}"
            )
    too_big = [b for b in v.cuda_graph_batch_sizes or [] if b > v.max_batch_size]
    if too_big:
        raise ValueError(
            f"cuda_graph_batch_sizes: {too_big[0]} is above max_batch_size "
            f"{v.max_batch_size}; drop it or raise max_batch_size"
        )


def variant_backend_problem(v: _Variant, backend: str, where: str) -> str | None:
    """Why variant ``v`` cannot run on ``backend`` (None: it can).

    ``where`` names the variant in the message (``variants[2]``). Past the specific
    checks, a backend its method's registry entry does not list (``Method.backends``) is
    refused too: a method is never built by a backend that has no code for it.
    """
    problem = _specific_problem(v, backend, where)
    method = methods.METHODS.get(v.mode)
    if problem is None and method is not None and backend not in method.backends:
        problem = (
            f"{where}.mode: {method.label} ({v.mode}) is not supported by backend "
            f"{backend}; set backend: {' or '.join(method.backends)} on the variant or "
            "the spec"
        )
    return problem


def _specific_problem(v: _Variant, backend: str, where: str) -> str | None:
    if getattr(v, "handicap", 0.0) and not (
        stacks.backend(backend).reference_engine
        and stacks.server(getattr(v, "server", stacks.TRITON)).model_repository
    ):
        return (
            f"{where}.handicap: only the reference engine served by Triton applies it "
            "(a calibration slowdown); remove it or use backend: reference"
        )
    if stacks.backend(backend).llmapi:
        method = methods.method_of(v.mode)
        if method is not None and method.engine_path_only:
            return f"{where}.mode: {ENGINE_PATH_ONLY.format(label=method.label)}"
        if v.draft_acceptance != "tokens":
            return (
                f"{where}.draft_acceptance: {v.draft_acceptance} is an engine-path option; "
                "remove it for backend trtllm-pytorch"
            )
        if v.max_beam_width != 1:
            return (
                f"{where}.max_beam_width: {v.max_beam_width} is not mapped on backend "
                "trtllm-pytorch (not in trtbench's LLM-API contract); set max_beam_width: 1"
            )
        if v.quantization != "none":
            return (
                f"{where}.quantization: {v.quantization} is an engine-path option; on backend "
                "trtllm-pytorch point models.target at a quantized checkpoint instead"
            )
        if v.prompt_lookup_min not in (None, 1) or v.prompt_lookup_max is not None:
            return (
                f"{where}: prompt_lookup_min / prompt_lookup_max are vLLM's names; "
                "TensorRT-LLM's NGram matches from max_matching_ngram_size down to 1: set "
                "max_matching_ngram_size instead"
            )
        return None
    reference = stacks.backend(backend).reference_engine
    if v.mode in LLMAPI_ONLY_MODES and not (
        reference and v.mode not in REFERENCE_LACKS
    ):
        on = " or the reference backend" if v.mode not in REFERENCE_LACKS else ""
        return (
            f"{where}.mode: {v.mode} runs only on TensorRT-LLM's LLM-API path{on}; set "
            "backend: trtllm-pytorch on the variant or the spec"
        )
    for field in LLMAPI_FIELDS:
        if reference and field in REFERENCE_FIELDS:
            continue
        if field in v.model_fields_set:
            return (
                f"{where}.{field} applies only to backend: trtllm-pytorch, not {backend}; "
                "remove it or set backend: trtllm-pytorch"
            )
    return None


# LLM-API modes the reference engine cannot run yet, with their decoding_type.
REFERENCE_LACKS = {
    m.name: m.llmapi_decoding_type
    for m in methods.METHODS.values()
    if m.llmapi_decoding_type is not None and stacks.REFERENCE not in m.backends
}
# LLM-API fields the reference backend honours too (ngram's size, adaptive speculation, the
# EAGLE-3 checkpoint or draft dir).
REFERENCE_FIELDS = ("max_matching_ngram_size", "speculation", "speculative_model")


def runtime_problem(mode: str, runtime: str, where: str) -> str | None:
    """Why ``deploy.llmapi_runtime`` cannot serve a trtllm-pytorch variant of ``mode``
    (None: it can). The reference runtime lacks :data:`REFERENCE_LACKS`."""
    if runtime != "reference" or mode not in REFERENCE_LACKS:
        return None
    return (
        f"{where}.mode: the reference engine cannot serve decoding_type "
        f"{REFERENCE_LACKS[mode]} (it has baseline, draft-target, ngram and eagle3); use "
        "deploy.llmapi_runtime: tensorrt_llm on a GPU, or mode baseline / draft_target / "
        "ngram / eagle3"
    )
