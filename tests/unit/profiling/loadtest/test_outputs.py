"""Each request's output: built from the responses, streamed to a part file, merged, read back."""

from __future__ import annotations

import csv
import hashlib
import struct

import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from trtbench.core.errors import DataFileError
from trtbench.core.records import OutputRecord, RequestRecord
from trtbench.profiling.loadtest.clients.grpc_client import Exchange, ParsedResponse
from trtbench.profiling.loadtest.files.outputs import (
    OUTPUTS_SCHEMA,
    merge_outputs,
    output_record,
    read_outputs_csv,
)
from trtbench.profiling.loadtest.files.responses import (
    RequestSlot,
    exchange_to_all_records,
)
from trtbench.profiling.loadtest.records.record_sink import CsvRecordSink, RecordFiles
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.schedule import Tier


def _response(ids=None, text=None, final=False) -> service_pb2.ModelInferResponse:
    msg = service_pb2.ModelInferResponse(model_name="m", id="r")
    if ids is not None:
        msg.outputs.add(name="output_ids", datatype="INT32", shape=[1, len(ids)])
        msg.raw_output_contents.append(np.asarray(ids, dtype="<i4").tobytes())
    if text is not None:
        msg.outputs.add(name="text_output", datatype="BYTES", shape=[1])
        msg.raw_output_contents.append(struct.pack("<I", len(text)) + text.encode())
    msg.parameters["triton_final_response"].bool_param = final
    return msg


def _blake(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=8).hexdigest()


def _exchange(*responses, error=None) -> Exchange:
    return Exchange(0, 10, [(i + 1, r) for i, r in enumerate(responses)], error)


def test_ids_output_drops_the_echoed_prompt_and_keeps_the_slot_keys():
    prompt = Prompt("t", "a b", 2, 3, "tokenizer", input_ids=(11, 12))
    slot = RequestSlot("spec", Tier(concurrency=2), 7, 0, repeat=1)
    exchange = _exchange(
        _response([11, 12, 3]), _response([4, -5]), _response(final=True)
    )
    record, _, out = exchange_to_all_records(exchange, prompt, slot, echo_possible=True)
    assert record.echoed_tokens == 2
    assert out == OutputRecord(
        variant="spec",
        tier="c2",
        repeat=1,
        request_index=7,
        request_id="spec-c2-r1-7",
        output_tokens=3,
        output_kind="ids",
        output_digest=_blake(struct.pack("<3i", 3, 4, -5)),
        output_token_ids="3 4 -5",
    )


def test_a_failed_request_has_no_output_row():
    prompt = Prompt("t", "a", 1, 3, "words")
    slot = RequestSlot("spec", Tier(concurrency=1), 0, 0)
    exchange = _exchange(_response([1, 2]), error="timed out after 1 s")
    record, _, out = exchange_to_all_records(exchange, prompt, slot)
    assert record.error == "timed out after 1 s"
    assert out is None


def _request_record(**kw) -> RequestRecord:
    fields = dict(
        variant="v",
        tier="c1",
        concurrency=1,
        request_rate_per_s=None,
        request_id="v-c1-0",
        task_id="t",
        scheduled_ns=0,
        sent_ns=0,
        first_token_ns=1,
        last_token_ns=2,
        end_ns=2,
        input_tokens=2,
        requested_output_tokens=4,
        output_tokens=4,
        token_responses=2,
        empty_responses=0,
        echoed_tokens=0,
        first_response_tokens=1,
        draft_tokens=None,
        accepted_draft_tokens=None,
        input_token_source="words",
        output_token_source="retokenized",
        request_index=0,
    )
    return RequestRecord(**(fields | kw))


def test_text_output_is_a_digest_of_the_text_after_the_echo_and_its_length():
    prompt = Prompt("t", "Hi ", 1, 4, "words")
    parsed = [
        ParsedResponse(None, text, False, None, None, False)
        for text in ("Hi th", "ére")
    ]
    out = output_record(parsed, prompt, _request_record(), echo_possible=True)
    assert out.output_kind == "text"
    assert out.output_digest == _blake("thére".encode())
    assert (out.output_chars, out.output_tokens, out.output_token_ids) == (5, 4, "")


def test_outputs_stream_to_a_part_file_and_merge_with_other_variants(tmp_path):
    parts = tmp_path / "parts"
    files = RecordFiles(
        parts / "v.requests.csv", parts / "v.responses.csv", parts / "v.outputs.csv"
    )
    # Digits only with a leading zero: must come back as the same text.
    digest = "0123456789012345"
    with CsvRecordSink(files, chunk_rows=2) as sink:
        for i in range(3):
            req = _request_record(request_id=f"v-c1-{i}", request_index=i)
            out = OutputRecord("v", "c1", 0, i, f"v-c1-{i}", 2, "ids", digest, f"{i} 9")
            sink.add(req, [], out)
            if i == 1:  # two request rows: a chunk went to disk, outputs included
                with files.outputs.open(newline="") as f:
                    assert len(list(csv.reader(f))) == 3
        sink.add(_request_record(request_id="v-c1-3", error="boom"), [], None)
    target = tmp_path / "outputs.csv"
    old = OutputRecord("w", "c1", 0, 0, "w-c1-0", 1, "text", "ab", "", 5)
    with CsvRecordSink(RecordFiles(tmp_path / "a", tmp_path / "b", target)) as sink:
        sink.add(_request_record(request_id="w-c1-0"), [], old)
        sink.add(
            _request_record(request_id="v-old"),
            [],
            OutputRecord("v", "c9", 0, 0, "v-old", 1, "ids", "ff", "1"),
        )
    merged = merge_outputs(target, [files.outputs], replace={"v"})
    back = read_outputs_csv(target)
    assert list(back["request_id"]) == ["w-c1-0", "v-c1-0", "v-c1-1", "v-c1-2"]
    assert list(back["output_digest"]) == ["ab", digest, digest, digest]
    assert list(back["output_token_ids"]) == ["", "0 9", "1 9", "2 9"]
    assert back["output_chars"].iloc[0] == 5 and back["output_chars"].isna().sum() == 3
    assert list(merged["request_id"]) == list(back["request_id"])
    with target.open() as f:
        assert f.readline().strip() == ",".join(c.name for c in OUTPUTS_SCHEMA)


def test_a_truncated_outputs_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "outputs.csv"
    header = ",".join(c.name for c in OUTPUTS_SCHEMA)
    path.write_text(header + "\nv,c1,0,0,v-c1-0,2,ids,00ff,1 2,\nv,c1,0,1,v-c1")
    with pytest.raises(DataFileError, match="outputs.csv"):
        read_outputs_csv(path)
