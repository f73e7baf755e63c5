"""The columnar trace-table writers: CSV bytes equal to an independent pandas ``to_csv`` of the
same frame (synthesized nsys export; hand-built frames with quotes, commas, newlines, NA and
floats; chunk boundaries), Parquet with the same columns and values, and the checked reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.support.synth_nsys import (
    ApiRow,
    KernelRow,
    NsysExportWriter,
    global_pid,
    global_tid,
    write_decode_export,
)
from trtbench.cli import main
from trtbench.core.data_files import read_parquet_checked
from trtbench.core.errors import DataFileError
from trtbench.core.export import Column, conform
from trtbench.profiling.traces import table_io
from trtbench.profiling.traces.nsys import NsysReport
from trtbench.profiling.traces.schemas import STEP_SCHEMA

PID = 31
ODD_NAMES = (
    "void gemm<float, 128>(float const*, int)",  # commas: quoted
    'kernel "quoted"',  # quotes: doubled and quoted
    "multi\nline",  # newline: quoted
    "plain_kernel",  # nothing to quote
    " spaced ",
)


def pandas_csv(frame: pd.DataFrame, schema) -> bytes:
    """The reference: pandas' own writer on the conformed frame."""
    return conform(frame, schema).to_csv(index=False).encode()


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table_io, "CHUNK_ROWS", 7)  # many chunks, odd boundaries


def test_synthesized_export_tables_equal_pandas_bytes(tmp_path: Path) -> None:
    export = tmp_path / "decode.sqlite"
    write_decode_export(export, steps=6, kernels_per_step=5, graph_steps=3)
    analysis = NsysReport(export).analyze()
    written = table_io.write_trace_tables(analysis.tables(), tmp_path / "out")
    assert [p.name for p in written] == [n for n, _, _ in analysis.tables()]
    for (_, frame, schema), path in zip(analysis.tables(), written, strict=True):
        assert path.read_bytes() == pandas_csv(frame, schema), path.name
    # the tables hold what the test relies on: NA cells, float means, many rows
    kernels = analysis.kernel_launches
    assert len(kernels) == 30 and kernels["graph_node_id"].isna().any()
    assert analysis.steps["launch_delay_mean_ns"].dtype.kind == "f"


def test_odd_kernel_names_and_empty_cells_equal_pandas_bytes(tmp_path: Path) -> None:
    export = tmp_path / "odd.sqlite"
    gp, tid = global_pid(PID), global_tid(PID, PID)
    with NsysExportWriter(export) as w:
        w.add_api_calls(
            ApiRow(1000 * i, 1000 * i + 300, tid, i, "cudaLaunchKernel_v7000")
            for i in range(1, 16)
        )
        w.add_kernels(
            KernelRow(
                1000 * i + 200, 1000 * i + 900, gp, i, ODD_NAMES[i % len(ODD_NAMES)]
            )
            for i in range(1, 16)
        )
    analysis = NsysReport(export).analyze()
    kernels = analysis.kernel_launches
    assert set(kernels["s_kernel_name"].astype(str)) == set(ODD_NAMES)
    out = tmp_path / "out"
    for (name, frame, schema), path in zip(
        analysis.tables(),
        table_io.write_trace_tables(analysis.tables(), out),
        strict=True,
    ):
        assert path.read_bytes() == pandas_csv(frame, schema), name
    text = (out / "kernel_launches.csv").read_text()
    assert '"void gemm<float, 128>(float const*, int)"' in text
    assert '"kernel ""quoted"""' in text and '"multi\nline"' in text
    assert ",plain_kernel\n" in text  # unquoted, as pandas writes it


SCHEMA = (
    Column("a_ns", "int with NA"),
    Column("b", "numpy int"),
    Column("c_ns", "float"),
    Column("s", "text"),
    Column("t", "category"),
    Column("u", "bool"),
)


def hand_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "a_ns": pd.array([1, None, -3, 10**18, None, 0, 7, 8], dtype="Int64"),
            "b": np.arange(8, dtype=np.int64) - 4,
            "c_ns": [0.1, np.nan, 3000.0, 1e20, 2.5e-7, -0.0, 1 / 3, 123456789.125],
            "s": ["x", None, 'a"b', "a,b", "", "é ü", "line\r\nbreak", "z"],
            "t": pd.Categorical(["k", "k,1", None, "k", "", "q", "k", "k"]),
            "u": [True, False, True, True, False, False, True, False],
        }
    )


def test_hand_frame_equals_pandas_bytes(tmp_path: Path) -> None:
    frame = hand_frame()
    path = table_io.write_csv_fast(frame, tmp_path / "t.csv", SCHEMA)
    assert path.read_bytes() == pandas_csv(frame, SCHEMA)
    # spot checks written by hand from pandas' dialect
    lines = path.read_text().split("\n")
    assert lines[0] == "a_ns,b,c_ns,s,t,u"
    assert lines[1] == "1,-4,0.1,x,k,True"
    assert lines[2] == ',-3,,,"k,1",False'


def test_empty_frame_and_control_bytes_fall_back_to_the_same_bytes(
    tmp_path: Path,
) -> None:
    empty = hand_frame().iloc[:0]
    path = table_io.write_csv_fast(empty, tmp_path / "e.csv", SCHEMA)
    assert path.read_text() == "a_ns,b,c_ns,s,t,u\n"
    odd = hand_frame()
    odd.loc[0, "s"] = (
        "unit\x1fseparator"  # a stand-in byte inside the text: pandas path
    )
    path = table_io.write_csv_fast(odd, tmp_path / "o.csv", SCHEMA)
    assert path.read_bytes() == pandas_csv(odd, SCHEMA)


def test_parquet_holds_the_same_columns_and_values(tmp_path: Path) -> None:
    frame = hand_frame()
    path = table_io.write_parquet(frame, tmp_path / "t.parquet", SCHEMA)
    table = pq.read_table(path)
    assert table.column_names == [c.name for c in SCHEMA]
    assert table.column("a_ns").to_pylist()[:4] == [1, None, -3, 10**18]
    got = table.to_pandas()
    assert got["b"].tolist() == list(range(-4, 4))
    assert np.allclose(got["c_ns"], frame["c_ns"], equal_nan=True)
    assert table.column("s").to_pylist()[:4] == ["x", None, 'a"b', "a,b"]
    assert table.column("t").to_pylist()[:3] == ["k", "k,1", None]
    assert got["u"].tolist() == frame["u"].tolist()


def test_cli_parquet_and_checked_reader(tmp_path: Path) -> None:
    export = tmp_path / "decode.sqlite"
    write_decode_export(export, steps=4, kernels_per_step=3, graph_steps=2)
    out = tmp_path / "o"
    main(["analyze", "nsys", str(export), "--out", str(out), "--format", "parquet"])
    assert sorted(p.name for p in out.iterdir()) == [
        "kernel_launches.parquet",
        "launch_summary.parquet",
        "steps.parquet",
    ]
    steps = read_parquet_checked(out / "steps.parquet", STEP_SCHEMA, fix="re-run")
    main(["analyze", "nsys", str(export), "--out", str(tmp_path / "c")])
    from_csv = pd.read_csv(tmp_path / "c" / "steps.csv")
    # read back with the dtypes read_csv gives, the same values
    pd.testing.assert_frame_equal(steps, from_csv, check_dtype=True)
    assert steps["launch_overhead_ns"].tolist() == [3 * 4000] * 2 + [20000] * 2


def test_checked_parquet_reader_refuses_bad_files(tmp_path: Path) -> None:
    frame = hand_frame()
    path = table_io.write_parquet(
        frame.drop(columns="b"),
        tmp_path / "t.parquet",
        [c for c in SCHEMA if c.name != "b"],
    )
    with pytest.raises(DataFileError, match="lacks the required column.*b"):
        read_parquet_checked(path, SCHEMA, fix="re-run it")
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"PAR1 not really")
    with pytest.raises(DataFileError, match="not a readable Parquet file"):
        read_parquet_checked(junk, SCHEMA, fix="re-run it")
    text = tmp_path / "text.parquet"
    bad = frame.assign(a_ns=["1", "2 us", "3", "4", "5", "6", "7", "8"])
    table_io.write_parquet(bad, text, SCHEMA)
    with pytest.raises(DataFileError, match="row 2: column a_ns holds '2 us'"):
        read_parquet_checked(text, SCHEMA, fix="re-run it")
