"""Requests built without tritonclient's aio helpers, and model interfaces read from configs."""

from __future__ import annotations

import struct
from string import Template

import numpy as np
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from tests.support.data import get_test_data_dir
from tests.support.scripted_triton import scripted_repo_module
from trtbench.core.errors import LoadTestError
from trtbench.profiling.loadtest.clients.grpc_client import (
    RequestOptions,
    build_request,
    check_interface,
    interface_from_config,
)


def scripted_config(**overrides) -> model_config_pb2.ModelConfig:
    text = (get_test_data_dir("scripted_model") / "config.pbtxt.in").read_text()
    values = {
        **scripted_repo_module().DEFAULTS,
        "name": "m",
        "max_batch_size": 8,
        "first_delay_ms": 0,
        "step_ms": 0,
        "tokens_per_step": 1,
        "draft_per_step": 0,
        **overrides,
    }
    return text_format.Parse(
        Template(text).substitute(values), model_config_pb2.ModelConfig()
    )


def test_interface_shapes_types_and_endpoint():
    iface = interface_from_config(scripted_config())
    # max_batch_size > 0 and dims [1]: one request's tensor is [1, 1]; STRING → BYTES.
    assert iface.inputs["text_input"] == ("BYTES", (1, 1))
    assert iface.inputs["max_tokens"] == ("INT32", (1, 1))
    assert iface.decoupled and iface.default_endpoint() == "stream"
    assert iface.returns_ids
    unbatched = interface_from_config(scripted_config(max_batch_size=0))
    assert unbatched.inputs["text_input"] == ("BYTES", (1,))


def test_an_ensemble_counts_as_decoupled():
    config = model_config_pb2.ModelConfig(name="ensemble", platform="ensemble")
    config.input.add(
        name="text_input", data_type=model_config_pb2.TYPE_STRING, dims=[1]
    )
    config.input.add(name="max_tokens", data_type=model_config_pb2.TYPE_INT32, dims=[1])
    assert interface_from_config(config).default_endpoint() == "nostream"


def test_request_holds_every_input_the_model_has():
    iface = interface_from_config(scripted_config())
    options = RequestOptions(stream=True, fixed_output_len=True, end_id=7)
    req = build_request(iface, "héllo", 12, "r-1", options)
    assert (req.model_name, req.id) == ("m", "r-1")
    assert req.parameters["triton_enable_empty_final_response"].bool_param is True
    raw = dict(zip([t.name for t in req.inputs], req.raw_input_contents, strict=True))
    # BYTES: 4-byte little-endian length, then UTF-8.
    assert raw["text_input"] == struct.pack("<I", 6) + "héllo".encode()
    assert np.frombuffer(raw["max_tokens"], "<i4").tolist() == [12]
    # Fixed lengths: min_tokens = max_tokens; the prompt is always excluded from output.
    assert np.frombuffer(raw["min_tokens"], "<i4").tolist() == [12]
    assert raw["exclude_input_in_output"] == b"\x01"
    assert raw["stream"] == b"\x01"
    assert np.frombuffer(raw["end_id"], "<i4").tolist() == [7]
    assert all(list(t.shape) == [1, 1] for t in req.inputs)
    # The scripted model reports per-response draft counts: no return_perf_metrics asked.
    assert "return_perf_metrics" not in raw


def test_free_lengths_send_no_min_tokens():
    iface = interface_from_config(scripted_config())
    req = build_request(iface, "x", 5, "r", RequestOptions(fixed_output_len=False))
    assert "min_tokens" not in [t.name for t in req.inputs]


def test_missing_or_mistyped_inputs_are_named():
    config = scripted_config()
    config.input[0].name = "prompt"
    with pytest.raises(LoadTestError, match="no input tensor 'text_input'"):
        check_interface(interface_from_config(config), "h:1")
    config = scripted_config()
    config.input[1].data_type = model_config_pb2.TYPE_FP32
    with pytest.raises(LoadTestError, match="'max_tokens' is FP32, expected INT32"):
        check_interface(interface_from_config(config), "h:1")
