"""Triton's llmapi model on the wire: its request tensors, its responses, the server times.

The model config is written by hand from TensorRT-LLM's
``triton_backend/all_models/llmapi/tensorrt_llm/config.pbtxt`` (commit 0a710573…); the
responses are built the way its ``1/model.py`` builds them (text so far on every streamed
response; perf metrics as BYTES decimal strings; steady-clock times). Every expected value is
worked out by hand from those messages.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from tritonclient.grpc import model_config_pb2, service_pb2

from trtbench.core.errors import LoadTestError
from trtbench.core.export import records_to_frame
from trtbench.profiling.loadtest.clients.grpc_client import (
    Exchange,
    RequestOptions,
    build_request,
    check_interface,
    interface_from_config,
)
from trtbench.profiling.loadtest.clients.llmapi_tensors import text_deltas
from trtbench.profiling.loadtest.clients.response_parse import parse_response
from trtbench.profiling.loadtest.files.responses import (
    RequestSlot,
    exchange_to_all_records,
    exchange_to_records,
)
from trtbench.profiling.loadtest.records.client_timing import server_ns_to_client
from trtbench.profiling.loadtest.stats.metrics import request_metrics, summarize
from trtbench.profiling.loadtest.workload.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.workload.schedule import Tier

T = model_config_pb2
# A client offset (epoch − perf_counter) of a machine up ~5 s: epoch readings are ~1.7e18.
OFFSET = 1_700_000_000_000_000_000
DRAFT_TOTALS = ("total_draft_tokens", "total_accepted_draft_tokens")


def llmapi_config(max_tokens_type=T.TYPE_INT32, max_tokens="sampling_param_max_tokens"):
    """The llmapi model's config as the server returns it (auto_complete: decoupled, no
    batching)."""
    c = T.ModelConfig(name="tensorrt_llm", backend="python")
    c.model_transaction_policy.decoupled = True
    c.input.add(name="text_input", data_type=T.TYPE_STRING, dims=[-1])
    for name, dtype in (
        ("streaming", T.TYPE_BOOL),
        ("sampling_param_temperature", T.TYPE_FP32),
        (max_tokens, max_tokens_type),
        ("sampling_param_seed", T.TYPE_UINT64),
        ("sampling_param_exclude_input_from_output", T.TYPE_BOOL),
        ("sampling_param_return_perf_metrics", T.TYPE_BOOL),
        ("return_finish_reason", T.TYPE_BOOL),
    ):
        c.input.add(name=name, data_type=dtype, dims=[1], optional=True)
    c.output.add(name="text_output", data_type=T.TYPE_STRING, dims=[-1])
    for name in (
        "arrival_time_ns",
        "first_scheduled_time_ns",
        "first_token_time_ns",
        "last_token_time_ns",
    ):
        c.output.add(name=name, data_type=T.TYPE_INT64, dims=[1])
    for name in ("total_accepted_draft_tokens", "total_draft_tokens"):
        c.output.add(name=name, data_type=T.TYPE_INT32, dims=[1])
    return c


def test_llmapi_request_has_exactly_its_tensors():
    iface = interface_from_config(llmapi_config())
    assert iface.llmapi and iface.default_endpoint() == "stream"
    assert not iface.echo_possible  # it is asked to leave the prompt out
    options = RequestOptions(stream=True, fixed_output_len=True, end_id=7)
    req = build_request(iface, "hello", 12, "r-1", options)
    got = {t.name: (t.datatype, list(t.shape)) for t in req.inputs}
    assert got == {
        "text_input": ("BYTES", [1]),
        "streaming": ("BOOL", [1]),
        "sampling_param_max_tokens": ("INT32", [1]),
        "sampling_param_exclude_input_from_output": ("BOOL", [1]),
        "sampling_param_return_perf_metrics": ("BOOL", [1]),
    }  # no min_tokens / end_id there: fixed_output_len and end_id cannot apply
    raw = dict(zip([t.name for t in req.inputs], req.raw_input_contents, strict=True))
    assert raw["text_input"] == struct.pack("<I", 5) + b"hello"
    assert raw["sampling_param_max_tokens"] == struct.pack("<i", 12)
    assert raw["streaming"] == b"\x01"
    assert raw["sampling_param_exclude_input_from_output"] == b"\x01"
    assert raw["sampling_param_return_perf_metrics"] == b"\x01"
    one = build_request(iface, "x", 3, "r-2", RequestOptions(stream=False))
    assert (
        dict(zip([t.name for t in one.inputs], one.raw_input_contents, strict=True))[
            "streaming"
        ]
        == b"\x00"
    )


def test_an_ensemble_with_per_response_counts_is_asked_for_perf_metrics():
    """The reference ensemble sends per-response draft counts and, with
    return_perf_metrics, the server times that split TTFT."""
    c = T.ModelConfig(name="ensemble", platform="ensemble")
    c.input.add(name="text_input", data_type=T.TYPE_STRING, dims=[1])
    c.input.add(name="max_tokens", data_type=T.TYPE_INT32, dims=[1])
    c.input.add(name="return_perf_metrics", data_type=T.TYPE_BOOL, dims=[1])
    c.output.add(name="draft_tokens_proposed", data_type=T.TYPE_INT32, dims=[1])
    iface = interface_from_config(c)
    assert not iface.llmapi and iface.echo_possible  # no exclude_input_in_output input
    req = build_request(iface, "x", 4, "r", RequestOptions(fixed_output_len=False))
    raw = dict(zip([t.name for t in req.inputs], req.raw_input_contents, strict=True))
    assert raw == {
        "text_input": struct.pack("<I", 1) + b"x",
        "max_tokens": struct.pack("<i", 4),
        "return_perf_metrics": b"\x01",
    }


def test_a_model_without_either_max_tokens_input_is_refused_naming_both():
    check_interface(interface_from_config(llmapi_config()), "h:1")  # accepted
    bare = llmapi_config(max_tokens="sampling_param_top_k")
    with pytest.raises(LoadTestError) as err:
        check_interface(interface_from_config(bare), "h:1")
    message = str(err.value)
    assert "'max_tokens or sampling_param_max_tokens'" in message
    assert "llmapi" in message and "ensemble" in message
    mistyped = interface_from_config(llmapi_config(max_tokens_type=T.TYPE_INT64))
    with pytest.raises(LoadTestError, match="'sampling_param_max_tokens' is INT64, "):
        check_interface(mistyped, "h:1")


def add_output(msg, name: str, value, dtype: str) -> None:
    """One [1] output: BYTES as TensorRT-LLM's llmapi model.py sends it (decimal text)."""
    msg.outputs.add(name=name, datatype=dtype, shape=[1])
    if dtype == "BYTES":
        text = str(value).encode()
        msg.raw_output_contents.append(struct.pack("<I", len(text)) + text)
    else:
        fmt = {"INT64": "<q", "INT32": "<i"}[dtype]
        msg.raw_output_contents.append(struct.pack(fmt, value))


def response(text=None, times=None, totals=None, final=False, dtype="BYTES", ids=None):
    """A response with ``text_output``, the timing outputs (arrival, scheduled, first
    token) and the draft totals (proposed, accepted)."""
    msg = service_pb2.ModelInferResponse(model_name="tensorrt_llm", id="r")
    if text is not None:
        add_output(msg, "text_output", text, "BYTES")
    if ids is not None:
        msg.outputs.add(name="output_ids", datatype="INT32", shape=[1, len(ids)])
        msg.raw_output_contents.append(np.asarray(ids, dtype="<i4").tobytes())
    names = ("arrival_time_ns", "first_scheduled_time_ns", "first_token_time_ns")
    for name, value in zip(names, times or (), strict=False):
        add_output(msg, name, value, dtype)
    count_dtype = "BYTES" if dtype == "BYTES" else "INT32"
    for name, value in zip(DRAFT_TOTALS, totals or (), strict=False):
        add_output(msg, name, value, count_dtype)
    msg.parameters["triton_final_response"].bool_param = final
    return msg


@pytest.mark.parametrize("dtype", ["BYTES", "INT64"])
def test_parse_reads_the_server_times_and_totals(dtype):
    msg = response("Hello", (1_000_000, 3_000_000, 8_000_000), (4, 3), True, dtype)
    p = parse_response(msg)
    assert p.text == "Hello" and p.final
    assert (p.server_arrival_ns, p.server_scheduled_ns, p.server_first_token_ns) == (
        1_000_000,
        3_000_000,
        8_000_000,
    )
    assert (p.draft_tokens, p.accepted_draft_tokens, p.cumulative_counts) == (
        4,
        3,
        True,
    )
    # an unset steady-clock time (0) is "not reported"
    unset = parse_response(response("x", (1_000_000, 0, 0), None, False, dtype))
    assert (unset.server_scheduled_ns, unset.server_first_token_ns) == (None, None)


def test_server_times_on_either_clock():
    sent = 5_000_000_000  # 5 s on the client's perf_counter
    # epoch reading 2 ms after the send → moved by the offset
    assert server_ns_to_client(OFFSET + 5_002_000_000, OFFSET, sent) == 5_002_000_000
    # steady clock (CLOCK_MONOTONIC = perf_counter) → taken as it is
    assert server_ns_to_client(5_003_000_000, OFFSET, sent) == 5_003_000_000
    assert server_ns_to_client(5_003_000_000, None, sent) is None  # offset not recorded
    assert server_ns_to_client(0, OFFSET, sent) is None


def test_text_so_far_becomes_new_text():
    assert text_deltas(["He", "Hello", None, "Hello!"]) == ["He", "llo", None, "!"]
    assert text_deltas(["ab", "cd"]) == ["ab", "cd"]  # a server sending new text only


@pytest.fixture
def words() -> TextTokenizer:
    vocab = {"[UNK]": 0, "Hello": 1, "world": 2, "!": 3}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    return TextTokenizer(tok, "words")


PROMPT = Prompt("t", "say hi", 2, 8, "words")


def llmapi_exchange(sent, times, last_totals=(8, 5), every=True):
    """Three streamed responses, text so far on each; perf metrics on every response
    (running totals 0/0, 4/3, 8/5) or only on the final one."""
    texts = ["Hello", "Hello world", "Hello world !"]
    totals = [(0, 0), (4, 3), last_totals]
    msgs = [
        response(
            t,
            times if every or i == 2 else None,
            totals[i] if every or i == 2 else None,
            final=i == 2,
        )
        for i, t in enumerate(texts)
    ]
    received = [sent + 9_000_000, sent + 10_000_000, sent + 11_000_000]
    return Exchange(sent, received[-1], list(zip(received, msgs, strict=True)))


@pytest.mark.parametrize("every", [True, False])
def test_llmapi_records(words, every):
    sent = 900_000  # perf_counter ns; the server's steady clock is the same clock
    exchange = llmapi_exchange(sent, (1_000_000, 3_000_000, 8_000_000), every=every)
    slot = RequestSlot("v", Tier(concurrency=1), 0, sent)
    rec, resp, out = exchange_to_all_records(
        exchange, PROMPT, slot, words, True, OFFSET, cumulative_text=True
    )
    # "Hello" | " world" | " !" → one token each (as text so far: 1 + 2 + 3 = 6)
    assert [r.tokens for r in resp] == [1, 1, 1]
    assert (rec.output_tokens, rec.output_token_source) == (3, "retokenized")
    assert out is not None and out.output_chars == len("Hello world !")
    assert (
        rec.server_arrival_ns,
        rec.server_scheduled_ns,
        rec.server_first_token_ns,
    ) == (
        1_000_000,
        3_000_000,
        8_000_000,
    )
    assert (rec.draft_tokens, rec.accepted_draft_tokens) == (8, 5)
    if every:  # running totals on every response → per-step differences
        assert [(r.draft_tokens, r.accepted_draft_tokens) for r in resp] == [
            (0, 0),
            (4, 3),
            (4, 2),
        ]
    else:  # totals on the final response only
        assert [(r.draft_tokens, r.accepted_draft_tokens) for r in resp] == [
            (None, None),
            (None, None),
            (8, 5),
        ]
    per = request_metrics(records_to_frame([rec]), records_to_frame(resp))
    assert per["client_to_server_delay_ms"].iloc[0] == pytest.approx(0.1)  # 1.0 − 0.9
    assert per["server_queue_time_ms"].iloc[0] == pytest.approx(2.0)  # 3 − 1
    assert per["server_prefill_time_ms"].iloc[0] == pytest.approx(5.0)  # 8 − 3


def test_reference_ensemble_times_on_the_final_response_in_epoch_ns():
    """The reference model: output_ids, arrival on the first response, perf metrics (epoch,
    INT64) and totals on the final one."""
    sent = 2_000_000_000
    first = response(ids=[5], times=(OFFSET + 2_001_000_000,), dtype="INT64")
    final = response(
        ids=[6, 7],
        final=True,
        dtype="INT64",
        totals=(3, 1),
        times=(OFFSET + 2_001_000_000, OFFSET + 2_004_000_000, OFFSET + 2_010_000_000),
    )
    exchange = Exchange(
        sent,
        sent + 20_000_000,
        [(sent + 12_000_000, first), (sent + 20_000_000, final)],
    )
    rec, _ = exchange_to_records(
        exchange,
        PROMPT,
        RequestSlot("v", Tier(concurrency=1), 0, sent),
        clock_offset_ns=OFFSET,
    )
    assert (
        rec.server_arrival_ns,
        rec.server_scheduled_ns,
        rec.server_first_token_ns,
    ) == (
        2_001_000_000,
        2_004_000_000,
        2_010_000_000,
    )
    assert (rec.output_tokens, rec.draft_tokens, rec.accepted_draft_tokens) == (3, 3, 1)


def test_summary_percentiles_of_the_server_split(words):
    """Two requests: queue 2 and 4 ms, prefill 5 and 3 ms → numpy-linear percentiles
    p50 3 / p90 3.8 / p99 3.98 (queue) and p50 4 / p90 4.8 / p99 4.98 (prefill)."""
    requests, responses = [], []
    for i, (times, sent) in enumerate(
        [
            ((1_000_000, 3_000_000, 8_000_000), 900_000),
            ((2_000_000, 6_000_000, 9_000_000), 1_500_000),
        ]
    ):
        slot = RequestSlot("v", Tier(concurrency=2), i, sent)
        rec, resp = exchange_to_records(
            llmapi_exchange(sent, times), PROMPT, slot, words, True, OFFSET, True
        )
        requests.append(rec)
        responses += resp
    summary = summarize(records_to_frame(requests), records_to_frame(responses))
    row = summary.iloc[0]
    assert [row[f"server_queue_time_{p}_ms"] for p in ("p50", "p90", "p99")] == (
        pytest.approx([3.0, 3.8, 3.98])
    )
    assert [row[f"server_prefill_time_{p}_ms"] for p in ("p50", "p90", "p99")] == (
        pytest.approx([4.0, 4.8, 4.98])
    )
    assert row["server_queue_time_count"] == 2
