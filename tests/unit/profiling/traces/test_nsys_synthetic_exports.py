"""The nsys reader end to end on exports made by our synthesizer, for every path that the real
exports (``tests/support/data.external_fixture``, absent on a fresh clone) also cover: no CUDA
activity, a truncated file, a foreign or nvprof database, a trace with neither step ranges nor
graph launches (one window per thread), a step pattern matching nothing. (The recorded tier of
``trtbench run`` is tested on both kinds in ``tests/unit/pipeline/test_tier_capture.py``.)
Expected values come from the rows written here."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from tests.support.synth_nsys import (
    ApiRow,
    KernelRow,
    NsysExportWriter,
    NvtxRow,
    global_pid,
    global_tid,
    write_decode_export,
)
from trtbench.cli import main
from trtbench.core.errors import ConfigError, TraceParseError
from trtbench.profiling.traces.nsys import NsysReport

PID = 31
GP = global_pid(PID)
MAIN, WORKER = global_tid(PID, PID), global_tid(PID, PID + 1)


def test_export_without_cuda_activity_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cpu_only.sqlite"
    with NsysExportWriter(path) as w:  # NVTX ranges only: no API call, no GPU row
        w.add_nvtx_ranges(
            [NvtxRow(100, 200, MAIN, "load"), NvtxRow(300, 400, MAIN, "run")]
        )
    with pytest.raises(
        TraceParseError, match="holds no CUDA activity.*--trace=cuda,nvtx"
    ):
        NsysReport(path)
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "nsys", str(path), "--out", str(tmp_path / "o")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "no CUDA activity" in err and "\n" not in err


def test_truncated_export_is_a_clear_error(tmp_path: Path) -> None:
    whole = tmp_path / "whole.sqlite"
    write_decode_export(whole, steps=200, kernels_per_step=20)
    data = whole.read_bytes()
    assert len(data) > 4 * 65536  # so the cut below loses most of the rows
    truncated = tmp_path / "truncated.sqlite"
    truncated.write_bytes(data[:65536])
    with pytest.raises(TraceParseError, match="truncated or corrupt.*nsys export"):
        NsysReport(truncated)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("t (x INTEGER)", "not an nsys export"),
        ("Version (v TEXT)", "an nvprof database"),
    ],
)
def test_foreign_sqlite_is_named(tmp_path: Path, table: str, expected: str) -> None:
    path = tmp_path / "foreign.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE {table}")
    with pytest.raises(TraceParseError, match=f"{expected}.*META_DATA_EXPORT"):
        NsysReport(path)


def write_two_thread_export(path: Path) -> Path:
    """Eager launches on two threads, no NVTX range, no graph launch."""
    with NsysExportWriter(path) as w:
        w.add_api_calls(
            [
                ApiRow(1_000, 1_040, MAIN, 1, "cudaLaunchKernel_v7000"),
                ApiRow(1_100, 1_160, MAIN, 2, "cudaLaunchKernel_v7000"),
                ApiRow(1_200, 1_300, MAIN, 3, "cudaStreamSynchronize_v3020"),
                ApiRow(5_000, 5_025, WORKER, 4, "cuLaunchKernel"),
            ]
        )
        w.add_kernels(
            [
                KernelRow(1_050, 1_090, GP, 1, "gemm"),
                KernelRow(1_170, 1_190, GP, 2, "softmax"),
                KernelRow(5_030, 5_080, GP, 4, "rmsnorm"),
            ]
        )
    return path


def test_no_ranges_and_no_graph_launches_make_one_step_per_thread(tmp_path: Path):
    report = NsysReport(write_two_thread_export(tmp_path / "eager.sqlite"))
    analysis = report.analyze()
    assert analysis.summary.step_source.startswith("whole trace")
    steps = report.get_steps().sort_values("start_ns")
    # main thread: launches of 40 + 60 ns; the synchronize is not a launch call
    assert steps["launch_calls"].tolist() == [2, 1]
    assert steps["launch_overhead_ns"].tolist() == [40 + 60, 25]
    assert steps["kernels"].tolist() == [2, 1]
    assert steps["start_ns"].tolist() == [1_000, 5_000]
    assert len(report.get_kernel_launches()) == 3
    summary = report.get_launch_summary().set_index("s_kernel_name")
    # each kernel once; all three start after their call returned (1050 > 1040, …)
    assert summary.loc[["gemm", "softmax", "rmsnorm"], "count"].tolist() == [1, 1, 1]
    assert summary.loc[["gemm", "softmax", "rmsnorm"], "queue_count"].tolist() == [
        1,
        1,
        1,
    ]
    assert summary.loc["rmsnorm", "s_api_name"] == "cuLaunchKernel"


def test_step_pattern_matching_nothing_lists_the_range_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "named.sqlite"
    with NsysExportWriter(path) as w:
        w.add_api_calls([ApiRow(1_000, 1_040, MAIN, 1, "cudaLaunchKernel_v7000")])
        w.add_kernels([KernelRow(1_050, 1_090, GP, 1, "gemm")])
        w.add_nvtx_ranges(
            [
                NvtxRow(900, 1_500, MAIN, "attention"),
                NvtxRow(1_500, 1_900, MAIN, "attention"),
                NvtxRow(1_900, 2_000, MAIN, "sample"),
            ]
        )
    with pytest.raises(ConfigError, match="matches no NVTX range name"):
        NsysReport(path).get_steps("decode")
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "analyze",
                "nsys",
                str(path),
                "--out",
                str(tmp_path / "o"),
                "--step-pattern",
                "decode",
            ]
        )
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "'attention' (2)" in err and "'sample' (1)" in err
    assert "--step-pattern" in err and "\n" not in err


def write_two_thread_decode_export(path: Path) -> Path:
    """decode_step#0 [1000, 2000) and #1 [2000, 3000), NVTX ranges of the main thread; a worker
    thread of the same process launches inside both; another process launches inside step 0."""
    other = global_tid(99, 99)
    with NsysExportWriter(path) as w:
        w.add_api_calls(
            [
                ApiRow(1_100, 1_140, MAIN, 1, "cudaLaunchKernel_v7000"),
                ApiRow(1_500, 1_520, WORKER, 3, "cuLaunchKernel"),
                ApiRow(1_600, 1_610, other, 5, "cudaLaunchKernel_v7000"),
                ApiRow(2_100, 2_150, MAIN, 2, "cudaGraphLaunch_v10000"),
                ApiRow(2_500, 2_530, WORKER, 4, "cudaLaunchKernel_v7000"),
            ]
        )
        w.add_kernels(
            [
                KernelRow(1_150, 1_190, GP, 1, "gemm"),
                KernelRow(1_530, 1_560, GP, 3, "sampler"),
                KernelRow(1_620, 1_630, global_pid(99), 5, "elsewhere"),
                KernelRow(2_160, 2_200, GP, 2, "gemm", graph_node_id=1),
                KernelRow(2_210, 2_250, GP, 2, "softmax", graph_node_id=2),
                KernelRow(2_540, 2_600, GP, 4, "topk"),
            ]
        )
        w.add_nvtx_ranges(
            [
                NvtxRow(1_000, 2_000, MAIN, "decode_step#0"),
                NvtxRow(2_000, 3_000, MAIN, "decode_step#1"),
            ]
        )
    return path


def test_steps_take_the_launches_of_every_thread_of_the_process(tmp_path: Path):
    path = write_two_thread_decode_export(tmp_path / "two_threads.sqlite")
    out = tmp_path / "o"
    main(["analyze", "nsys", str(path), "--out", str(out)])
    steps = pd.read_csv(out / "steps.csv")
    # step 0: main's call 1 (40 ns) + the worker's call 3 (20 ns); process 99's call is not
    # the step's. Step 1: main's graph launch 2 (50 ns, 2 nodes) + the worker's call 4 (30 ns)
    assert steps["launch_calls"].tolist() == [2, 2]
    assert steps["owner_launch_calls"].tolist() == [1, 1]
    assert steps["launch_threads"].tolist() == [2, 2]
    assert steps["owner_tid"].tolist() == [PID, PID]
    assert steps["graph_launches"].tolist() == [0, 1]
    assert steps["launch_overhead_ns"].tolist() == [40 + 20, 50 + 30]
    assert steps["owner_launch_overhead_ns"].tolist() == [40, 50]
    assert steps["kernels"].tolist() == [2, 3]
    assert steps["owner_kernels"].tolist() == [1, 2]
    assert steps["graph_kernels"].tolist() == [0, 2]
    # every delay is 10 ns: 1150 - 1140, 1530 - 1520, 2160 - 2150, 2540 - 2530
    assert steps["launch_delay_calls"].tolist() == [2, 2]
    assert steps["launch_delay_mean_ns"].tolist() == [10.0, 10.0]
    # GPU: [1150, 1190) + [1530, 1560); [2160, 2200) + [2210, 2250) + [2540, 2600)
    assert steps["gpu_busy_ns"].tolist() == [40 + 30, 40 + 40 + 60]
    assert steps["gpu_start_ns"].tolist() == [1_150, 2_160]
    assert steps["gpu_end_ns"].tolist() == [1_560, 2_600]
    assert steps["gpu_idle_ns"].tolist() == [410 - 70, 440 - 140]
