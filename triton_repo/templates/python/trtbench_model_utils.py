"""Helpers shared by trtbench's Python-backend models (copied next to each model.py).

Runs inside Triton's Python backend stub: only numpy and ``triton_python_backend_utils``
are assumed. Requests carry a leading batch dimension (``max_batch_size > 0``), so a scalar
input arrives as shape ``[1, 1]``.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

# GIL switch interval of a reference-engine stub process: the batcher's thread, the outbox
# thread and the stub's own threads share the GIL, and at the default 5 ms a decode step of
# the tiny models (~1 ms of many small torch ops, each releasing the GIL) was measured ~1.6x
# slower.
GIL_SWITCH_S = 0.001
# A client that went away is noticed within this many steps of its request (each check
# is an IPC round trip to the Triton process).
CANCEL_CHECK_EVERY = 4
# How often the engine's gauges are published (TensorRT-LLM: stats_check_period_ms, 100).
STATS_PERIOD_S = 0.1
# (family, category label, {category: ServingStats field or callable}) as TensorRT-LLM's
# backend names them (NVIDIA/TensorRT-LLM
# ``triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/``).
GAUGES = (
    (
        "nv_trt_llm_kv_cache_block_metrics",
        "kv_cache_block_type",
        {
            "max": "max_blocks",
            "free": "free_blocks",
            "used": "used_blocks",
            "tokens_per": "tokens_per_block",
            "fraction": lambda s: s.used_blocks / s.max_blocks if s.max_blocks else 0.0,
        },
    ),
    (
        "nv_trt_llm_request_metrics",
        "request_type",
        {
            "active": "active",
            "max": "max_requests",
            "scheduled": "scheduled",
            "context": "context",
            "waiting": "waiting",
        },
    ),
    (
        "nv_trt_llm_inflight_batcher_metrics",
        "inflight_batcher_specific_metric",
        {
            "paused_requests": "paused",
            "generation_requests": lambda s: s.scheduled - s.context,
        },
    ),
    (
        "nv_trt_llm_general_metrics",
        "general_type",
        {"iteration_counter": "steps", "timestamp": lambda s: time.time_ns() // 1000},
    ),
)
# trtbench's own totals (counters; TensorRT-LLM exports no speculative metric).
COUNTERS = (
    "trtbench_reference_counters",
    "counter",
    (
        "draft_tokens",
        "accepted_draft_tokens",
        "preemptions",
        "kv_waits",
        "draft_skipped_for_kv",
        "block_steps",
        "speculative_block_steps",
    ),
)


def model_parameters(model_config: dict) -> dict[str, str]:
    """``parameters { key: ... value { string_value } }`` of a parsed model config."""
    params = model_config.get("parameters", {})
    return {key: str(value.get("string_value", "")) for key, value in params.items()}


def request_batch_size(request, name: str = "text_input") -> int:
    """Rows in the request's ``name`` tensor (the request batch size)."""
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return 0 if tensor is None else int(tensor.as_numpy().shape[0])


def scalar_input(request, name: str, default=None):
    """The first element of input ``name`` as a Python value, or ``default`` when absent."""
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return default
    values = tensor.as_numpy().reshape(-1)
    if values.size == 0:
        return default
    value = values[0]
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value.item() if hasattr(value, "item") else value


def as_bool(value) -> bool:
    """A config string (``"true"``/``"1"``/``"yes"``) or a numpy scalar as a bool."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def text_tensor(name: str, text: str) -> pb_utils.Tensor:
    """A BYTES output of shape ``[1, 1]``."""
    return pb_utils.Tensor(name, np.array([[text.encode("utf-8")]], dtype=np.object_))


def ids_tensor(name: str, ids) -> pb_utils.Tensor:
    """An INT32 output of shape ``[1, len(ids)]``."""
    return pb_utils.Tensor(name, np.asarray(ids, dtype=np.int32).reshape(1, -1))


def scalar_tensor(name: str, value, dtype) -> pb_utils.Tensor:
    """A scalar output of shape ``[1, 1]``."""
    return pb_utils.Tensor(name, np.array([[value]], dtype=dtype))


def token_tensors(text: str, ids, proposed: int, accepted: int) -> list:
    """``text_output``, ``output_ids`` and the draft counts of one response."""
    return [
        text_tensor("text_output", text),
        ids_tensor("output_ids", ids),
        scalar_tensor("draft_tokens_proposed", proposed, np.int32),
        scalar_tensor("draft_tokens_accepted", accepted, np.int32),
    ]


def arrival_tensor(arrival_ns: int) -> pb_utils.Tensor:
    """``arrival_time_ns`` (INT64 ``[1, 1]``, ns since the epoch) alone."""
    return scalar_tensor("arrival_time_ns", arrival_ns, np.int64)


def perf_tensors(
    arrival_ns: int,
    scheduled_ns: int,
    first_token_ns: int,
    last_token_ns: int,
    proposed: int,
    accepted: int,
) -> list:
    """TRT-LLM's perf-metrics outputs of a final response (times in ns since the epoch;
    ``acceptance_rate`` = accepted / proposed, 0 when nothing was proposed)."""
    rate = accepted / proposed if proposed else 0.0
    return [
        scalar_tensor("arrival_time_ns", arrival_ns, np.int64),
        scalar_tensor("first_scheduled_time_ns", scheduled_ns, np.int64),
        scalar_tensor("first_token_time_ns", first_token_ns, np.int64),
        scalar_tensor("last_token_time_ns", last_token_ns, np.int64),
        scalar_tensor("acceptance_rate", rate, np.float32),
        scalar_tensor("total_accepted_draft_tokens", accepted, np.int32),
        scalar_tensor("total_draft_tokens", proposed, np.int32),
    ]


def error_response(message: str) -> pb_utils.InferenceResponse:
    """A response that carries only an error (the client sees ``message``)."""
    return pb_utils.InferenceResponse(
        output_tensors=[], error=pb_utils.TritonError(message)
    )


def special_ids(tokenizer) -> tuple[int, int]:
    """Default ``(end_id, pad_id)``: the tokenizer's eos (-1 if none) and pad (else eos)."""
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id
    end_id = int(eos if eos is not None else -1)
    return end_id, int(pad if pad is not None else max(end_id, 0))


def respond_each(requests, handle, label: str) -> list:
    """``[handle(request)]`` for a non-decoupled model; a failure becomes an error
    response (prefixed with ``label``) for that request only."""
    responses = []
    for request in requests:
        try:
            responses.append(handle(request))
        except Exception as exc:  # noqa: BLE001 - reported to the client
            responses.append(error_response(f"{label}: {exc}"))
    return responses


class Outbox:
    """Sends responses on its own thread, in delivery order.

    Each ``sender.send`` (and ``is_cancelled``) is an IPC round trip to the Triton process
    (~0.2 ms each on 2 busy cores); done on the batcher's thread they would add up per row
    between decode steps. Here the batcher queues the delivery and goes on to its next
    step; the outbox calls ``responder.respond(*delivery)``.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, name="trtbench-responses", daemon=True
        )
        self._thread.start()

    def put(self, responder, *delivery) -> None:
        self._queue.put((responder, delivery))

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            responder, delivery = item
            try:
                responder.respond(*delivery)
            except Exception as exc:  # noqa: BLE001 - the thread must serve the others
                pb_utils.Logger.log_error(f"sending a response failed: {exc!r}")

    def close(self, timeout_s: float = 30.0) -> None:
        """Send what is queued, then stop."""
        self._queue.put(None)
        self._thread.join(timeout_s)


class DeliveryResponder:
    """Base of one request's responder: takes the batcher's deliveries and has the outbox
    send them (``respond``, on the outbox thread). A subclass sets ``req``, ``sender``,
    ``outbox`` … in its ``__init__`` after calling this one's, and implements
    ``_respond(step, final, error)``; an exception there becomes one final error response
    and cancels the request. ``handle`` is the engine's request handle; ``ready`` is set
    once it is assigned.
    """

    def __init__(self, sender, outbox: Outbox) -> None:
        self.sender = sender
        self.outbox = outbox
        self.handle = None
        self.ready = threading.Event()
        self.closed = False
        self.deliveries = 0

    def __call__(self, step, final: bool, error) -> None:
        """``deliver(step, final, error)`` of ``ReferenceEngine.submit`` (batcher thread)."""
        self.outbox.put(self, step, final, error)

    def respond(self, step, final: bool, error) -> None:
        """Send the response(s) for one delivery (outbox thread)."""
        self.ready.wait()
        if self.closed:
            return
        try:
            self._respond(step, final, error)
        except Exception as exc:  # noqa: BLE001 - every failure goes to the client
            self.closed = True
            self.handle.cancel()
            self.sender.send(
                error_response(f"{type(exc).__name__}: {exc}"),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )

    def _respond(self, step, final: bool, error) -> None:
        raise NotImplementedError


class EngineMetrics:
    """Publishes ``engine.stats()`` (``ReferenceEngine.ServingStats``) every
    :data:`STATS_PERIOD_S` through Triton's custom metrics API, in the families and labels of
    :data:`GAUGES` (each series also labelled ``model`` and ``version``) and :data:`COUNTERS`."""

    def __init__(self, engine, model: str, version: str) -> None:
        self._engine = engine
        base = {"model": model, "version": version}
        self._gauges, self._counters, self._last, self._families = [], [], {}, []
        for name, label, cats in GAUGES:
            family = pb_utils.MetricFamily(
                name=name,
                description=f"{name} (trtbench reference engine)",
                kind=pb_utils.MetricFamily.GAUGE,
            )
            self._families.append(family)  # a family lives while referenced
            for cat, get in cats.items():
                metric = family.Metric(labels={**base, label: cat})
                self._gauges.append((metric, get))
        name, label, fields = COUNTERS
        family = pb_utils.MetricFamily(
            name=name,
            description="trtbench reference engine totals",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        for field in fields:
            self._counters.append((family.Metric(labels={**base, label: field}), field))
        self._families.append(family)
        self._stop = threading.Event()
        self.publish()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def publish(self) -> None:
        stats = self._engine.stats()
        for metric, get in self._gauges:
            value = get(stats) if callable(get) else getattr(stats, get)
            metric.set(float(value))
        for metric, field in self._counters:
            value = getattr(stats, field)
            if value > self._last.get(field, 0):
                metric.increment(float(value - self._last.get(field, 0)))
                self._last[field] = value

    def _run(self) -> None:
        while not self._stop.wait(STATS_PERIOD_S):
            try:
                self.publish()
            except Exception as exc:  # noqa: BLE001 - metrics never stop serving
                pb_utils.Logger.log_error(f"publishing engine metrics failed: {exc!r}")
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)


class EngineModel:
    """Base of the reference-engine models (``reference/model.py``,
    ``llmapi_reference/model.py``): the set-up their ``initialize`` shares and their
    ``finalize``. Imports torch only when called (other models copy this file too)."""

    engine = None
    outbox = None
    tokenizer = None
    metrics = None

    def start_engine(self, args, load) -> dict:
        """Load the engine and get the process ready to serve it.

        ``load(params)`` returns the engine from the model's config parameters (a dict of
        strings). Then: torch intra-op threads = ``cpu_threads`` (default 1) when the engine
        runs on CPU, the GIL switch interval at most :data:`GIL_SWITCH_S`, ``self.tokenizer``
        and a started :class:`Outbox`.

        Returns:
            The config parameters.
        """
        params = model_parameters(json.loads(args["model_config"]))
        self.engine = load(params)
        if self.engine.device.type == "cpu":
            import torch

            torch.set_num_threads(int(params.get("cpu_threads") or 1))
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))
        self.tokenizer = self.engine.tokenizer
        self.outbox = Outbox()
        if hasattr(pb_utils, "MetricFamily") and hasattr(self.engine, "stats"):
            self.metrics = EngineMetrics(
                self.engine, args["model_name"], str(args["model_version"])
            )
        return params

    def finalize(self):
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None
        if self.engine is not None:
            self.engine.close()  # requests still running end with an error response
            self.outbox.close()  # ... which is sent before the outbox stops
        self.engine = None
