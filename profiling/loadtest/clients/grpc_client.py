"""Triton gRPC client for the load test: probe a model, build requests, send them.

``tritonclient.grpc.aio`` cannot ask for the empty final response (the ``triton_`` parameter
prefix is reserved there: ``tritonclient.utils.TRITON_RESERVED_REQUEST_PARAMS_PREFIX``), so
requests are ``service_pb2.ModelInferRequest`` messages built here and sent on a ``grpc.aio``
channel through ``GRPCInferenceServiceStub``. Each request opens its own ``ModelStreamInfer``
call, so per-request deadlines and cancellation need no bookkeeping.

:data:`ENDPOINTS` holds one async function per endpoint kind, all with the same signature
(vLLM's ``ASYNC_REQUEST_FUNCS`` shape): ``stream`` (decoupled model, ``stream=true``),
``nostream`` (decoupled model asked for one response, e.g. TRT-LLM BLS draft-target) and
``unary`` (non-decoupled model, ``ModelInfer``).

Two request interfaces: TensorRT-LLM's ensemble / BLS tensors (``text_input`` +
``max_tokens``) and Triton's ``llmapi`` model (``text_input`` + ``sampling_param_max_tokens``,
``llmapi_tensors.py``).
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

from trtbench.core.errors import LoadTestError
from trtbench.profiling.loadtest.clients.llmapi_tensors import (
    EXCLUDE_INPUT,
    MAX_TOKENS_INPUT,
    STREAMING_INPUT,
    is_llmapi,
    llmapi_values,
)
from trtbench.profiling.loadtest.clients.response_parse import (  # noqa: F401 (re-exported)
    ACCEPTED_OUTPUTS,
    DRAFT_OUTPUTS,
    DTYPES,
    FINAL_PARAM,
    IDS_OUTPUT,
    TEXT_OUTPUT,
    Exchange,
    ParsedResponse,
    parse_response,
)

REQUIRED_INPUTS = {"text_input": "BYTES", "max_tokens": "INT32"}
MIN_TOKENS_INPUTS = ("min_tokens", "min_length")
PERF_METRICS_INPUT = "return_perf_metrics"
EMPTY_FINAL_PARAM = "triton_enable_empty_final_response"


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

    @property
    def llmapi(self) -> bool:
        """Triton's ``llmapi`` model: it has ``sampling_param_max_tokens``."""
        return is_llmapi(self.inputs)

    @property
    def echo_possible(self) -> bool:
        """The prompt may come back in the output: no input asks the model to leave it out
        (``exclude_input_in_output``, llmapi ``sampling_param_exclude_input_from_output``)."""
        return not {"exclude_input_in_output", EXCLUDE_INPUT} & set(self.inputs)

    def default_endpoint(self) -> str:
        """``stream`` for decoupled models with a ``stream`` (or llmapi ``streaming``)
        input, else the fitting kind."""
        if not self.decoupled:
            return "unary"
        streams = "stream" in self.inputs or STREAMING_INPUT in self.inputs
        return "stream" if streams else "nostream"


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
        # is (triton-inference-server/core ``src/ensemble_scheduler/ensemble_utils.cc``),
        # as in every TRT-LLM streaming deployment.
        decoupled=bool(config.model_transaction_policy.decoupled)
        or config.platform == "ensemble",
    )


_USE = (
    "trtbench sends text_input BYTES with max_tokens INT32 (TensorRT-LLM ensemble / BLS) "
    "or with sampling_param_max_tokens INT32 (Triton's llmapi model) — point --model at "
    "one of those"
)


def check_interface(interface: ModelInterface, url: str) -> None:
    """Raise LoadTestError naming the first required input the model lacks or mistypes.

    Required: ``text_input`` BYTES and a max-tokens input, ``max_tokens`` INT32 (ensemble /
    BLS) or ``sampling_param_max_tokens`` INT32 (llmapi); the messages name both interfaces.
    """
    required = dict(REQUIRED_INPUTS)
    if interface.llmapi:
        required = {"text_input": "BYTES", MAX_TOKENS_INPUT: "INT32"}
    for name, dtype in required.items():
        got = interface.inputs.get(name)
        if got is None:
            have = ", ".join(sorted(interface.inputs)) or "none"
            missing = (
                name if name == "text_input" else f"max_tokens or {MAX_TOKENS_INPUT}"
            )
            raise LoadTestError(
                f"model {interface.name!r} at {url} has no input tensor {missing!r} (it "
                f"has: {have}); {_USE}"
            )
        if got[0] != dtype:
            raise LoadTestError(
                f"model {interface.name!r} input {name!r} is {got[0]}, expected {dtype}; "
                f"{_USE}"
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
    return np.asarray(values, dtype=DTYPES[dtype]).tobytes()


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
    ``max_tokens`` when ``options.fixed_output_len``; ``return_perf_metrics=true`` (the
    server's timings split TTFT); asks for the empty final response.

    An llmapi model (``interface.llmapi``) gets ``llmapi_tensors.llmapi_values`` instead:
    ``text_input``, ``streaming``, ``sampling_param_max_tokens`` and
    ``sampling_param_exclude_input_from_output`` / ``sampling_param_return_perf_metrics``
    = true. It has no ``min_tokens`` or ``end_id`` input, so ``options.fixed_output_len``
    and ``options.end_id`` cannot apply there: the output length is measured, not forced.
    """
    if interface.llmapi:
        values: dict[str, object] = llmapi_values(text, max_tokens, options.stream)
        values.update(options.extra)
        return _request(interface, request_id, values)
    values = {
        "text_input": text,
        "max_tokens": max_tokens,
        "exclude_input_in_output": True,
        "stream": options.stream,
    }
    if options.fixed_output_len:
        name = next((n for n in MIN_TOKENS_INPUTS if n in interface.inputs), None)
        if name:
            values[name] = max_tokens
    # TRT-LLM's perf metrics: server times (and draft totals, ignored where a model also
    # sends per-response counts: responses.py) on the final response
    values[PERF_METRICS_INPUT] = True
    if options.end_id is not None:
        values["end_id"] = options.end_id
    values.update(options.extra)
    return _request(interface, request_id, values)


def _request(
    interface: ModelInterface, request_id: str, values: dict[str, object]
) -> service_pb2.ModelInferRequest:
    """The request with every value the model has an input for; asks for the empty final
    response."""
    request = service_pb2.ModelInferRequest(model_name=interface.name, id=request_id)
    for name, value in values.items():
        if name not in interface.inputs:
            continue
        dtype, shape = interface.inputs[name]
        request.inputs.add(name=name, datatype=dtype, shape=list(shape))
        request.raw_input_contents.append(_serialize(dtype, [value]))
    request.parameters[EMPTY_FINAL_PARAM].bool_param = True
    return request


def _rpc_error(exc: grpc.aio.AioRpcError, timeout_s: float) -> str:
    if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"timed out after {timeout_s:g} s"
    return f"{exc.code().name}: {exc.details()}"


async def stream_request(
    stub: service_pb2_grpc.GRPCInferenceServiceStub,
    request: service_pb2.ModelInferRequest,
    timeout_s: float,
) -> Exchange:
    """Send on ``ModelStreamInfer``; collect responses until the final flag (``stub`` may
    be :func:`~trtbench.profiling.loadtest.clients.lean_stream.lean_stub`'s: responses in
    their lean form, parsed when the request ends)."""
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
            response = msg.infer_response
            responses.append((t, response))
            final = response.parameters.get(FINAL_PARAM)
            if final is not None and final.bool_param:
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
