"""The tensors our Triton models exchange, and the repository metadata (``trtbench.json``).

Client-facing tensor names and dtypes follow the TensorRT-LLM 1.2.1-era inflight-batcher
ensemble (``ensemble/config.pbtxt`` under NVIDIA/TensorRT-LLM
``triton_backend/all_models/inflight_batcher_llm/``: ``min_tokens`` and ``seed``, not
``min_length`` / ``random_seed``). Every scalar input is ``dims: [1]`` under
``max_batch_size > 0``, so a client sends it as shape ``[1, 1]``. Our own additions, served
by every repository trtbench renders:

- ``output_ids`` INT32 ``[-1]``: the token ids *newly generated* in this response (a streamed
  response carries the tokens of one decode step; a non-streamed one all of them). The prompt
  is never included, whatever ``exclude_input_in_output`` says.
- ``draft_tokens_proposed`` / ``draft_tokens_accepted`` INT32 ``[1]``: draft tokens proposed,
  and of those accepted by verification, for the step(s) behind this response (reference
  models and our draft-target BLS; TensorRT-LLM's ensemble has no per-step counts). At a step
  cut by ``max_tokens`` or the end token the reference model still reports every accepted
  draft (vLLM's count); the tokens emitted are the response's ``output_ids``.

``trtbench.json`` (:class:`RepoMetadata`) tells the load generator and the report which model
to call, whether it streams, which outputs exist and which extra inputs to send.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trtbench.core.data_files import read_json_document, validation_problem
from trtbench.core.errors import DataFileError, DeployError
from trtbench.core.run_dir import METADATA_NAME, METADATA_SCHEMA_VERSION


@dataclass(frozen=True)
class Tensor:
    """One input or output of a model config.

    Attributes:
        name: tensor name.
        data_type: Triton config type (``TYPE_INT32`` …).
        dims: dims without the batch dimension.
        optional: input may be omitted by the client.
        scalar_reshape: add ``reshape: { shape: [ ] }`` (TensorRT-LLM scalar inputs).
        ragged: add ``allow_ragged_batch: true``.
    """

    name: str
    data_type: str
    dims: tuple[int, ...] = (1,)
    optional: bool = False
    scalar_reshape: bool = False
    ragged: bool = False

    @property
    def client_dtype(self) -> str:
        """The tritonclient dtype string (``TYPE_STRING`` → ``BYTES``)."""
        short = self.data_type.removeprefix("TYPE_")
        return "BYTES" if short == "STRING" else short


def _opt(name: str, data_type: str) -> Tensor:
    return Tensor(name, data_type, optional=True)


# Client-facing request tensors shared by the TensorRT-LLM ensemble, our BLS and the
# reference model (subset of the TRT-LLM ensemble: no LoRA, p-tuning, logits or word lists).
REQUEST_INPUTS: tuple[Tensor, ...] = (
    Tensor("text_input", "TYPE_STRING"),
    Tensor("max_tokens", "TYPE_INT32"),
    _opt("stream", "TYPE_BOOL"),
    _opt("exclude_input_in_output", "TYPE_BOOL"),
    _opt("end_id", "TYPE_INT32"),
    _opt("pad_id", "TYPE_INT32"),
    _opt("min_tokens", "TYPE_INT32"),
    _opt("seed", "TYPE_UINT64"),
    _opt("temperature", "TYPE_FP32"),
    _opt("top_k", "TYPE_INT32"),
    _opt("top_p", "TYPE_FP32"),
    _opt("length_penalty", "TYPE_FP32"),
    _opt("repetition_penalty", "TYPE_FP32"),
    _opt("presence_penalty", "TYPE_FP32"),
    _opt("frequency_penalty", "TYPE_FP32"),
    _opt("beam_width", "TYPE_INT32"),
    _opt("return_perf_metrics", "TYPE_BOOL"),
)
# Extra request inputs of the draft-target BLS model (TRT-LLM BLS name).
BLS_INPUTS: tuple[Tensor, ...] = (_opt("num_draft_tokens", "TYPE_INT32"),)

TOKEN_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("text_output", "TYPE_STRING", (-1,)),
    Tensor("output_ids", "TYPE_INT32", (-1,)),
)
SPEC_COUNT_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("draft_tokens_proposed", "TYPE_INT32"),
    Tensor("draft_tokens_accepted", "TYPE_INT32"),
)
# Filled on the final response when the request sets return_perf_metrics=true (TRT-LLM
# names and dtypes; times in ns since the epoch on the server's clock).
TIMING_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("arrival_time_ns", "TYPE_INT64"),
    Tensor("first_scheduled_time_ns", "TYPE_INT64"),
    Tensor("first_token_time_ns", "TYPE_INT64"),
    Tensor("last_token_time_ns", "TYPE_INT64"),
)
SPEC_PERF_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("acceptance_rate", "TYPE_FP32"),
    Tensor("total_accepted_draft_tokens", "TYPE_INT32"),
    Tensor("total_draft_tokens", "TYPE_INT32"),
)
KV_PERF_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("kv_cache_alloc_new_blocks", "TYPE_INT32"),
    Tensor("kv_cache_reused_blocks", "TYPE_INT32"),
    Tensor("kv_cache_alloc_total_blocks", "TYPE_INT32"),
)


def _scalar(name: str, data_type: str, optional: bool = True) -> Tensor:
    return Tensor(name, data_type, optional=optional, scalar_reshape=True)


# The TensorRT-LLM C++ backend model (``inflight_batcher_llm/tensorrt_llm/config.pbtxt``,
# TRT-LLM 1.2.1-era names); only what trtbench's ensemble and BLS send, plus every output
# it may produce.
TRTLLM_INPUTS: tuple[Tensor, ...] = (
    Tensor("input_ids", "TYPE_INT32", (-1,), ragged=True),
    _scalar("input_lengths", "TYPE_INT32", optional=False),
    _scalar("request_output_len", "TYPE_INT32", optional=False),
    Tensor("draft_input_ids", "TYPE_INT32", (-1,), optional=True, ragged=True),
    _scalar("end_id", "TYPE_INT32"),
    _scalar("pad_id", "TYPE_INT32"),
    _scalar("streaming", "TYPE_BOOL"),
    _scalar("exclude_input_in_output", "TYPE_BOOL"),
    _scalar("min_tokens", "TYPE_INT32"),
    _scalar("seed", "TYPE_UINT64"),
    _scalar("temperature", "TYPE_FP32"),
    _scalar("runtime_top_k", "TYPE_INT32"),
    _scalar("runtime_top_p", "TYPE_FP32"),
    _scalar("len_penalty", "TYPE_FP32"),
    _scalar("repetition_penalty", "TYPE_FP32"),
    _scalar("presence_penalty", "TYPE_FP32"),
    _scalar("frequency_penalty", "TYPE_FP32"),
    _scalar("beam_width", "TYPE_INT32"),
    _scalar("return_perf_metrics", "TYPE_BOOL"),
    _scalar("stop", "TYPE_BOOL"),
)
TRTLLM_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("output_ids", "TYPE_INT32", (-1, -1)),
    Tensor("sequence_length", "TYPE_INT32", (-1,)),
    Tensor("cum_log_probs", "TYPE_FP32", (-1,)),
    Tensor("output_log_probs", "TYPE_FP32", (-1, -1)),
    Tensor("context_logits", "TYPE_FP32", (-1, -1)),
    Tensor("generation_logits", "TYPE_FP32", (-1, -1, -1)),
    Tensor("batch_index", "TYPE_INT32"),
    Tensor("sequence_index", "TYPE_INT32"),
    *KV_PERF_OUTPUTS,
    *TIMING_OUTPUTS,
    *SPEC_PERF_OUTPUTS,
)
# Our preprocessing / postprocessing models (templates/trtllm/*.py).
PREPROCESSING_INPUTS: tuple[Tensor, ...] = (
    Tensor("text_input", "TYPE_STRING"),
    Tensor("max_tokens", "TYPE_INT32"),
    _opt("end_id", "TYPE_INT32"),
    _opt("pad_id", "TYPE_INT32"),
)
PREPROCESSING_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("input_ids", "TYPE_INT32", (-1,)),
    Tensor("input_lengths", "TYPE_INT32"),
    Tensor("request_output_len", "TYPE_INT32"),
    Tensor("resolved_end_id", "TYPE_INT32"),
    Tensor("resolved_pad_id", "TYPE_INT32"),
)
POSTPROCESSING_INPUTS: tuple[Tensor, ...] = (
    Tensor("output_ids", "TYPE_INT32", (-1, -1)),
    Tensor("sequence_length", "TYPE_INT32", (-1,)),
)
POSTPROCESSING_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("text_output", "TYPE_STRING", (-1,)),
    Tensor("token_ids", "TYPE_INT32", (-1,)),
)


# What each client-facing model returns.
REFERENCE_OUTPUTS: tuple[Tensor, ...] = (
    *TOKEN_OUTPUTS,
    *SPEC_COUNT_OUTPUTS,
    *TIMING_OUTPUTS,
    *SPEC_PERF_OUTPUTS,
)
BLS_OUTPUTS = REFERENCE_OUTPUTS
ENSEMBLE_OUTPUTS: tuple[Tensor, ...] = (
    *TOKEN_OUTPUTS,
    *KV_PERF_OUTPUTS,
    *TIMING_OUTPUTS,
    *SPEC_PERF_OUTPUTS,
)


class RepoMetadata(BaseModel):
    """``model_repo/<variant>/trtbench.json``: how to drive the repository.

    Attributes:
        variant, backend, mode: from build.json.
        model_name: the model a client calls (``ensemble`` or ``tensorrt_llm_bls``).
        models: every model in the repository (all must be ready before serving).
        tensorrt_llm_models: models run by the TensorRT-LLM backend (ranks > 0 of an
            mpirun launch load only these).
        world_size: GPUs per server (tp_size × pp_size; >1 starts tritonserver under mpirun).
        streaming: ``stream=true`` yields one response per decode step. False for the
            draft-target BLS (one response per request, TRT-LLM's documented limit).
        decoupled: call through gRPC ``ModelStreamInfer`` and ask for
            ``triton_enable_empty_final_response`` (a flags-only final may close the stream).
        max_request_batch_size: prompts per request (1: send one prompt per request).
        inputs: input name → tritonclient dtype of ``model_name``.
        outputs: output name → tritonclient dtype of ``model_name``.
        output_ids: ``output_ids`` (new token ids per response) is returned.
        speculative_counts: where draft counts come from: ``per_response``
            (``draft_tokens_proposed`` / ``draft_tokens_accepted`` on every response),
            ``perf_metrics`` (only ``total_draft_tokens`` / ``total_accepted_draft_tokens`` /
            ``acceptance_rate`` with ``return_perf_metrics=true``), or ``none`` (baseline).
        perf_metrics_outputs: outputs filled on the final response with
            ``return_perf_metrics=true``.
        extra_inputs: tensors to send with every request (name → value), e.g.
            ``{"num_draft_tokens": 4}`` for the BLS.
        text_stream_exact: streamed ``text_output`` pieces concatenate to the exact text
            (False where each chunk is detokenized on its own and may split a character).
        text_output: what a streamed ``text_output`` holds: ``delta`` (the text new in
            this response; concatenate) or ``cumulative`` (all text so far, TensorRT-LLM's
            llmapi model: the last response holds the whole text).
        runtime: who runs an llmapi model: ``tensorrt_llm`` (TensorRT-LLM's model.py) or
            ``reference`` (trtbench's reference engine behind the same tensors); None otherwise.
        max_draft_len: draft tokens per step (draft_target K, medusa tree nodes), or None.
        medusa_choices: the Medusa tree served, or None.
        max_batch_size, max_input_len, max_seq_len: engine limits.
        tokenizer_dir: tokenizer of the served model.
        cuda_graphs: ``{"requested", "enabled", "reason"}`` as deployed.
        batching: how the server batches requests: ``strategy`` (``inflight``: the
            reference engine's in-flight batcher; ``inflight_fused_batching``: TensorRT-LLM),
            ``max_batch_size`` (sequences decoded together), and for the reference backend
            ``prefill`` (how new prompts enter) and ``cpu_threads`` (torch intra-op threads
            when the engine runs on CPU). Empty in repositories rendered before it existed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = METADATA_SCHEMA_VERSION
    variant: str
    backend: Literal["reference", "trtllm", "trtllm-pytorch"]
    mode: str
    model_name: str
    models: list[str]
    tensorrt_llm_models: list[str] = Field(default_factory=list)
    world_size: int = 1
    streaming: bool
    decoupled: bool = True
    max_request_batch_size: int = 1
    inputs: dict[str, str]
    outputs: dict[str, str]
    output_ids: bool = True
    speculative_counts: Literal["per_response", "perf_metrics", "none"]
    perf_metrics_outputs: list[str] = Field(default_factory=list)
    extra_inputs: dict[str, int | float | bool | str] = Field(default_factory=dict)
    text_stream_exact: bool = True
    text_output: Literal["delta", "cumulative"] = "delta"
    runtime: str | None = None
    max_draft_len: int | None = None
    medusa_choices: list[list[int]] | None = None
    max_batch_size: int
    max_input_len: int
    max_seq_len: int
    tokenizer_dir: str
    cuda_graphs: dict[str, bool | str] = Field(default_factory=dict)
    batching: dict[str, int | str] = Field(default_factory=dict)

    def to_json(self) -> str:
        """The file text (indented JSON, trailing newline)."""
        return json.dumps(self.model_dump(mode="json"), indent=2) + "\n"


def tensor_types(tensors: tuple[Tensor, ...] | list[Tensor]) -> dict[str, str]:
    """``{name: tritonclient dtype}`` in order."""
    return {t.name: t.client_dtype for t in tensors}


def read_repo_metadata(repo_dir: Path) -> RepoMetadata:
    """Read ``repo_dir/trtbench.json`` (:class:`RepoMetadata` as JSON).

    Raises:
        DeployError: missing (run ``trtbench deploy`` to render the repository).
        DataFileError: not JSON (truncated), not valid metadata (the message names the first
            bad field), or a ``schema_version`` newer than :data:`METADATA_SCHEMA_VERSION`.
    """
    path = repo_dir / METADATA_NAME
    if not path.is_file():
        raise DeployError(
            f"{path} is missing; render the model repository with `trtbench deploy RUN_DIR`"
        )
    fix = "render it again with `trtbench deploy RUN_DIR`"
    doc = read_json_document(path, max_schema_version=METADATA_SCHEMA_VERSION, fix=fix)
    try:
        return RepoMetadata.model_validate(doc)
    except ValidationError as exc:
        raise DataFileError(
            f"{path} is not valid trtbench repository metadata ({validation_problem(exc)}); "
            f"{fix}"
        ) from None
