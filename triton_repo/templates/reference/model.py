"""trtbench reference model: the PyTorch reference engine behind TRT-LLM's ensemble interface.

A decoupled Python-backend model named ``ensemble``. Inputs and outputs follow
``trtbench.triton_repo.interface``: ``text_input`` + ``max_tokens`` (+ optional ``stream``,
``exclude_input_in_output``, ``end_id``, ``min_tokens``, ``return_perf_metrics`` …) →
``text_output``, ``output_ids``, ``draft_tokens_proposed``, ``draft_tokens_accepted`` and,
with ``return_perf_metrics``, TRT-LLM's timing and speculative totals on the final response.

Streaming sends one response per engine step (its tokens and draft counts); the step that
ends generation carries the COMPLETE_FINAL flag (TRT-LLM behaviour); a generation that ends
otherwise (cancelled, engine stopped early) closes with a flags-only final response. Without
streaming, one response carries everything. Errors become an error response with the final
flag, never a hang. The engine decodes greedily: sampling inputs (temperature, top_k, top_p,
penalties, seed) are accepted for interface parity and ignored; beam_width > 1 is refused.

Config parameters: ``engine_dir`` (``RUN_DIR/engines/<variant>``), ``device`` (``auto``),
``add_special_tokens`` (``true``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils
from trtbench_detok import IncrementalDecoder
from trtbench_model_utils import (
    as_bool,
    error_response,
    ids_tensor,
    model_parameters,
    request_batch_size,
    scalar_input,
    scalar_tensor,
    text_tensor,
)

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class _Request:
    """The fields of one inference request the reference engine uses."""

    def __init__(self, request, tokenizer, add_special_tokens: bool) -> None:
        self.arrival_ns = time.time_ns()
        batch = request_batch_size(request)
        if batch != 1:
            raise ValueError(
                f"request batch size is {batch}; send one prompt per request (batch 1)"
            )
        self.prompt = scalar_input(request, "text_input", "")
        self.max_tokens = int(scalar_input(request, "max_tokens", 0))
        self.stream = bool(scalar_input(request, "stream", False))
        self.exclude_input = bool(
            scalar_input(request, "exclude_input_in_output", True)
        )
        self.end_id = scalar_input(request, "end_id")
        self.min_tokens = int(scalar_input(request, "min_tokens", 0))
        self.perf = bool(scalar_input(request, "return_perf_metrics", False))
        beam_width = int(scalar_input(request, "beam_width", 1))
        if beam_width != 1:
            raise ValueError(
                f"beam_width {beam_width} is not supported by the reference engine "
                "(greedy only); send beam_width 1"
            )
        self.input_ids = tokenizer.encode(
            self.prompt, add_special_tokens=add_special_tokens
        )


class _Totals:
    """Running totals of one request (tokens, draft counts, times in ns since the epoch)."""

    def __init__(self, arrival_ns: int) -> None:
        self.arrival_ns = arrival_ns
        self.scheduled_ns = time.time_ns()
        self.first_token_ns = 0
        self.last_token_ns = 0
        self.ids: list[int] = []
        self.proposed = 0
        self.accepted = 0

    def add(self, step) -> None:
        now = time.time_ns()
        self.first_token_ns = self.first_token_ns or now
        self.last_token_ns = now
        self.ids.extend(step.token_ids)
        self.proposed += step.draft_proposed
        self.accepted += step.draft_accepted

    def perf_tensors(self) -> list:
        rate = self.accepted / self.proposed if self.proposed else 0.0
        return [
            scalar_tensor("arrival_time_ns", self.arrival_ns, np.int64),
            scalar_tensor("first_scheduled_time_ns", self.scheduled_ns, np.int64),
            scalar_tensor("first_token_time_ns", self.first_token_ns, np.int64),
            scalar_tensor("last_token_time_ns", self.last_token_ns, np.int64),
            scalar_tensor("acceptance_rate", rate, np.float32),
            scalar_tensor("total_accepted_draft_tokens", self.accepted, np.int32),
            scalar_tensor("total_draft_tokens", self.proposed, np.int32),
        ]


def _token_tensors(text: str, ids, proposed: int, accepted: int) -> list:
    return [
        text_tensor("text_output", text),
        ids_tensor("output_ids", ids),
        scalar_tensor("draft_tokens_proposed", proposed, np.int32),
        scalar_tensor("draft_tokens_accepted", accepted, np.int32),
    ]


class TritonPythonModel:
    """Serves one reference engine; each model instance loads its own copy."""

    def initialize(self, args):
        from trtbench.builders.reference.engine import load_engine

        params = model_parameters(json.loads(args["model_config"]))
        self.engine = load_engine(
            Path(params["engine_dir"]), device=params.get("device", "auto")
        )
        self.tokenizer = self.engine.tokenizer
        self.add_special_tokens = as_bool(params.get("add_special_tokens", "true"))

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                self._serve(request, sender)
            except Exception as exc:  # noqa: BLE001 - every failure goes to the client
                sender.send(error_response(f"{type(exc).__name__}: {exc}"), flags=FINAL)
        return None

    def _is_last(self, req: _Request, totals: _Totals, step) -> bool:
        end_id = self.engine.eos_token_id if req.end_id is None else req.end_id
        if len(totals.ids) >= req.max_tokens:
            return True
        return (
            end_id is not None
            and end_id >= 0
            and end_id in step.token_ids
            and len(totals.ids) >= req.min_tokens
        )

    def _serve(self, request, sender) -> None:
        req = _Request(request, self.tokenizer, self.add_special_tokens)
        end_id = None if req.end_id is None else int(req.end_id)
        steps = self.engine.generate(
            req.input_ids, req.max_tokens, end_id=end_id, min_tokens=req.min_tokens
        )
        totals = _Totals(req.arrival_ns)
        if not req.stream:
            for step in steps:
                totals.add(step)
            self._send_whole(req, totals, sender)
            return
        try:
            self._stream(req, steps, totals, sender)
        finally:
            steps.close()

    def _stream(self, req: _Request, steps, totals: _Totals, sender) -> None:
        decoder = IncrementalDecoder(self.tokenizer)
        for step in steps:
            totals.add(step)
            last = self._is_last(req, totals, step)
            text = decoder.push(step.token_ids) + (decoder.flush() if last else "")
            tensors = _token_tensors(
                text, step.token_ids, step.draft_proposed, step.draft_accepted
            )
            if last and req.perf:
                tensors += totals.perf_tensors()
            sender.send(
                pb_utils.InferenceResponse(output_tensors=tensors),
                flags=FINAL if last else 0,
            )
            if last:
                return
            if sender.is_cancelled():
                break
        sender.send(flags=FINAL)

    def _send_whole(self, req: _Request, totals: _Totals, sender) -> None:
        ids = totals.ids if req.exclude_input else list(req.input_ids) + totals.ids
        text = self.tokenizer.decode(
            ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        tensors = _token_tensors(text, ids, totals.proposed, totals.accepted)
        if req.perf:
            tensors += totals.perf_tensors()
        sender.send(pb_utils.InferenceResponse(output_tensors=tensors), flags=FINAL)

    def finalize(self):
        self.engine = None
