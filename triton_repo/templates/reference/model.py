"""trtbench reference model: the PyTorch reference engine behind TRT-LLM's ensemble interface.

A decoupled Python-backend model named ``ensemble``. Inputs and outputs follow
``trtbench.triton_repo.interface``: ``text_input`` + ``max_tokens`` (+ optional ``stream``,
``exclude_input_in_output``, ``end_id``, ``min_tokens``, ``return_perf_metrics`` …) →
``text_output``, ``output_ids``, ``draft_tokens_proposed``, ``draft_tokens_accepted`` and,
with ``return_perf_metrics``, TRT-LLM's timing and speculative totals on the final response.
The first response always carries ``arrival_time_ns`` (``time.time_ns()`` when ``execute``
took the request), so a client can measure its client→server delay without asking for
perf metrics.

In-flight batching (TRT-LLM's ``inflight_fused_batching``): ``execute`` hands each request to
the engine's batcher and returns at once; the batcher's loop thread decodes up to
``max_batch_size`` requests together (one batched forward per decode step; the others wait,
first come first served) and the responses are sent from its deliveries, by a thread of
their own (the outbox) so that sending does not hold up the next decode step.

Streaming sends one response per engine step (its tokens and draft counts:
``draft_tokens_accepted`` is what the engine's verification accepted, not reduced when the
step is cut by ``max_tokens`` or the end token; ``output_ids`` are the emitted tokens); the
step that ends generation carries the COMPLETE_FINAL flag (TRT-LLM behaviour); a generation that ends
otherwise (cancelled by the client) closes with a flags-only final response. Without
streaming, one response carries everything. Errors become an error response with the final
flag, never a hang. The engine decodes greedily: sampling inputs (temperature, top_k, top_p,
penalties, seed) are accepted for interface parity and ignored; beam_width > 1 is refused.

Config parameters: ``engine_dir`` (``RUN_DIR/engines/<variant>``), ``device`` (``auto``),
``add_special_tokens`` (``true``), ``cpu_threads`` (torch intra-op threads when the engine
runs on CPU, default 1: on 2 shared cores 2 threads were measured to collapse throughput,
``scripts/bench_reference.py``).
"""

from __future__ import annotations

import time
from pathlib import Path

import triton_python_backend_utils as pb_utils
from trtbench_detok import IncrementalDecoder
from trtbench_model_utils import (
    CANCEL_CHECK_EVERY,
    DeliveryResponder,
    EngineModel,
    Outbox,
    arrival_tensor,
    as_bool,
    error_response,
    perf_tensors,
    request_batch_size,
    scalar_input,
    token_tensors,
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
        return perf_tensors(
            self.arrival_ns,
            self.scheduled_ns,
            self.first_token_ns,
            self.last_token_ns,
            self.proposed,
            self.accepted,
        )


class _Responder(DeliveryResponder):
    """One request's responses, built from the batcher's deliveries (sent by the outbox)."""

    def __init__(self, req: _Request, sender, tokenizer, outbox: Outbox) -> None:
        super().__init__(sender, outbox)
        self.req = req
        self.tokenizer = tokenizer
        self.totals = _Totals(req.arrival_ns)
        self.detok = IncrementalDecoder(tokenizer) if req.stream else None

    def _respond(self, step, final: bool, error) -> None:
        if error is not None:
            self.closed = True
            self.sender.send(
                error_response(f"{type(error).__name__}: {error}"), flags=FINAL
            )
            return
        if step is None:  # ended without a last step: cancelled
            self.closed = True
            self.sender.send(flags=FINAL)
            return
        if self.totals.first_token_ns == 0:
            self.totals.scheduled_ns = self.handle.admitted_ns or time.time_ns()
        self.totals.add(step)
        if self.req.stream:
            self._send_step(step, final)
        elif final:
            self._send_whole()
        self.deliveries += 1
        if final:
            self.closed = True
        elif self.deliveries % CANCEL_CHECK_EVERY == 0 and self.sender.is_cancelled():
            self.handle.cancel()

    def _send_step(self, step, final: bool) -> None:
        text = self.detok.push(step.token_ids) + (self.detok.flush() if final else "")
        tensors = token_tensors(
            text, step.token_ids, step.draft_proposed, step.draft_accepted
        )
        if final and self.req.perf:
            tensors += self.totals.perf_tensors()
        elif self.deliveries == 0:  # the client's client→server delay
            tensors.append(arrival_tensor(self.req.arrival_ns))
        self.sender.send(
            pb_utils.InferenceResponse(output_tensors=tensors),
            flags=FINAL if final else 0,
        )

    def _send_whole(self) -> None:
        req, totals = self.req, self.totals
        ids = totals.ids if req.exclude_input else list(req.input_ids) + totals.ids
        text = self.tokenizer.decode(
            ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        tensors = token_tensors(text, ids, totals.proposed, totals.accepted)
        tensors += (
            totals.perf_tensors() if req.perf else [arrival_tensor(req.arrival_ns)]
        )
        self.sender.send(
            pb_utils.InferenceResponse(output_tensors=tensors), flags=FINAL
        )


class TritonPythonModel(EngineModel):
    """Serves one reference engine with in-flight batching; each model instance loads its
    own copy (set-up and ``finalize``: ``EngineModel``)."""

    def initialize(self, args):
        import torch

        from trtbench.builders.reference.loading import load_engine

        params = self.start_engine(
            args,
            lambda p: load_engine(
                Path(p["engine_dir"]), device=p.get("device", "auto")
            ),
        )
        self.add_special_tokens = as_bool(params.get("add_special_tokens", "true"))
        pb_utils.Logger.log_info(
            f"trtbench reference engine {self.engine.mode} on {self.engine.device}: "
            f"in-flight batching, max_batch_size {self.engine.max_batch_size}, "
            f"torch threads {torch.get_num_threads()}"
        )

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                req = _Request(request, self.tokenizer, self.add_special_tokens)
                responder = _Responder(req, sender, self.tokenizer, self.outbox)
                responder.handle = self.engine.submit(
                    req.input_ids,
                    req.max_tokens,
                    end_id=None if req.end_id is None else int(req.end_id),
                    min_tokens=req.min_tokens,
                    deliver=responder,
                )
                responder.ready.set()
            except Exception as exc:  # noqa: BLE001 - every failure goes to the client
                sender.send(error_response(f"{type(exc).__name__}: {exc}"), flags=FINAL)
        return None
