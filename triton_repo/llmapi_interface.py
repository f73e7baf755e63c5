"""The tensors of TensorRT-LLM's Triton ``llmapi`` model (``tensorrt_llm``), and its rules.

Facts (read, not copied) from NVIDIA/TensorRT-LLM ``triton_backend/all_models/llmapi/``:

- ``tensorrt_llm/config.pbtxt`` @ c8c6df08bd0ead54cd47f7973e1e425c28a174cd, line 48 (``input [``) to
  the end: the inputs and outputs below (names, types, dims, optional flags). A later copy
  (@ 0a71057313ec, 2025-2026) adds the optional inputs ``image_url`` and ``lora_id`` /
  ``lora_name`` / ``lora_path`` / ``lora_ckpt_source``; model.yaml @ 0ebb1536ac12 names a
  ``sampling_param_logits_post_processor_name`` input. trtbench declares neither: the
  reference engine cannot honour them, so a client that sends them gets Triton's
  "unexpected inference input" instead of a silent no-op.
- The same config.pbtxt (lines 30-39) leaves ``max_batch_size`` and the transaction policy
  out: ``1/model.py`` @ b35ac1b64368 ``TritonPythonModel.auto_complete_config`` (same in the
  044a90d209e3 copy) sets them from ``model.yaml``'s ``triton_config`` (``max_batch_size``,
  ``decoupled``); every other model.yaml key goes to ``LLM(**args)``. tritonserver started
  with ``--disable-auto-complete-config`` (trtbench's server and ``launch_triton_server.py``
  both do) never calls it, so trtbench writes the same two values into config.pbtxt too
  (``max_batch_size: 0`` and ``decoupled: true``, equal to :data:`TRITON_CONFIG`; the
  backend accepts an auto-complete that sets a value already equal).
- ``max_batch_size: 0``: no batch dimension; a client sends ``text_input`` as shape ``[1]``
  and each scalar input as shape ``[1]``.
- Streaming (model.py ``_execute_single_request``): one response per engine result;
  ``text_output`` is ``CompletionOutput.text``, the *cumulative* text so far
  (``tensorrt_llm/executor/result.py`` @ a678b91aafbe: ``text`` vs the delta ``text_diff``).
  COMPLETE_FINAL rides on the response of the finished result.
- Perf metrics (``sampling_param_return_perf_metrics=true``; model.py ``_create_response``):
  sent on every response whose output holds ``request_perf_metrics`` (result.py keeps it from
  each engine response, so every response once the engine has them), values as of that step:
  ``kv_cache_*``, ``arrival_time_ns``, ``first_scheduled_time_ns``, ``first_token_time_ns``,
  ``last_token_time_ns``, ``acceptance_rate``, ``total_accepted_draft_tokens``,
  ``total_draft_tokens``. Each is a one-element tensor built with ``text_output``'s numpy
  dtype (object), so on the wire TensorRT-LLM sends them as BYTES holding the number's text
  although the config declares INT64 / FP32 / INT32; a client must accept both. The times
  are ``std::chrono::steady_clock`` points (executor ``types.h`` ``RequestPerfMetrics``)
  turned into ns with ``pd.Timedelta``: monotonic, not epoch — only differences between
  them mean something. trtbench's reference runtime sends the declared numeric dtypes and
  epoch ns (``time.time_ns()``), like its ensemble model.
- ``finish_reason`` / ``stop_reason`` / ``cumulative_logprob`` (STRING, ``str()`` of the
  value, ``"None"`` until known) only when ``return_finish_reason`` / ``return_stop_reason``
  / ``return_cumulative_logprob`` is true. Request defaults (``1/helpers.py`` @ 0df60f9ad779
  ``get_sampling_params_from_request``): ``exclude_input_from_output`` false,
  ``return_perf_metrics`` false, ``best_of`` 1, ``streaming`` false.
"""

from __future__ import annotations

from typing import Any

from trtbench.triton_repo.interface import Tensor

LLMAPI_MODEL_NAME = "tensorrt_llm"
"""The model's name (and folder) in TensorRT-LLM's llmapi repository."""

TRITON_CONFIG: dict[str, Any] = {"max_batch_size": 0, "decoupled": True}
"""``model.yaml``'s ``triton_config``: no Triton batching, decoupled (streaming)."""


def _opt(name: str, data_type: str, dims: tuple[int, ...] = (1,)) -> Tensor:
    return Tensor(name, data_type, dims, optional=True)


LLMAPI_INPUTS: tuple[Tensor, ...] = (
    Tensor("text_input", "TYPE_STRING", (-1,)),
    _opt("streaming", "TYPE_BOOL"),
    _opt("sampling_param_best_of", "TYPE_INT32"),
    _opt("sampling_param_temperature", "TYPE_FP32"),
    _opt("sampling_param_top_k", "TYPE_INT32"),
    _opt("sampling_param_top_p", "TYPE_FP32"),
    _opt("sampling_param_frequency_penalty", "TYPE_FP32"),
    _opt("sampling_param_presence_penalty", "TYPE_FP32"),
    _opt("sampling_param_max_tokens", "TYPE_INT32"),
    _opt("sampling_param_stop", "TYPE_STRING", (-1,)),
    _opt("sampling_param_seed", "TYPE_UINT64"),
    _opt("sampling_param_exclude_input_from_output", "TYPE_BOOL"),
    _opt("sampling_param_return_perf_metrics", "TYPE_BOOL"),
    _opt("return_finish_reason", "TYPE_BOOL"),
    _opt("return_stop_reason", "TYPE_BOOL"),
    _opt("return_cumulative_logprob", "TYPE_BOOL"),
    _opt("stop", "TYPE_BOOL"),
)

LLMAPI_TEXT_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("text_output", "TYPE_STRING", (-1,)),
    Tensor("finish_reason", "TYPE_STRING", (-1,)),
    Tensor("stop_reason", "TYPE_STRING", (-1,)),
    Tensor("cumulative_logprob", "TYPE_FP32", (-1,)),
)
LLMAPI_KV_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("kv_cache_reused_block", "TYPE_INT32", (-1,)),
    Tensor("kv_cache_missed_block", "TYPE_INT32", (-1,)),
    Tensor("kv_cache_alloc_new_blocks", "TYPE_INT32", (-1,)),
    Tensor("kv_cache_alloc_total_blocks", "TYPE_INT32", (-1,)),
    Tensor("kv_cache_hit_rate", "TYPE_FP32", (-1,)),
)
LLMAPI_TIMING_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("arrival_time_ns", "TYPE_INT64"),
    Tensor("first_scheduled_time_ns", "TYPE_INT64"),
    Tensor("first_token_time_ns", "TYPE_INT64"),
    Tensor("last_token_time_ns", "TYPE_INT64"),
)
LLMAPI_SPEC_OUTPUTS: tuple[Tensor, ...] = (
    Tensor("acceptance_rate", "TYPE_FP32"),
    Tensor("total_accepted_draft_tokens", "TYPE_INT32"),
    Tensor("total_draft_tokens", "TYPE_INT32"),
)
LLMAPI_OUTPUTS: tuple[Tensor, ...] = (
    *LLMAPI_TEXT_OUTPUTS,
    *LLMAPI_KV_OUTPUTS,
    *LLMAPI_TIMING_OUTPUTS,
    *LLMAPI_SPEC_OUTPUTS,
)

REQUEST_EXTRAS: dict[str, bool] = {
    "sampling_param_exclude_input_from_output": True,
    "sampling_param_return_perf_metrics": True,
}
"""Inputs a load test sends with every request (prompt never echoed; perf metrics on)."""


def perf_output_names(runtime: str) -> list[str]:
    """Outputs sent with ``sampling_param_return_perf_metrics=true``: TensorRT-LLM's model
    also sends the KV-cache counters; the reference runtime has no paged KV cache and sends
    only the timings and the speculative totals."""
    kv = LLMAPI_KV_OUTPUTS if runtime == "tensorrt_llm" else ()
    return [t.name for t in (*kv, *LLMAPI_TIMING_OUTPUTS, *LLMAPI_SPEC_OUTPUTS)]
