"""Triton gRPC client for the load test: probe a model, build requests, send them.

``tritonclient.grpc.aio`` cannot ask for the empty final response (the ``triton_`` parameter
prefix is reserved there; research/triton_backend.md §6), so requests are
``service_pb2.ModelInferRequest`` messages built here and sent on a ``grpc.aio`` channel
through ``GRPCInferenceServiceStub``. Each request opens its own ``ModelStreamInfer`` call,
so per-request deadlines and cancellation need no bookkeeping.

:data:`ENDPOINTS` holds one async function per endpoint kind, all with the same signature
(vLLM's ``ASYNC_REQUEST_FUNCS`` shape): ``stream`` (decoupled model, ``stream=true``),
``nostream`` (decoupled model asked for one response, e.g. TRT-LLM BLS draft-target) and
``unary`` (non-decoupled model, ``ModelInfer``).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import grpc
import numpy as np
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc

from trtbench.errors import LoadTestError

REQUIRED_INPUTS = {"text_input": "BYTES", "max_tokens": "INT32"}
MIN_TOKENS_INPUTS = ("min_tokens", "min_length")
TEXT_OUTPUT = "text_output"
IDS_OUTPUT = "output_ids"
# Speculative-decoding counts a server may return. ``draft_tokens_proposed`` /
# ``draft_tokens_accepted`` count the steps behind one response (trtbench's reference and
# BLS models, triton_repo/interface.py); ``total_*`` are running totals per request
# (TRT-LLM perf metrics, with ``return_perf_metrics=true``).
DRAFT_OUTPUTS = ("draft_tokens_proposed", "total_draft_tokens")
ACCEPTED_OUTPUTS = ("draft_tokens_accepted", "total_accepted_draft_tokens")
PERF_METRICS_INPUT = "return_perf_metrics"
# When the request reached the model (epoch ns): the reference model sends it on the first
# response, TRT-LLM's perf metrics on the final one.
ARRIVAL_OUTPUT = "arrival_time_ns"
FINAL_PARAM = "triton_final_response"
EMPTY_FINAL_PARAM = "triton_enable_empty_final_response"
_DTYPES = {
    "BYTES": None,
    "INT32": "<i4",
    "INT64": "<i8",
    "BOOL": "?",
    "FP32": "<f4",
    "UINT64": "<u8",
}


@dataclass(frozen=True)
class ModelInterface:
    """What a served model takes and returns (from its config).

    Attributes:
        name: model name.
        inputs: input name → (Triton datatype, shape of one request's tensor).
        outputs: output names.
        decoupled: the model may send several responses per request.
    """

    name: str
    inputs: dict[str, tuple[str, tuple[int, ...]]]
    outputs: tuple[str, ...]
    decoupled: bool

    @property
    def returns_ids(self) -> bool:
        return IDS_OUTPUT in self.outputs

    def default_endpoint(self) -> str:
        """``stream`` for decoupled models with a ``stream`` input, else the fitting kind."""
        if not self.decoupled:
            return "unary"
        return "stream" if "stream" in self.inputs else "nostream"


def _request_shape(dims: list[int], max_batch_size: int) -> tuple[int, ...]:
    shape = [1 if d < 0 else d for d in dims]
    return tuple([1, *shape] if max_batch_size > 0 else shape)


def interface_from_config(config: model_config_pb2.ModelConfig) -> ModelInterface:
    """Read a model's tensors and transaction policy from its ``ModelConfig`` (pure)."""
    inputs = {
        i.name: (
            model_config_pb2.DataType.Name(i.data_type).removeprefix("TYPE_"),
            _request_shape(list(i.dims), config.max_batch_size),
        )
        for i in config.input
    }
    inputs = {k: ("BYTES" if t == "STRING" else t, s) for k, (t, s) in inputs.items()}
    return ModelInterface(
        name=config.name,
        inputs=inputs,
        outputs=tuple(o.name for o in config.output),
        # An ensemble's own config names no policy; Triton makes it decoupled when a step
        # is (research/triton_backend.md §3), as in every TRT-LLM streaming deployment.
        decoupled=bool(config.model_transaction_policy.decoupled)
        or config.platform == "ensemble",
    )


def check_interface(interface: ModelInterface, url: str) -> None:
    """Raise LoadTestError naming the first required input the model lacks or mistypes."""
    for name, dtype in REQUIRED_INPUTS.items():
        got = interface.inputs.get(name)
        if got is None:
            have = ", ".join(sorted(interface.inputs)) or "none"
            raise LoadTestError(
                f"model {interface.name!r} at {url} has no input tensor {name!r} (it has: "
                f"{have}); trtbench sends text_input BYTES and max_tokens INT32 — point "
                "--model at an ensemble / BLS-style LLM model"
            )
        if got[0] != dtype:
            raise LoadTestError(
                f"model {interface.name!r} input {name!r} is {got[0]}, expected {dtype}; "
                "point --model at an ensemble / BLS-style LLM model"
            )
    if TEXT_OUTPUT not in interface.outputs and IDS_OUTPUT not in interface.outputs:
        raise LoadTestError(
            f"model {interface.name!r} returns neither {TEXT_OUTPUT!r} nor {IDS_OUTPUT!r}; "
            "point --model at an LLM model"
        )


async def probe_model(url: str, model: str, timeout_s: float = 10.0) -> ModelInterface:
    """Check the server is up and ``model`` is ready with usable inputs.

    Raises:
        LoadTestError: unreachable server, unknown / not-ready model (lists the ready
            ones), or inputs that do not match (names the missing tensor).
    """
    async with grpc.aio.insecure_channel(url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            await stub.ServerReady(service_pb2.ServerReadyRequest(), timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise LoadTestError(
                f"cannot reach Triton at {url} over gRPC ({exc.code().name}); start the "
                "server or pass --url HOST:PORT of its gRPC port"
            ) from None
        try:
            ready = await stub.ModelReady(
                service_pb2.ModelReadyRequest(name=model), timeout=timeout_s
            )
        except grpc.aio.AioRpcError:
            ready = service_pb2.ModelReadyResponse(ready=False)
        if not ready.ready:
            index = await stub.RepositoryIndex(
                service_pb2.RepositoryIndexRequest(ready=True), timeout=timeout_s
            )
            names = ", ".join(sorted(m.name for m in index.models)) or "none"
            raise LoadTestError(
                f"model {model!r} is not ready on {url} (ready models: {names}); pass "
                "--model with one of them"
            )
        config = await stub.ModelConfig(
            service_pb2.ModelConfigRequest(name=model), timeout=timeout_s
        )
    interface = interface_from_config(config.config)
    check_interface(interface, url)
    return interface


def _serialize(dtype: str, values: list) -> bytes:
    if dtype == "BYTES":
        parts = [v if isinstance(v, bytes) else str(v).encode() for v in values]
        return b"".join(struct.pack("<I", len(p)) + p for p in parts)
    return np.asarray(values, dtype=_DTYPES[dtype]).tobytes()


@dataclass(frozen=True)
class RequestOptions:
    """How requests are filled: stream flag, fixed lengths, end id, extra tensors."""

    stream: bool = True
    fixed_output_len: bool = True
    end_id: int | None = None
    extra: dict[str, object] = field(default_factory=dict)


def build_request(
    interface: ModelInterface,
    text: str,
    max_tokens: int,
    request_id: str,
    options: RequestOptions,
) -> service_pb2.ModelInferRequest:
    """A ModelInferRequest for one prompt; optional inputs only where the model has them.

    Always sends ``exclude_input_in_output=true``; ``min_tokens`` (or ``min_length``) =
    ``max_tokens`` when ``options.fixed_output_len``; ``return_perf_metrics=true`` when the
    model has no per-response draft counts; asks for the empty final response.
    """
    values: dict[str, object] = {
        "text_input": text,
        "max_tokens": max_tokens,
        "exclude_input_in_output": True,
        "stream": options.stream,
    }
    if options.fixed_output_len:
        name = next((n for n in MIN_TOKENS_INPUTS if n in interface.inputs), None)
        if name:
            values[name] = max_tokens
    if DRAFT_OUTPUTS[0] not in interface.outputs:
        values[PERF_METRICS_INPUT] = True  # TRT-LLM: draft totals on the final response
    if options.end_id is not None:
        values["end_id"] = options.end_id
    values.update(options.extra)
    request = service_pb2.ModelInferRequest(model_name=interface.name, id=request_id)
    for name, value in values.items():
        if name not in interface.inputs:
            continue
        dtype, shape = interface.inputs[name]
        request.inputs.add(name=name, datatype=dtype, shape=list(shape))
        request.raw_input_contents.append(_serialize(dtype, [value]))
    request.parameters[EMPTY_FINAL_PARAM].bool_param = True
    return request


@dataclass(frozen=True)
class Exchange:
    """What came back for one request: (receive ns, response) pairs, in order."""

    sent_ns: int
    end_ns: int
    responses: list[tuple[int, service_pb2.ModelInferResponse]]
    error: str | None = None


def _rpc_error(exc: grpc.aio.AioRpcError, timeout_s: float) -> str:
    if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"timed out after {timeout_s:g} s"
    return f"{exc.code().name}: {exc.details()}"


async def stream_request(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
    request: service_pb2.ModelInferRequest,
    timeout_s: float,
) -> Exchange:
    """Send on ``ModelStreamInfer``; collect responses until the final flag."""
    responses: list[tuple[int, service_pb2.ModelInferResponse]] = []
    now = time.perf_counter_ns
    sent = now()
    call = stub.ModelStreamInfer(iter((request,)), timeout=timeout_s)
    try:
        async for msg in call:
            t = now()
            if msg.error_message:
                call.cancel()  # stop whatever the server still does for it
                return Exchange(sent, t, responses, msg.error_message)
            responses.append((t, msg.infer_response))
            if msg.infer_response.parameters[FINAL_PARAM].bool_param:
                return Exchange(sent, t, responses)
    except grpc.aio.AioRpcError as exc:
        return Exchange(sent, now(), responses, _rpc_error(exc, timeout_s))
    except asyncio.CancelledError:
        call.cancel()
        raise
    return Exchange(sent, now(), responses, "stream closed before the final response")


async def unary_request(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
    request: service_pb2.ModelInferRequest,
    timeout_s: float,
) -> Exchange:
    """Send on ``ModelInfer`` (non-decoupled models): one response."""
    del request.parameters[EMPTY_FINAL_PARAM]
    sent = time.perf_counter_ns()
    try:
        response = await stub.ModelInfer(request, timeout=timeout_s)
    except grpc.aio.AioRpcError as exc:
        return Exchange(sent, time.perf_counter_ns(), [], _rpc_error(exc, timeout_s))
    t = time.perf_counter_ns()
    return Exchange(sent, t, [(t, response)])


EndpointFn = Callable[
    [service_pb2_grpc.GRPCInferenceServiceStub, service_pb2.ModelInferRequest, float],
    Awaitable[Exchange],
]
ENDPOINTS: dict[str, EndpointFn] = {
    "stream": stream_request,
    "nostream": stream_request,
    "unary": unary_request,
}


@dataclass(frozen=True)
class ParsedResponse:
    """The parts of one response the metrics need."""

    ids: np.ndarray | None
    text: str | None
    final: bool
    draft_tokens: int | None
    accepted_draft_tokens: int | None
    cumulative_counts: bool
    server_arrival_ns: int | None = None  # the server's arrival_time_ns (epoch ns)


def _deserialize_bytes(raw: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 4 <= len(raw):
        (size,) = struct.unpack_from("<I", raw, pos)
        out.append(raw[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return out


_SCALAR = {"INT32": "<i", "INT64": "<q", "UINT64": "<Q"}
_COUNT_NAMES = frozenset(DRAFT_OUTPUTS + ACCEPTED_OUTPUTS)


def _count(raw: bytes, dtype: str) -> int | None:
    """The sum of an integer count tensor (one element in practice: no numpy for that)."""
    fmt = _SCALAR.get(dtype)
    if fmt is not None and len(raw) == struct.calcsize(fmt):
        return int(struct.unpack(fmt, raw)[0])
    if dtype not in _DTYPES or dtype == "BYTES":
        return None
    values = np.frombuffer(raw, dtype=_DTYPES[dtype])
    return int(values.sum()) if values.size else None


def parse_response(response: service_pb2.ModelInferResponse) -> ParsedResponse:
    """Token ids, text, final flag and speculative counts of one response (pure).

    An empty final response has no outputs: ids and text are None. It runs on the load
    generator's event loop for every response, so it makes one pass over the outputs and
    reads scalar counts without numpy (~10 µs a response).
    """
    ids = text = arrival = None
    counts: dict[str, int | None] = {}
    for output, raw in zip(
        response.outputs, response.raw_output_contents, strict=False
    ):
        name = output.name
        if name == IDS_OUTPUT:
            ids = np.frombuffer(raw, dtype=_DTYPES[output.datatype])
        elif name == TEXT_OUTPUT:
            text = b"".join(_deserialize_bytes(raw)).decode(errors="replace")
        elif name in _COUNT_NAMES:
            counts[name] = _count(raw, output.datatype)
        elif name == ARRIVAL_OUTPUT:
            arrival = _count(raw, output.datatype)
    draft = accepted = None
    cumulative = False
    for name in DRAFT_OUTPUTS:
        if name in counts:
            draft, cumulative = counts[name], name.startswith("total_")
            break
    for name in ACCEPTED_OUTPUTS:
        if name in counts:
            accepted = counts[name]
            break
    final_param = response.parameters.get(FINAL_PARAM)
    final = bool(final_param is not None and final_param.bool_param)
    arrival = arrival if arrival and arrival > 0 else None
    return ParsedResponse(ids, text, final, draft, accepted, cumulative, arrival)
