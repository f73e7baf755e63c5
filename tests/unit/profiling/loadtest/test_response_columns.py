"""A request's responses parsed at once (``parse_columns``) give what ``parse_response`` gives
for each (the definition, checked by hand in ``test_llmapi_requests.py`` and
``test_client_timing.py``), whether the messages come as tritonclient parses them or in their
lean form (outputs left serialized, ``lean_stream.py``); the records made from either are the
same."""

from __future__ import annotations

import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from trtbench.profiling.loadtest.clients.lean_stream import LeanStreamResponse
from trtbench.profiling.loadtest.clients.response_columns import (
    columns_of,
    parse_columns,
)
from trtbench.profiling.loadtest.clients.response_parse import (
    Exchange,
    parse_response,
)
from trtbench.profiling.loadtest.files.responses import (
    RequestSlot,
    exchange_to_all_records,
)
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.schedule import Tier

INT = {"INT32": "<i4", "INT64": "<i8", "UINT64": "<u8"}


def tensor(msg, name: str, value, dtype: str) -> None:
    """Append output ``name`` (a list of ints, or a str for BYTES) to ``msg``."""
    if dtype == "BYTES":
        items = value if isinstance(value, list) else [value]
        raw = b"".join(
            len(s.encode()).to_bytes(4, "little") + s.encode() for s in map(str, items)
        )
        shape = [1, len(items)]
    else:
        raw = np.asarray(value, dtype=INT[dtype]).tobytes()
        shape = [1, len(value)]
    msg.outputs.add(name=name, datatype=dtype, shape=shape)
    msg.raw_output_contents.append(raw)


def message(outputs: list[tuple], final: bool | None = False, drop_raw: int = 0):
    msg = service_pb2.ModelInferResponse(model_name="m", id="r")
    for name, value, dtype in outputs:
        tensor(msg, name, value, dtype)
    for _ in range(drop_raw):  # fewer contents than outputs
        msg.raw_output_contents.pop()
    if final is not None:
        msg.parameters["triton_final_response"].bool_param = final
    return msg


def lean(msg: service_pb2.ModelInferResponse):
    """The same message as it arrives through ``lean_stub``."""
    wire = service_pb2.ModelStreamInferResponse(infer_response=msg).SerializeToString()
    return LeanStreamResponse.FromString(wire).infer_response


SCRIPTED = [  # the scripted model: text, one id, per-response counts; empty final
    *(
        message(
            [
                ("text_output", "tok ", "BYTES"),
                ("output_ids", [100 + i], "INT32"),
                ("draft_tokens_proposed", [4], "INT32"),
                ("draft_tokens_accepted", [i % 3], "INT32"),
            ]
        )
        for i in range(5)
    ),
    message([], final=True),
]
ODD = [  # layouts changing mid-stream, totals, times, BYTES counts, unknown outputs
    message([("output_ids", [1, 2, 3], "INT32"), ("total_draft_tokens", [6], "INT32")]),
    message(
        [
            ("output_ids", [], "INT32"),
            ("draft_tokens_proposed", [2], "INT32"),
            ("total_draft_tokens", [9], "INT32"),  # a per-response count wins
            ("total_accepted_draft_tokens", ["5"], "BYTES"),
            ("arrival_time_ns", [0], "INT64"),  # unset: not reported
            ("first_token_time_ns", [7_000], "INT64"),
        ]
    ),
    message(
        [
            ("output_ids", [4], "INT64"),  # another datatype
            ("output_ids", [5, 6], "INT64"),  # a name twice: the last wins
            ("arrival_time_ns", [3_000], "UINT64"),
            ("cum_log_probs", [1], "INT32"),  # not read
        ],
        final=None,
    ),
    message(
        [("text_output", ["a", "b"], "BYTES"), ("output_ids", [8], "INT32")],
        drop_raw=1,  # output_ids has no contents: not read
    ),
    message([("draft_tokens_accepted", [1, 2], "INT32")], final=True),
]
RUNS = [  # one layout throughout, but a response short of contents, and times in two runs
    message([("output_ids", [1], "INT32"), ("arrival_time_ns", [0], "INT64")]),
    message(
        [("output_ids", [2], "INT32"), ("arrival_time_ns", [4_000], "INT64")],
        drop_raw=1,  # its time has no contents: not read
    ),
    message([("output_ids", [3], "INT32"), ("arrival_time_ns", [5_000], "INT64")]),
    message([("output_ids", [4], "INT32"), ("arrival_time_ns", [6_000], "INT64")]),
    message([], final=True),
]
TEXT_ONLY = [
    message([("text_output", "Hi th", "BYTES")]),
    message([("text_output", "ére", "BYTES")], final=True),
]


def same_columns(a, b) -> None:
    for name in (
        "finals",
        "id_counts",
        "texts",
        "drafts",
        "accepted",
        "cumulative",
        "usage_tokens",
        "server_arrival_ns",
        "server_scheduled_ns",
        "server_first_token_ns",
        "named",
    ):
        assert getattr(a, name) == getattr(b, name), name
    assert (a.ids is None) == (b.ids is None)
    if a.ids is not None:
        assert a.ids.tolist() == b.ids.tolist()


@pytest.mark.parametrize(
    "stream",
    [SCRIPTED, ODD, RUNS, TEXT_ONLY],
    ids=["scripted", "odd", "runs", "text"],
)
@pytest.mark.parametrize("form", ["tritonclient", "lean"])
def test_columns_equal_one_parse_per_response(stream, form) -> None:
    reference = columns_of([parse_response(m) for m in stream])
    messages = stream if form == "tritonclient" else [lean(m) for m in stream]
    same_columns(parse_columns(messages), reference)
    assert [parse_response(m) for m in messages][-1] == parse_response(stream[-1])


def test_the_odd_stream_by_hand() -> None:
    cols = parse_columns([lean(m) for m in ODD])
    assert cols.id_counts == [3, 0, 2, None, None]
    assert cols.ids.tolist() == [1, 2, 3, 5, 6]
    assert cols.drafts == [6, 2, None, None, None]
    assert cols.cumulative == [True, False, False, False, False]
    assert cols.accepted == [None, 5, None, None, 3]  # BYTES "5"; INT32 [1, 2] summed
    assert (cols.server_arrival_ns, cols.server_first_token_ns) == (3_000, 7_000)
    assert cols.finals == [False, False, False, False, True]
    assert cols.texts[3] == "ab"


def test_text_is_left_out_when_ids_carry_the_tokens() -> None:
    cols = parse_columns([lean(m) for m in SCRIPTED], text_with_ids=False)
    assert cols.texts == [None] * 6 and cols.id_counts[:5] == [1] * 5
    text = parse_columns([lean(m) for m in TEXT_ONLY], text_with_ids=False)
    assert text.texts == ["Hi th", "ére"] and text.ids is None


@pytest.mark.parametrize(
    "stream", [SCRIPTED, ODD, RUNS], ids=["scripted", "odd", "runs"]
)
def test_records_from_lean_messages_equal_the_tritonclient_ones(stream) -> None:
    prompt = Prompt("t", "def f(): return 1", 8, 5, "words", input_ids=(100, 101))
    slot = RequestSlot("v", Tier(concurrency=2), 3, 1_000)

    def records(messages):
        exchange = Exchange(
            1_000, 9_000, [(2_000 + i, m) for i, m in enumerate(messages)]
        )
        return exchange_to_all_records(exchange, prompt, slot, None, True, 0)

    want, got = records(stream), records([lean(m) for m in stream])
    assert got == want
    # each response parsed alone (the definition), then made into records
    assert records([parse_response(m) for m in stream]) == want
    if stream is SCRIPTED:
        request, responses, output = got
        # ids 100..104 with the prompt's (100, 101) echoed first: 2 echoed, 3 tokens
        assert (request.echoed_tokens, request.output_tokens) == (2, 3)
        assert [r.tokens for r in responses] == [0, 0, 1, 1, 1, 0]
        assert (request.draft_tokens, request.accepted_draft_tokens) == (
            20,
            0 + 1 + 2 + 0 + 1,
        )
        assert output.output_token_ids == "102 103 104"


def test_a_run_of_one_layout_is_cut_where_contents_fall_short() -> None:
    cols = parse_columns([lean(m) for m in RUNS])
    assert cols.ids.tolist() == [1, 2, 3, 4]
    assert cols.id_counts == [1, 1, 1, 1, None]
    # 0 is unset; the second response's time has no contents: the third's is the first
    assert cols.server_arrival_ns == 5_000


@pytest.mark.parametrize("form", ["tritonclient", "lean"])
def test_ids_of_a_size_no_datatype_divides_are_refused_as_one_parse_does(form) -> None:
    bad = message([("output_ids", [1], "INT32")])
    bad.raw_output_contents[0] = b"\x01\x00\x00"  # 3 bytes of INT32
    stream = [message([("output_ids", [7], "INT32")]), bad]
    messages = stream if form == "tritonclient" else [lean(m) for m in stream]
    with pytest.raises(ValueError):
        parse_response(messages[1])
    with pytest.raises(ValueError):
        parse_columns(messages)
