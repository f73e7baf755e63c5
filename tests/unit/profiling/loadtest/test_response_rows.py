"""A request's response records kept as columns (``ResponseRows``) are the records built one
by one: indexed, iterated, compared, and written by the CSV sink to the same bytes."""

from __future__ import annotations

import pytest

from trtbench.core.records import RequestRecord, ResponseRecord
from trtbench.profiling.loadtest.records.record_sink import CsvRecordSink, RecordFiles
from trtbench.profiling.loadtest.records.response_rows import ResponseRows

COLUMNS = (
    [1_000, 2_500, 4_000],  # received_ns
    [2, 0, 1],  # tokens
    [False, False, True],  # finals
    [4, None, 0],  # drafts
    [1, None, None],  # accepted
)
BY_HAND = [
    ResponseRecord("v", "c8", "r7", 0, 1_000, 2, False, 4, 1),
    ResponseRecord("v", "c8", "r7", 1, 2_500, 0, False, None, None),
    ResponseRecord("v", "c8", "r7", 2, 4_000, 1, True, 0, None),
]


def rows() -> ResponseRows:
    return ResponseRows("v", "c8", "r7", *COLUMNS)


def test_rows_are_the_records_built_by_hand() -> None:
    got = rows()
    assert len(got) == 3
    assert list(got) == BY_HAND
    assert got == BY_HAND and BY_HAND == got  # noqa: SIM300 (both operand orders)
    assert (got[0], got[-1], got[1:]) == (BY_HAND[0], BY_HAND[2], BY_HAND[1:])
    assert got != BY_HAND[:2] and got != [*BY_HAND[:2], BY_HAND[0]]
    assert [r.tokens for r in got] == [2, 0, 1]
    with pytest.raises(IndexError):
        got[3]


def test_columns_of_unequal_length_are_refused() -> None:
    with pytest.raises(ValueError, match="unequal"):
        ResponseRows("v", "c8", "r7", [1, 2], [1], [True], [None], [None])


def test_the_sink_writes_rows_and_records_to_the_same_bytes(tmp_path) -> None:
    request = RequestRecord(
        variant="v",
        tier="c8",
        concurrency=8,
        request_rate_per_s=None,
        request_id="r7",
        task_id="t",
        scheduled_ns=0,
        sent_ns=1,
        first_token_ns=1_000,
        last_token_ns=4_000,
        end_ns=4_000,
        input_tokens=5,
        requested_output_tokens=3,
        output_tokens=3,
        token_responses=2,
        empty_responses=1,
        echoed_tokens=0,
        first_response_tokens=2,
        draft_tokens=4,
        accepted_draft_tokens=1,
        input_token_source="words",
        output_token_source="output_ids",
    )

    def written(name: str, responses) -> bytes:
        files = RecordFiles(tmp_path / f"{name}.req.csv", tmp_path / f"{name}.resp.csv")
        with CsvRecordSink(files, chunk_rows=2) as sink:
            sink.add(request, responses)
            sink.add(request, responses)
        return files.responses.read_bytes()

    by_rows, by_records = written("rows", rows()), written("records", BY_HAND)
    assert by_rows == by_records
    # None is an empty cell; the flag as Python writes it
    assert by_rows.decode().splitlines()[2] == "v,c8,r7,1,2500,0,False,,"
