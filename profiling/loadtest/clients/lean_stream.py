"""Triton's streamed responses with each output's description left serialized, read once per layout.

``ModelStreamInfer`` answers with ``ModelStreamInferResponse`` messages. Reading a response's
``outputs`` (``InferOutputTensor``: name, datatype, shape) through protobuf's Python objects
costs more than the rest of its parse, and every response of a request repeats the same few
descriptions. :data:`LeanStreamResponse` is the same message on the wire with
``ModelInferResponse.outputs`` declared ``repeated bytes``: a length-delimited field is read as
bytes or as a message alike (https://protobuf.dev/programming-guides/encoding/#length-types),
so each output arrives as its serialized description, which a request's parse
(:func:`~trtbench.profiling.loadtest.clients.response_parse.parse_responses`) decodes once per
distinct one. The other fields are those of tritonclient's descriptors (copied into a private
descriptor pool: nothing is registered process-wide).
"""

from __future__ import annotations

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc

STREAM_METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"


def _lean_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for module in (model_config_pb2, service_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        if module is service_pb2:
            response = next(
                m for m in proto.message_type if m.name == "ModelInferResponse"
            )
            outputs = next(f for f in response.field if f.name == "outputs")
            outputs.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
            outputs.ClearField("type_name")
        pool.Add(proto)
    return pool


_POOL = _lean_pool()
LeanStreamResponse = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("inference.ModelStreamInferResponse")
)
"""``ModelStreamInferResponse`` whose ``infer_response.outputs`` are serialized
``InferOutputTensor`` bytes."""
LeanInferResponse = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("inference.ModelInferResponse")
)


def lean_stub(channel: grpc.aio.Channel) -> service_pb2_grpc.GRPCInferenceServiceStub:
    """Triton's stub on ``channel`` whose ``ModelStreamInfer`` answers
    :data:`LeanStreamResponse` messages (every other method as generated)."""
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    stub.ModelStreamInfer = channel.stream_stream(
        STREAM_METHOD,
        request_serializer=service_pb2.ModelInferRequest.SerializeToString,
        response_deserializer=LeanStreamResponse.FromString,
    )
    return stub


def output_description(raw: bytes) -> service_pb2.ModelInferResponse.InferOutputTensor:
    """One serialized ``InferOutputTensor`` of a :data:`LeanInferResponse`, parsed."""
    return service_pb2.ModelInferResponse.InferOutputTensor.FromString(raw)
