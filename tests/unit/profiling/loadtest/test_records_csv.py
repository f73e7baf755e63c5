"""``read_records_csv`` on ``requests.csv`` / ``responses.csv`` written by the real writer
(``write_loadtest``'s schemas), then damaged: DataFileError naming the file and the line."""

from __future__ import annotations

import pandas as pd
import pytest

from trtbench.core.errors import DataFileError
from trtbench.core.export import records_to_frame, write_csv
from trtbench.core.records import RequestRecord, ResponseRecord
from trtbench.profiling.loadtest.files.schemas import (
    REQUESTS_SCHEMA,
    RESPONSES_SCHEMA,
    read_records_csv,
    record_kinds,
    requests_table,
)


def request(i: int, error: str | None = None) -> RequestRecord:
    t = 1_000_000 * i
    return RequestRecord(
        variant="base",
        tier="c1",
        concurrency=1,
        request_rate_per_s=None,
        request_id=f"base-c1-{i}",
        task_id=f"synthetic-{i}",
        scheduled_ns=t,
        sent_ns=t + 10,
        first_token_ns=None if error else t + 500,
        last_token_ns=None if error else t + 900,
        end_ns=t + 1000,
        input_tokens=8,
        requested_output_tokens=4,
        output_tokens=0 if error else 4,
        token_responses=0 if error else 4,
        empty_responses=1,
        echoed_tokens=0,
        first_response_tokens=0 if error else 1,
        draft_tokens=None,
        accepted_draft_tokens=None,
        input_token_source="tokenizer",
        output_token_source="output_ids",
        error=error,
    )


@pytest.fixture
def requests_csv(tmp_path):
    records = [request(0), request(1, error="timeout"), request(2)]
    table = requests_table(records_to_frame(records))
    return write_csv(table, tmp_path / "requests.csv", REQUESTS_SCHEMA)


@pytest.fixture
def responses_csv(tmp_path):
    rows = [
        ResponseRecord("base", "c1", "base-c1-0", k, 100 + k, 1, k == 3)
        for k in range(4)
    ]
    return write_csv(
        records_to_frame(rows), tmp_path / "responses.csv", RESPONSES_SCHEMA
    )


def test_round_trip(requests_csv, responses_csv):
    req = read_records_csv(requests_csv)
    assert len(req) == 3 and req["first_token_ns"].dtype == "Int64"
    assert req["first_token_ns"].isna().tolist() == [False, True, False]
    resp = read_records_csv(responses_csv)
    assert resp["final"].tolist() == [False, False, False, True]


def test_record_kinds_follow_the_dataclass():
    kinds = record_kinds(RequestRecord)
    assert kinds["first_token_ns"] == "int" and kinds["request_rate_per_s"] == "float"
    assert kinds["error"] == "str" and record_kinds(ResponseRecord)["final"] == "bool"


def test_last_row_truncated(requests_csv):
    text = requests_csv.read_text()
    requests_csv.write_text(text[: len(text) - len(text.splitlines()[-1]) // 2])
    with pytest.raises(DataFileError) as err:
        read_records_csv(requests_csv)
    assert str(err.value).startswith(f"{requests_csv} line 4: ")
    assert str(err.value).endswith(
        "re-run `trtbench loadtest` for the variants it holds, or delete the file"
    )


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("sent_ns", "12.5", "line 3: column sent_ns holds 12.5, not an integer"),
        (
            "output_tokens",
            "four",
            "line 2: column output_tokens holds 'four', not an integer",
        ),
        ("request_id", "", "line 4: column request_id is empty"),
    ],
)
def test_wrong_values(requests_csv, column, value, message):
    frame = pd.read_csv(requests_csv, dtype=str, keep_default_na=False)
    row = {"sent_ns": 1, "output_tokens": 0, "request_id": 2}[column]
    frame.loc[row, column] = value
    frame.to_csv(requests_csv, index=False)
    with pytest.raises(DataFileError, match=message):
        read_records_csv(requests_csv)


def test_a_responses_file_with_a_garbled_flag(responses_csv):
    responses_csv.write_text(responses_csv.read_text().replace(",True,", ",Tru,"))
    with pytest.raises(
        DataFileError, match="line 5: column final holds 'Tru', not True"
    ):
        read_records_csv(responses_csv)


def test_streamed_record_files_read_back_and_a_torn_append_is_refused(tmp_path):
    """The files ``CsvRecordSink`` appends to during a tier (csv module, CRLF lines, record
    fields only) pass the same checks; a chunk torn by a crash is named, not half-read."""
    from trtbench.profiling.loadtest.records.record_sink import (
        CsvRecordSink,
        RecordFiles,
    )

    files = RecordFiles(tmp_path / "req.csv", tmp_path / "resp.csv")
    with CsvRecordSink(files, chunk_rows=2) as sink:
        for i in range(3):
            responses = [
                ResponseRecord("base", "c1", f"base-c1-{i}", 0, 100 + i, 4, True)
            ]
            sink.add(request(i, error="timeout" if i == 1 else None), responses)
    req = read_records_csv(files.requests)
    assert req["request_id"].tolist() == ["base-c1-0", "base-c1-1", "base-c1-2"]
    assert req["error"].isna().tolist() == [True, False, True]
    assert read_records_csv(files.responses)["final"].tolist() == [True, True, True]
    data = files.requests.read_bytes()
    files.requests.write_bytes(data[: data.rindex(b"base-c1-2") + 4])
    with pytest.raises(
        DataFileError, match=r"req\.csv line 4: 5 fields where the header"
    ):
        read_records_csv(files.requests)


def test_a_requests_category_round_trips_and_is_empty_without_one(tmp_path):
    """loadtest.datasets gives each prompt a category; requests.csv carries it, and a
    synthetic prompt's row leaves it empty (read back as missing)."""
    from dataclasses import replace

    records = [replace(request(0), category="coding"), request(1)]
    path = write_csv(
        requests_table(records_to_frame(records)),
        tmp_path / "requests.csv",
        REQUESTS_SCHEMA,
    )
    header = path.read_text().splitlines()[0].split(",")
    assert header[header.index("task_id") + 1] == "category"
    back = read_records_csv(path)
    assert back.loc[0, "category"] == "coding"
    assert pd.isna(back.loc[1, "category"])
