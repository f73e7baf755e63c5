"""The columnar nsys loader: threaded rowid-range reads (gaps, NULLs, filters), the NumPy join
of GPU rows to their calls (first call per key, per process, 64-bit correlation ids, launch
calls without GPU rows), and the per-call kernel ranks of the kernel trace."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from tests.support.synth_nsys import (
    ApiRow,
    KernelRow,
    NsysExportWriter,
    global_pid,
    global_tid,
)
from trtbench.profiling.traces import nsys_sqlite
from trtbench.profiling.traces.launches import kernel_launch_trace, make_launch_frame
from trtbench.profiling.traces.nsys import NsysReport
from trtbench.profiling.traces.nsys_sqlite import NA, read_columns
from trtbench.profiling.traces.schemas import LAUNCH_FRAME_COLUMNS


def write_table(path: Path, rows: list[tuple]) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE T (a INTEGER, b INTEGER, c INTEGER)")
        conn.executemany("INSERT INTO T (rowid, a, b, c) VALUES (?, ?, ?, ?)", rows)


@pytest.mark.parametrize("range_rows", [2, 3, 1000])
def test_read_columns_keeps_rowid_order_across_ranges_gaps_and_nulls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, range_rows: int
) -> None:
    monkeypatch.setattr(nsys_sqlite, "RANGE_ROWS", range_rows)
    path = tmp_path / "t.sqlite"
    # rowids 1-3, 7, 8, 20 (gaps); b NULL in two rows; c NULL where a filter drops the row
    write_table(
        path,
        [
            (1, 10, 1, 5),
            (2, 11, None, 5),
            (3, 12, 3, None),
            (7, 13, 4, 5),
            (8, 14, None, 5),
            (20, 2**40, 6, 5),
        ],
    )
    out = read_columns(path, "T", {"x": "a", "y": "b", "z": "a + 1"})
    assert out["x"].tolist() == [10, 11, 12, 13, 14, 2**40]
    assert out["y"].tolist() == [1, NA, 3, 4, NA, 6]
    assert out["z"].tolist() == [11, 12, 13, 14, 15, 2**40 + 1]
    kept = read_columns(path, "T", {"x": "a"}, "c IS NOT NULL")
    assert kept["x"].tolist() == [10, 11, 13, 14, 2**40]


def test_read_columns_of_an_empty_table(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    write_table(path, [])
    out = read_columns(path, "T", {"x": "a"})
    assert out["x"].dtype == "int64" and len(out["x"]) == 0


BIG = 2**32 + 5  # a correlation id past 32 bits: the general key path


def write_join_export(path: Path) -> Path:
    with NsysExportWriter(path) as w:
        w.add_api_calls(
            [
                ApiRow(100, 110, global_tid(1, 5), 1, "cudaLaunchKernel_v7000"),
                ApiRow(100, 112, global_tid(2, 6), 1, "cuLaunchKernel"),
                # same correlation id and process as the first call: the first one is kept
                ApiRow(300, 310, global_tid(1, 7), 1, "cudaLaunchKernel_v7000"),
                ApiRow(400, 410, global_tid(1, 5), BIG, "cudaLaunchKernel_v7000"),
                ApiRow(600, 605, global_tid(1, 5), 50, "cudaLaunchKernel_v7000"),
                ApiRow(700, 701, global_tid(1, 5), 51, "cudaStreamSynchronize_v3020"),
            ]
        )
        w.add_kernels(
            [
                KernelRow(120, 130, global_pid(1), 1, "k1", grid=(4, 2, 1)),
                KernelRow(125, 140, global_pid(2), 1, "k2"),
                KernelRow(420, 430, global_pid(1), BIG, "k3", graph_node_id=9),
                KernelRow(500, 510, global_pid(3), 9, "orphan"),
            ]
        )
    return path


def test_gpu_rows_join_their_call_per_process_first_call_kept(tmp_path: Path) -> None:
    frame = NsysReport(write_join_export(tmp_path / "join.sqlite")).launches
    rows = frame[
        [
            "pid",
            "tid",
            "correlation_id",
            "api_start_ns",
            "api_end_ns",
            "start_ns",
            "graph_node_id",
            "grid_x",
            "grid_y",
        ]
    ]
    expected = [
        [1, 5, 1, 100, 110, 120, NA, 4, 2],
        [2, 6, 1, 100, 112, 125, NA, 1, 1],
        [1, 5, BIG, 400, 410, 420, 9, 1, 1],
        [3, NA, 9, NA, NA, 500, NA, 1, 1],  # no call in the export
        [1, 5, 50, 600, 605, NA, NA, NA, NA],  # launch call without GPU row, appended
    ]
    assert rows.fillna(NA).astype("int64").values.tolist() == expected
    api = [None if pd.isna(n) else n for n in frame["s_api_name"]]
    assert api == [
        "cudaLaunchKernel",
        "cuLaunchKernel",
        "cudaLaunchKernel",
        None,
        "cudaLaunchKernel",
    ]
    assert frame["gpu_kind"].isna().tolist() == [False] * 4 + [True]
    assert frame["s_name"].astype(object).tolist()[:4] == ["k1", "k2", "k3", "orphan"]
    # the synchronize call (no GPU row, not a launch) is not a row
    assert 51 not in frame["correlation_id"].tolist()


def launch_frame(rows: list[dict]) -> pd.DataFrame:
    columns = {c: [r.get(c) for r in rows] for c in LAUNCH_FRAME_COLUMNS}
    columns["gpu_kind"] = ["kernel"] * len(rows)
    columns["s_api_name"] = ["cudaLaunchKernel"] * len(rows)
    return make_launch_frame(columns)


def test_call_kernels_and_index_with_interleaved_calls() -> None:
    # calls A (pid 1, corr 10) and B (pid 2, corr 10) start at the same ns; sorted by
    # (api start, kernel start) the rows are A@130, B@140, A@150, C@250
    rows = [
        {
            "pid": 1,
            "correlation_id": 10,
            "api_start_ns": 100,
            "api_end_ns": 110,
            "start_ns": 150,
            "end_ns": 160,
        },
        {
            "pid": 1,
            "correlation_id": 10,
            "api_start_ns": 100,
            "api_end_ns": 110,
            "start_ns": 130,
            "end_ns": 135,
        },
        {
            "pid": 2,
            "correlation_id": 10,
            "api_start_ns": 100,
            "api_end_ns": 105,
            "start_ns": 140,
            "end_ns": 141,
        },
        {
            "pid": 1,
            "correlation_id": 11,
            "api_start_ns": 200,
            "api_end_ns": 210,
            "start_ns": 250,
            "end_ns": 260,
        },
    ]
    trace = kernel_launch_trace(launch_frame(rows))
    assert trace["kernel_start_ns"].tolist() == [130, 140, 150, 250]
    assert trace["call_kernels"].tolist() == [2, 1, 2, 1]
    assert trace["call_index"].tolist() == [0, 0, 1, 0]
    # already in order (no copy taken): the same figures
    ordered = kernel_launch_trace(launch_frame([rows[1], rows[2], rows[0], rows[3]]))
    pd.testing.assert_frame_equal(ordered, trace)
