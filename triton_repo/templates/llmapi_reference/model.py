"""trtbench reference runtime of Triton's ``llmapi`` model: the reference engine behind the
``tensorrt_llm`` interface of TensorRT-LLM's ``triton_backend/all_models/llmapi``.

Reads ``model.yaml`` beside this file like TensorRT-LLM's model does: ``triton_config``
(``max_batch_size``, ``decoupled``) goes to Triton through ``auto_complete_config``; every
other key is an ``LLM(...)`` argument, mapped onto the reference engine by
``trtbench.builders.reference.llm_args`` (DraftTarget → draft_target, NGram → ngram, none
→ baseline; Eagle3 / MTP fail to load, naming the missing reference mode).

Tensors (``trtbench.triton_repo.llmapi_interface``; no batch dimension): reads
``text_input``, ``streaming``, ``sampling_param_max_tokens`` (default 32, SamplingParams'),
``sampling_param_exclude_input_from_output``, ``sampling_param_return_perf_metrics``,
``return_finish_reason`` and ``stop``; other sampling inputs are accepted and ignored (the
engine decodes greedily). As TensorRT-LLM's model: with streaming, one response per engine
step whose ``text_output`` is the cumulative text so far, COMPLETE_FINAL on the last step;
without, one response. With ``return_perf_metrics`` every response carries the timings
(epoch ns here) and the running speculative totals; ``finish_reason`` only with
``return_finish_reason``. No KV-cache counters (no paged KV cache). Batching is the
engine's in-flight batcher; responses go out through the outbox thread.

Config parameters: ``device`` (``auto``), ``cpu_threads`` (torch threads on CPU, 1).
"""

from __future__ import annotations

import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils
import yaml
from trtbench_detok import IncrementalDecoder
from trtbench_model_utils import (
    CANCEL_CHECK_EVERY,
    DeliveryResponder,
    EngineModel,
    Outbox,
    error_response,
    scalar_input,
)

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
CONFIG_FILE = "model.yaml"
DEFAULT_MAX_TOKENS = 32  # TensorRT-LLM SamplingParams.max_tokens default


def read_model_yaml(model_dir: str) -> dict:
    """``model.yaml`` of this model (``LLM_CONFIG_PATH`` overrides the name, as upstream)."""
    path = os.path.join(model_dir, os.environ.get("LLM_CONFIG_PATH", CONFIG_FILE))
    with open(path, encoding="utf-8") as handle:
        doc = yaml.safe_load(handle)
    if not isinstance(doc, dict) or not isinstance(doc.get("triton_config"), dict):
        raise ValueError(f"{path} is not a mapping with a triton_config mapping")
    return doc


def _tensor(name: str, value, dtype) -> pb_utils.Tensor:
    return pb_utils.Tensor(name, np.asarray([value], dtype=dtype))


def _text(name: str, text: str) -> pb_utils.Tensor:
    return _tensor(name, text.encode("utf-8"), np.object_)


class _Request:
    def __init__(self, request, tokenizer) -> None:
        self.arrival_ns = time.time_ns()
        prompt = scalar_input(request, "text_input", "")
        self.stream = bool(scalar_input(request, "streaming", False))
        self.max_tokens = int(
            scalar_input(request, "sampling_param_max_tokens", DEFAULT_MAX_TOKENS)
        )
        self.exclude_input = bool(
            scalar_input(request, "sampling_param_exclude_input_from_output", False)
        )
        self.perf = bool(
            scalar_input(request, "sampling_param_return_perf_metrics", False)
        )
        self.finish_reason = bool(scalar_input(request, "return_finish_reason", False))
        self.prompt = prompt
        self.input_ids = tokenizer.encode(prompt, add_special_tokens=True)


class _Responder(DeliveryResponder):
    """One request's responses, from the batcher's deliveries (sent by the outbox)."""

    def __init__(self, req: _Request, sender, tokenizer, outbox: Outbox) -> None:
        super().__init__(sender, outbox)
        self.req, self.tokenizer = req, tokenizer
        self.detok = IncrementalDecoder(tokenizer)
        self.text = ""
        self.ids: list[int] = []
        self.proposed = self.accepted = 0
        self.scheduled_ns = self.first_token_ns = self.last_token_ns = 0

    def _respond(self, step, final: bool, error) -> None:
        if error is not None or step is None:  # failed, or cancelled by the client
            self.closed = True
            if error is None:
                self.sender.send(flags=FINAL)
            else:
                msg = f"{type(error).__name__}: {error}"
                self.sender.send(error_response(msg), flags=FINAL)
            return
        now = time.time_ns()
        if not self.first_token_ns:
            self.scheduled_ns = self.handle.admitted_ns or now
            self.first_token_ns = now
        self.last_token_ns = now
        self.ids.extend(step.token_ids)
        self.proposed += step.draft_proposed
        self.accepted += step.draft_accepted
        self.text += self.detok.push(step.token_ids) + (
            self.detok.flush() if final else ""
        )
        if self.req.stream or final:
            self.sender.send(self._response(final), flags=FINAL if final else 0)
        self.deliveries += 1
        if final:
            self.closed = True
        elif self.deliveries % CANCEL_CHECK_EVERY == 0 and self.sender.is_cancelled():
            self.handle.cancel()

    def _response(self, final: bool) -> pb_utils.InferenceResponse:
        req = self.req
        text = self.text
        if not req.stream and not req.exclude_input:
            ids = list(req.input_ids) + self.ids
            text = self.tokenizer.decode(
                ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
            )
        tensors = [_text("text_output", text)]
        if req.finish_reason:
            reason = "None"
            if final:
                reason = "length" if len(self.ids) >= req.max_tokens else "stop"
            tensors.append(_text("finish_reason", reason))
        if req.perf:
            rate = self.accepted / self.proposed if self.proposed else 0.0
            tensors += [
                _tensor("arrival_time_ns", req.arrival_ns, np.int64),
                _tensor("first_scheduled_time_ns", self.scheduled_ns, np.int64),
                _tensor("first_token_time_ns", self.first_token_ns, np.int64),
                _tensor("last_token_time_ns", self.last_token_ns, np.int64),
                _tensor("acceptance_rate", rate, np.float32),
                _tensor("total_accepted_draft_tokens", self.accepted, np.int32),
                _tensor("total_draft_tokens", self.proposed, np.int32),
            ]
        return pb_utils.InferenceResponse(output_tensors=tensors)


class TritonPythonModel(EngineModel):
    """The reference engine behind the llmapi ``tensorrt_llm`` interface (set-up and
    ``finalize``: ``EngineModel``)."""

    @classmethod
    def auto_complete_config(cls, auto_complete_model_config):
        triton = read_model_yaml(pb_utils.get_model_dir())["triton_config"]
        auto_complete_model_config.set_max_batch_size(int(triton["max_batch_size"]))
        auto_complete_model_config.set_model_transaction_policy(
            {"decoupled": bool(triton["decoupled"])}
        )
        return auto_complete_model_config

    def initialize(self, args):
        from trtbench.builders.reference.llm_args import engine_from_llm_args

        model_dir = os.path.join(args["model_repository"], args["model_version"])
        doc = read_model_yaml(model_dir)
        llm_args = {k: v for k, v in doc.items() if k != "triton_config"}
        self.start_engine(
            args,
            lambda p: engine_from_llm_args(llm_args, device=p.get("device", "auto")),
        )
        pb_utils.Logger.log_info(
            f"trtbench llmapi reference engine {self.engine.mode} on "
            f"{self.engine.device}: draft_len {self.engine.draft_len}, max_batch_size "
            f"{self.engine.max_batch_size}, cuda graphs "
            f"{self.engine.cuda_graphs.reason or self.engine.cuda_graphs.available}"
        )

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                if scalar_input(request, "stop", False):
                    sender.send(
                        error_response(
                            "stop requests are not supported by the "
                            "reference runtime; cancel the gRPC call"
                        ),
                        flags=FINAL,
                    )
                    continue
                req = _Request(request, self.tokenizer)
                responder = _Responder(req, sender, self.tokenizer, self.outbox)
                responder.handle = self.engine.submit(
                    req.input_ids, req.max_tokens, deliver=responder
                )
                responder.ready.set()
            except Exception as exc:  # noqa: BLE001 - every failure goes to the client
                sender.send(error_response(f"{type(exc).__name__}: {exc}"), flags=FINAL)
        return None
