"""``trtbench.core.data_files``: files trtbench wrote, read back checked; each corruption is a
one-line DataFileError naming the file, the line and the fix, never a silent NaN or row."""

from __future__ import annotations

import json
import logging
import re

import pandas as pd
import pytest

from trtbench.core.data_files import (
    check_json_fields,
    column_kind,
    read_csv_checked,
    read_json_document,
)
from trtbench.core.errors import DataFileError
from trtbench.core.export import Column, write_csv

FIX = "re-run it, or delete the file"
SCHEMA = (
    Column("variant", "variant"),
    Column("tier", "tier"),
    Column("count", "an integer column", kind="int"),
    Column("latency_ms", "a number by its unit suffix"),
    Column("final", "a flag", kind="bool"),
    Column("note", "optional text", required=False),
)


@pytest.fixture
def csv_path(tmp_path):
    """A CSV written by the real writer: 3 rows, the second with an empty optional note."""
    frame = pd.DataFrame(
        {
            "variant": ["base", "base", "med"],
            "tier": ["c1", "c2", "c1"],
            "count": [1, 2, 3],
            "latency_ms": [1.5, float("nan"), 2.25],
            "final": [True, False, True],
            "note": ["a", None, "abc"],
        }
    )
    return write_csv(frame, tmp_path / "t.csv", SCHEMA)


def read(path, **kwargs):
    return read_csv_checked(path, SCHEMA, fix=FIX, keys=("variant", "tier"), **kwargs)


def test_a_good_file_reads_as_pandas_reads_it(csv_path):
    frame = read(csv_path)
    pd.testing.assert_frame_equal(frame, pd.read_csv(csv_path))


def test_a_row_cut_off_mid_row_names_its_line(csv_path):
    text = csv_path.read_text()
    csv_path.write_text(text[: text.rindex("2.25") + 2])  # "med,c1,3,2." no newline
    with pytest.raises(DataFileError) as err:
        read(csv_path)
    assert str(err.value) == (
        f"{csv_path} line 4: 4 fields where the header has 6 (the file is truncated or "
        f"was edited); {FIX}"
    )


def test_a_value_cut_off_in_the_last_field_is_caught_by_the_missing_newline(csv_path):
    csv_path.write_text(csv_path.read_text().rstrip("\n")[:-1])  # "…,abc" -> "…,ab"
    # same field count, and "ab" is valid text: only the missing newline tells the cut
    with pytest.raises(DataFileError, match=r"t\.csv line 4: the file ends mid-row"):
        read(csv_path)


def test_a_garbled_typed_value_names_line_column_and_value(csv_path):
    csv_path.write_text(csv_path.read_text().replace("2.25", "2.2x5"))
    with pytest.raises(DataFileError) as err:
        read(csv_path)
    assert str(err.value) == (
        f"{csv_path} line 4: column latency_ms holds '2.2x5', not a number; {FIX}"
    )


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (",2,", ",2.5,", "line 3: column count holds 2.5, not an integer"),
        (",False,", ",maybe,", "line 3: column final holds 'maybe', not True or False"),
        ("med,c1", ",c1", "line 4: column variant is empty"),
    ],
)
def test_wrong_kinds_and_empty_keys(csv_path, old, new, message):
    csv_path.write_text(csv_path.read_text().replace(old, new, 1))
    with pytest.raises(DataFileError, match=message):
        read(csv_path)


def test_a_missing_required_column_is_refused(csv_path):
    frame = pd.read_csv(csv_path).drop(columns=["tier", "count"])
    frame.to_csv(csv_path, index=False)
    with pytest.raises(DataFileError) as err:
        read(csv_path)
    assert (
        str(err.value) == f"{csv_path} lacks the required column(s) tier, count; {FIX}"
    )


def test_a_missing_optional_column_is_added_empty(csv_path):
    pd.read_csv(csv_path).drop(columns=["note"]).to_csv(csv_path, index=False)
    frame = read(csv_path)
    assert list(frame.columns) == [c.name for c in SCHEMA]
    assert frame["note"].isna().all() and len(frame) == 3


def test_an_unknown_column_is_dropped_with_a_warning(csv_path, caplog):
    frame = pd.read_csv(csv_path)
    frame["added_later_ms"] = 1.0
    frame.to_csv(csv_path, index=False)
    with caplog.at_level(logging.WARNING, logger="trtbench.core.data_files"):
        back = read(csv_path)
    assert "added_later_ms" not in back.columns and len(back) == 3
    assert f"{csv_path}: ignoring column(s) added_later_ms" in caplog.text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty (no header line)"),
        (b"variant,tier\n\xff\xfe,c1\n", "cannot be read ("),
        (b'variant,tier\n"base,c1\n', "line 2: not valid CSV (unexpected end of data)"),
        (b"variant,tier\nbase,c1\nb\x00\x00\x00", "line 3: holds a NUL byte"),
        (b"variant,variant\nbase,c1\n", "column(s) variant appear twice"),
    ],
)
def test_structurally_broken_files(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(DataFileError, match=re.escape(message)):
        read_csv_checked(path, None, fix=FIX, keys=("variant",))


def test_without_a_schema_unit_suffixed_columns_are_still_numbers(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("variant,duration_s,name\nbase,1.5,x\nmed,oops,y\n")
    with pytest.raises(DataFileError, match="line 3: column duration_s holds 'oops'"):
        read_csv_checked(path, None, fix=FIX)


def test_column_kinds():
    assert column_kind("request_latency_ms") == "float"
    assert column_kind("output_token_throughput_tokens_per_s") == "float"
    assert column_kind("input_token_source") is None
    assert column_kind("s_kernel_name") is None
    assert column_kind("pid", "int") == "int"


def test_json_document_reads_and_defaults_schema_version(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"mode": "medusa"}))  # an old file: no schema_version
    assert read_json_document(path, max_schema_version=1, fix=FIX) == {"mode": "medusa"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": [1, 2', "{path} line 1 column 12: not valid JSON ("),
        ("[1]", "{path} is not a JSON object; " + FIX),
        (
            '{"schema_version": "2"}',
            "{path}: schema_version '2' is not a positive integer",
        ),
        (
            '{"schema_version": 99}',
            "{path} has schema_version 99 but this trtbench reads up to 1; upgrade "
            "trtbench (pip install -U trtbench) or re-run with this version",
        ),
    ],
)
def test_json_document_errors(tmp_path, text, message):
    path = tmp_path / "d.json"
    path.write_text(text)
    with pytest.raises(DataFileError) as err:
        read_json_document(path, max_schema_version=1, fix=FIX)
    assert str(err.value).startswith(message.format(path=path))


def test_json_fields_are_type_checked(tmp_path):
    doc = {"medusa": {"choices": "0,1"}, "max_draft_len": True, "variants": {"a.b": 1}}
    path = tmp_path / "build.json"
    check_json_fields(doc, path, {"mode": str, "medusa": dict}, fix=FIX)  # absent: fine
    with pytest.raises(DataFileError) as err:
        check_json_fields(doc, path, {"medusa.choices": list}, fix=FIX)
    assert (
        str(err.value) == f"{path}: medusa.choices is '0,1' (str), expected list; {FIX}"
    )
    with pytest.raises(DataFileError, match="max_draft_len is True"):
        check_json_fields(doc, path, {"max_draft_len": int}, fix=FIX)
    with pytest.raises(
        DataFileError, match=r"variants\.a\.b is 1 \(int\), expected dict"
    ):
        check_json_fields(doc, path, {("variants", "a.b"): dict}, fix=FIX)


def test_floats_read_back_bit_identical(tmp_path):
    """pandas' default float parser reads "14.996848355023735" as ...737 (1 ulp off): a
    summary row re-written by a later command would then differ from the one it kept."""
    value = 14.996848355023735  # written as repr by write_csv
    path = tmp_path / "f.csv"
    path.write_text(f"variant,value\nv,{value!r}\n")
    frame = read_csv_checked(path, fix="-")
    assert frame["value"].iloc[0] == value
    assert repr(frame["value"].iloc[0]) == "14.996848355023735"
