"""Records stream to CSV in chunks and read back as the records written."""

from __future__ import annotations

import csv

import pytest

from trtbench.core.records import RequestRecord, ResponseRecord
from trtbench.profiling.loadtest.files.schemas import read_records_csv
from trtbench.profiling.loadtest.records.record_sink import CsvRecordSink, RecordFiles


def _request(i: int, error: str | None = None) -> RequestRecord:
    return RequestRecord(
        variant="v",
        tier="c2",
        concurrency=2,
        request_rate_per_s=None,
        request_id=f"v-c2-{i}",
        task_id=f"synthetic-{i}",
        scheduled_ns=10 * i,
        sent_ns=10 * i + 1,
        first_token_ns=None if error else 10 * i + 5,
        last_token_ns=None if error else 10 * i + 9,
        end_ns=10 * i + 9,
        input_tokens=4,
        requested_output_tokens=3,
        output_tokens=0 if error else 3,
        token_responses=0 if error else 2,
        empty_responses=1,
        echoed_tokens=0,
        first_response_tokens=0 if error else 1,
        draft_tokens=None,
        accepted_draft_tokens=None,
        input_token_source="tokenizer",
        output_token_source="output_ids",
        error=error,
    )


def _responses(i: int) -> list[ResponseRecord]:
    rid = f"v-c2-{i}"
    return [
        ResponseRecord("v", "c2", rid, 0, 10 * i + 5, 1, False, 2, 1),
        ResponseRecord("v", "c2", rid, 1, 10 * i + 9, 2, True),
    ]


def _rows(path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


def test_rows_reach_disk_in_chunks_while_the_tier_runs(tmp_path):
    files = RecordFiles(
        tmp_path / "p" / "v.requests.csv", tmp_path / "p" / "v.responses.csv"
    )
    with CsvRecordSink(files, chunk_rows=6) as sink:
        sink.add(_request(0), _responses(0))  # 3 rows buffered
        assert len(_rows(files.requests)) == 1  # header only
        sink.add(_request(1), _responses(1))  # 6 rows: one chunk written
        assert len(_rows(files.requests)) == 3
        assert len(_rows(files.responses)) == 5
        sink.add(_request(2, error="UNAVAILABLE: gone"), [])
        assert len(_rows(files.requests)) == 3  # the next chunk is still buffered
    assert len(_rows(files.requests)) == 4  # closing flushes
    assert (sink.request_rows, sink.response_rows) == (3, 4)


def test_streamed_files_read_back_as_the_records(tmp_path):
    files = RecordFiles(tmp_path / "r.csv", tmp_path / "s.csv")
    with CsvRecordSink(files) as sink:
        for i in range(3):
            sink.add(
                _request(i, error="timed out after 1 s" if i == 1 else None),
                _responses(i),
            )
    req = read_records_csv(files.requests)
    assert list(req["request_id"]) == ["v-c2-0", "v-c2-1", "v-c2-2"]
    assert req["error"].isna().tolist() == [True, False, True]
    assert req.loc[1, "error"] == "timed out after 1 s"
    assert req["first_token_ns"].isna().tolist() == [False, True, False]
    assert int(req.loc[2, "last_token_ns"]) == 29
    resp = read_records_csv(files.responses)
    assert len(resp) == 6
    assert resp["final"].tolist() == [False, True] * 3
    assert resp["draft_tokens"].isna().tolist() == [False, True] * 3


def test_a_second_sink_appends_without_a_second_header(tmp_path):
    files = RecordFiles(tmp_path / "r.csv", tmp_path / "s.csv")
    with CsvRecordSink(files) as sink:
        sink.add(_request(0), [])
    with CsvRecordSink(files) as sink:
        sink.add(_request(1), [])
    rows = _rows(files.requests)
    assert rows[0][0] == "variant" and len(rows) == 3
    assert [r[0] for r in rows[1:]] == ["v", "v"]


def test_an_exception_still_flushes_what_finished(tmp_path):
    files = RecordFiles(tmp_path / "r.csv", tmp_path / "s.csv")
    with pytest.raises(RuntimeError), CsvRecordSink(files) as sink:
        sink.add(_request(0), _responses(0))
        raise RuntimeError("stop")
    assert len(_rows(files.requests)) == 2
