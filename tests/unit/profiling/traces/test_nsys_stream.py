"""The streaming nsys analysis (``analyze_nsys_export``) and its parts: tables identical to the
eager ``NsysReport`` path (itself checked against SQL and by hand in ``test_nsys.py``) when the
export is cut into many chunks and buckets, the Parquet kernel table (row groups, same rows),
the piecewise writers and accumulators, and the truncated-file check."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.support.data import external_fixture
from tests.support.synth_nsys import (
    ApiRow,
    GraphTraceRow,
    KernelRow,
    MemsetRow,
    NsysExportWriter,
    NvtxRow,
    global_pid,
    global_tid,
    write_decode_export,
    write_graph_node_export,
)
from trtbench.cli import main
from trtbench.core.errors import TraceParseError
from trtbench.profiling.traces.launch_steps import StepAccumulator, step_table
from trtbench.profiling.traces.launch_summary_stream import SummaryAccumulator
from trtbench.profiling.traces.launches import (
    kernel_launch_summary,
    kernel_launch_trace,
    resolve_step_windows,
)
from trtbench.profiling.traces.nsys import NsysReport
from trtbench.profiling.traces.nsys_calls import cut_buckets
from trtbench.profiling.traces.nsys_sqlite import declared_size
from trtbench.profiling.traces.nsys_stream import (
    analyze_nsys_export,
    kernel_table_format,
)
from trtbench.profiling.traces.schemas import KERNEL_LAUNCH_SCHEMA
from trtbench.profiling.traces.table_io import (
    TableWriter,
    write_csv_fast,
    write_trace_tables,
)

TABLES = ("kernel_launches.csv", "launch_summary.csv", "steps.csv")


def write_mixed_export(path: Path) -> Path:
    """Two processes, two threads in one, a 64-bit correlation id, a kernel without a call,
    a launch call without GPU rows, a memset, a whole-graph replay, NVTX steps."""
    main_t, worker, other = global_tid(5, 5), global_tid(5, 6), global_tid(9, 9)
    gp, other_p = global_pid(5), global_pid(9)
    big = 2**32 + 3
    with NsysExportWriter(path) as w:
        w.add_api_calls(
            [
                ApiRow(1_100, 1_110, main_t, 1, "cudaLaunchKernel_v7000"),
                ApiRow(1_100, 1_120, worker, 2, "cuLaunchKernel"),  # same start
                ApiRow(1_300, 1_305, main_t, 3, "cudaMemsetAsync_v3020"),
                ApiRow(1_400, 1_410, other, 1, "cudaLaunchKernel_v7000"),
                ApiRow(2_100, 2_150, main_t, big, "cudaGraphLaunch_v10000"),
                ApiRow(2_400, 2_420, main_t, 7, "cudaLaunchKernel_v7000"),  # no GPU row
                ApiRow(2_500, 2_540, worker, 8, "cudaGraphLaunch_v10000"),
            ]
        )
        w.add_kernels(
            [
                KernelRow(1_115, 1_160, gp, 1, "gemm", grid=(8, 2, 1)),
                KernelRow(1_130, 1_200, gp, 2, "triton_poi", stream_id=8),
                KernelRow(1_420, 1_450, other_p, 1, "gemm", device_id=1),
                KernelRow(2_160, 2_200, gp, big, "gemm", graph_node_id=3),
                KernelRow(2_205, 2_260, gp, big, "softmax", graph_node_id=4),
                KernelRow(
                    2_170, 2_190, gp, big, "rmsnorm", stream_id=9, graph_node_id=5
                ),
                KernelRow(3_000, 3_010, gp, 99, "orphan"),
            ]
        )
        w.add_memsets([MemsetRow(1_310, 1_330, gp, 3)])
        w.add_graph_traces([GraphTraceRow(2_545, 2_700, gp, 8)])
        w.add_nvtx_ranges(
            [
                NvtxRow(1_000, 2_000, main_t, "decode_step#0"),
                NvtxRow(2_000, 3_000, main_t, "decode_step#1"),
                NvtxRow(1_350, 1_500, other, "decode_step#0"),
            ]
        )
    return path


def eager_tables(path: Path, out: Path, pattern: str | None = None) -> Path:
    analysis = NsysReport(path).analyze(pattern)
    write_trace_tables(analysis.tables(), out)
    return out


def make_exports(tmp_path: Path) -> dict[str, tuple[Path, str | None]]:
    decode = tmp_path / "decode.sqlite"
    write_decode_export(decode, steps=12, kernels_per_step=7, graph_steps=5)
    old = tmp_path / "old.sqlite"
    write_decode_export(old, steps=4, kernels_per_step=5, graph_steps=2, schema="2.9.1")
    return {
        "decode": (decode, None),
        "old_schema": (old, None),
        "graph_nodes": (write_graph_node_export(tmp_path / "graph.sqlite"), None),
        "mixed": (write_mixed_export(tmp_path / "mixed.sqlite"), None),
        "mixed_pattern": (tmp_path / "mixed.sqlite", r"step#1$"),
        "whole_trace": (write_eager_export(tmp_path / "eager.sqlite"), None),
        "ties": (write_tied_export(tmp_path / "ties.sqlite"), None),
    }


def write_eager_export(path: Path) -> Path:
    """No NVTX range, no graph launch: one whole-trace window per thread."""
    a, b, gp = global_tid(4, 4), global_tid(4, 5), global_pid(4)
    with NsysExportWriter(path) as w:
        w.add_api_calls(
            [
                ApiRow(1_000, 1_040, a, 1, "cudaLaunchKernel_v7000"),
                ApiRow(1_020, 1_030, b, 2, "cudaLaunchKernel_v7000"),
                ApiRow(1_100, 1_160, a, 3, "cudaLaunchKernel_v7000"),
                ApiRow(5_000, 5_025, b, 4, "cuLaunchKernel"),
            ]
        )
        w.add_kernels(
            [
                KernelRow(1_050, 1_090, gp, 1, "gemm"),
                KernelRow(1_035, 1_045, gp, 2, "gemm"),
                KernelRow(1_170, 1_190, gp, 3, "softmax"),
                KernelRow(5_030, 5_080, gp, 4, "rmsnorm"),
            ]
        )
    return path


def write_tied_export(path: Path) -> Path:
    """Calls of two threads starting at the same nanosecond whose kernels start at the same
    nanosecond too, the GPU rows out of call-start order: the kernel table breaks such ties by
    table order (a stable sort), whatever chunks and buckets the rows pass through."""
    a, b, gp = global_tid(4, 4), global_tid(4, 5), global_pid(4)
    with NsysExportWriter(path) as w:
        w.add_api_calls(
            [
                ApiRow(2_000, 2_010, a, 1, "cudaLaunchKernel_v7000"),
                ApiRow(1_000, 1_010, b, 2, "cudaLaunchKernel_v7000"),
                ApiRow(2_000, 2_020, b, 3, "cudaLaunchKernel_v7000"),
                ApiRow(3_000, 3_010, a, 4, "cudaLaunchKernel_v7000"),
            ]
        )
        w.add_kernels(
            [
                KernelRow(3_050, 3_060, gp, 4, "late", stream_id=7),
                KernelRow(2_100, 2_150, gp, 3, "tie_b", stream_id=8),
                KernelRow(2_100, 2_140, gp, 1, "tie_a", stream_id=7),
                KernelRow(1_100, 1_120, gp, 2, "early", stream_id=7),
                KernelRow(2_100, 2_130, gp, 3, "tie_b2", stream_id=9),
            ]
        )
    return path


@pytest.mark.parametrize(("chunk_rows", "bucket_rows"), [(1, 1), (3, 5), (2, 100)])
@pytest.mark.parametrize(
    "name",
    [
        "decode",
        "old_schema",
        "graph_nodes",
        "mixed",
        "mixed_pattern",
        "whole_trace",
        "ties",
    ],
)
def test_streamed_tables_equal_the_eager_ones(
    tmp_path: Path, name: str, chunk_rows: int, bucket_rows: int
) -> None:
    path, pattern = make_exports(tmp_path)[name]
    eager = eager_tables(path, tmp_path / "eager", pattern)
    result = analyze_nsys_export(
        path,
        tmp_path / "stream",
        pattern,
        "csv",
        chunk_rows=chunk_rows,
        bucket_rows=bucket_rows,
        work_dir=tmp_path,
    )
    for table in TABLES:
        assert (tmp_path / "stream" / table).read_bytes() == (
            eager / table
        ).read_bytes(), table
    assert result.summary == NsysReport(path).analyze(pattern).summary
    assert not list(tmp_path.glob("trtbench_*"))  # parked rows removed


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("nsys/llama3_demo.sqlite", None),
        ("nsys/llama3_demo.sqlite", r"^layer_\d+_forward$"),
        ("nsys/vector_add_schema3.sqlite", None),
    ],
)
def test_real_exports_streamed_equal_the_eager_tables(
    tmp_path: Path, name: str, pattern: str | None
) -> None:
    path = external_fixture(name)
    eager = eager_tables(path, tmp_path / "eager", pattern)
    analyze_nsys_export(
        path, tmp_path / "s", pattern, "csv", chunk_rows=50, bucket_rows=9
    )
    for table in TABLES:
        assert (tmp_path / "s" / table).read_bytes() == (eager / table).read_bytes()


def test_graph_launch_windows_streamed(tmp_path: Path) -> None:
    # no NVTX range: the steps are graph-launch boundaries built from the calls alone
    path = tmp_path / "graphs.sqlite"
    gt, gp = global_tid(3, 3), global_pid(3)
    with NsysExportWriter(path) as w:
        w.add_api_calls(
            [
                ApiRow(100, 120, gt, 1, "cudaGraphLaunch_v10000"),
                ApiRow(150, 160, global_tid(3, 4), 2, "cudaLaunchKernel_v7000"),
                ApiRow(500, 530, gt, 3, "cudaGraphLaunch_v10000"),
                ApiRow(600, 650, gt, 4, "cudaStreamSynchronize_v3020"),
            ]
        )
        w.add_kernels(
            [
                KernelRow(130, 200, gp, 1, "a", graph_node_id=1),
                KernelRow(200, 260, gp, 1, "b", graph_node_id=2),
                KernelRow(165, 170, gp, 2, "c"),
                KernelRow(540, 560, gp, 3, "a", graph_node_id=1),
            ]
        )
    eager = eager_tables(path, tmp_path / "eager")
    analyze_nsys_export(path, tmp_path / "s", None, "csv", chunk_rows=1, bucket_rows=1)
    for table in TABLES:
        assert (tmp_path / "s" / table).read_bytes() == (eager / table).read_bytes()
    steps = pd.read_csv(tmp_path / "s" / "steps.csv")
    # [100, 500): graph launch 1 (20 ns, 2 nodes) + thread 4's call 2 (10 ns); [500, 530):
    # the last window ends with the thread's last call in the launch frame (the synchronize
    # has no GPU row and is no launch: not in it)
    assert steps["launch_overhead_ns"].tolist() == [30, 30]
    assert steps["owner_launch_overhead_ns"].tolist() == [20, 30]
    assert steps["end_ns"].tolist() == [500, 530]
    assert steps["kernels"].tolist() == [3, 1]


def test_parquet_kernel_table_streams_by_row_group(tmp_path: Path) -> None:
    path = tmp_path / "decode.sqlite"
    write_decode_export(path, steps=10, kernels_per_step=6, graph_steps=4)
    eager = eager_tables(path, tmp_path / "eager")
    result = analyze_nsys_export(
        path, tmp_path / "s", fmt="auto", bucket_rows=12, parquet_kernels=59
    )
    assert [p.name for p in result.files] == [
        "kernel_launches.parquet",
        "launch_summary.csv",
        "steps.csv",
    ]
    parquet = pq.ParquetFile(tmp_path / "s" / "kernel_launches.parquet")
    assert (
        parquet.num_row_groups > 1 and parquet.metadata.num_rows == 60 == result.kernels
    )
    streamed = pd.concat(
        (b.to_pandas() for b in parquet.iter_batches(batch_size=7)), ignore_index=True
    )
    expected = pd.read_csv(eager / "kernel_launches.csv")
    assert list(streamed.columns) == [c.name for c in KERNEL_LAUNCH_SCHEMA]
    for column in expected.columns:
        assert cells(streamed[column]) == cells(expected[column]), column
    for table in TABLES[1:]:
        assert (tmp_path / "s" / table).read_bytes() == (eager / table).read_bytes()


def cells(series: pd.Series) -> list:
    """Values as Python objects, None for a missing one, whole numbers as int."""
    return [
        None if pd.isna(v) else int(v) if isinstance(v, (int, float)) else str(v)
        for v in series.tolist()
    ]


def test_kernel_table_format_rule() -> None:
    assert kernel_table_format("auto", 1_000_000) == "csv"
    assert kernel_table_format("auto", 1_000_001) == "parquet"
    assert kernel_table_format("csv", 10**9) == "csv"
    assert kernel_table_format("parquet", 0) == "parquet"
    with pytest.raises(ValueError, match="'xlsx'"):
        kernel_table_format("xlsx", 0)


def test_table_writer_pieces_make_the_bytes_of_one_write(tmp_path: Path) -> None:
    trace = kernel_launch_trace(
        NsysReport(write_mixed_export(tmp_path / "m.sqlite")).launches
    )
    trace["s_kernel_name"] = trace["s_kernel_name"].cat.rename_categories(
        {
            "gemm": 'gemm<float, "tn">',
            "softmax": "soft\x1emax",
        }  # quoted; a control byte
    )
    whole = write_csv_fast(trace, tmp_path / "whole.csv", KERNEL_LAUNCH_SCHEMA)
    with TableWriter(tmp_path / "pieces.csv", KERNEL_LAUNCH_SCHEMA, "csv") as writer:
        for lo in range(0, len(trace), 2):
            writer.write(trace.iloc[lo : lo + 2])
    assert (tmp_path / "pieces.csv").read_bytes() == whole.read_bytes()
    with TableWriter(tmp_path / "none.csv", KERNEL_LAUNCH_SCHEMA, "csv"):
        pass
    header = ",".join(c.name for c in KERNEL_LAUNCH_SCHEMA) + "\n"
    assert (tmp_path / "none.csv").read_text() == header


def test_table_writer_leaves_nothing_after_an_error(tmp_path: Path) -> None:
    target = tmp_path / "t.parquet"
    with (
        pytest.raises(RuntimeError),
        TableWriter(target, KERNEL_LAUNCH_SCHEMA, "parquet"),
    ):
        raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_summary_in_partitions_equals_one_summary(tmp_path: Path) -> None:
    path = tmp_path / "decode.sqlite"
    write_decode_export(path, steps=9, kernels_per_step=25, graph_steps=4)
    trace = kernel_launch_trace(NsysReport(path).launches)
    summary = SummaryAccumulator(tmp_path, len(trace), part_rows=17)
    for lo in range(0, len(trace), 13):
        summary.add(trace.iloc[lo : lo + 13])
    pd.testing.assert_frame_equal(
        summary.finish(trace.iloc[:0]), kernel_launch_summary(trace)
    )
    assert not list(tmp_path.glob("trtbench_*"))


def test_steps_in_pieces_with_early_settling_equal_one_table(tmp_path: Path) -> None:
    report = NsysReport(write_mixed_export(tmp_path / "m.sqlite"))
    windows, _ = resolve_step_windows(report.launches, report.ranges, None, what="r")
    frame = report.launches
    start = frame["api_start_ns"].fillna(10**9)  # rows without a call: last piece
    steps = StepAccumulator(windows)
    for lo, hi in ((0, 1_200), (1_200, 2_300), (2_300, 10**9 + 1)):
        steps.add(frame[(start >= lo) & (start < hi)])  # whole calls: by their start
        steps.close_before(hi)  # no later piece holds a call starting before hi
    pd.testing.assert_frame_equal(steps.table(), step_table(report.launches, windows))


def test_declared_size_reads_the_sqlite_header() -> None:
    header = bytearray(100)
    header[16:18] = (4096).to_bytes(2, "big")
    header[24:28] = header[92:96] = (7).to_bytes(4, "big")
    header[28:32] = (300).to_bytes(4, "big")
    assert declared_size(bytes(header)) == 4096 * 300
    header[16:18] = (1).to_bytes(2, "big")  # 1 means 65536
    assert declared_size(bytes(header)) == 65536 * 300
    header[92:96] = (6).to_bytes(4, "big")  # count not valid: unknown
    assert declared_size(bytes(header)) is None
    assert declared_size(b"SQLite format 3\x00") is None


def test_truncated_export_is_named_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = tmp_path / "whole.sqlite"
    write_decode_export(whole, steps=50, kernels_per_step=20)
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(TraceParseError, match="truncated or corrupt .* bytes of the"):
        analyze_nsys_export(cut, tmp_path / "o")
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "nsys", str(cut), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and str(cut) in err and "\n" not in err
    assert not (tmp_path / "o").exists()


def test_buckets_cut_by_the_weight_before_each_start() -> None:
    # sorted: start 1 (4 rows), 3 (1), 3 (3), 5 (2), 7 (2), 9 (1); weight before each start
    # 0, 4, 8, 10, 12 -> // 4: 0, 1, 2, 2, 3: buckets {1}, {3, 3}, {5, 7}, {9}
    starts = np.array([5, 1, 3, 3, 9, 7])
    weights = np.array([2, 4, 1, 3, 1, 2])
    assert cut_buckets(starts, weights, 4).tolist() == [1, 3, 5, 9]
    assert weights.tolist() == [2, 4, 1, 3, 1, 2]  # the input is left as it was
    assert cut_buckets(starts, weights, 100).tolist() == [1]
    assert cut_buckets(starts[:0], weights[:0], 4).tolist() == []
