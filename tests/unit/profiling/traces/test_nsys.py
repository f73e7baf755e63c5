"""NsysReport on real exports (values from direct SQL or by hand), synthesized graph and oldest
schema exports, the no-CUDA file, bad inputs, and the ``trtbench analyze nsys`` CLI."""

from __future__ import annotations

import csv
import sqlite3
import statistics
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support.data import external_fixture
from tests.support.synth_nsys import (
    ApiRow,
    GraphTraceRow,
    NsysExportWriter,
    global_pid,
    global_tid,
    write_graph_node_export,
)
from trtbench.cli import cli, main
from trtbench.core.errors import ConfigError, TraceParseError
from trtbench.profiling.traces.nsys import NsysReport
from trtbench.profiling.traces.nsys_profile import (
    NsysProfileSpec,
    nsys_profile_argv,
    wrap_with_nsys,
)
from trtbench.profiling.traces.schemas import KERNEL_LAUNCH_SCHEMA, STEP_SCHEMA

# cuda_kern_exec_trace written out independently: KERNEL x RUNTIME on correlationId and process
EXEC_TRACE_SQL = """
SELECT r.start, r.end - r.start,
       CASE WHEN k.start >= r.end THEN k.start - r.end END,
       k.start, k.end - k.start, MAX(r.end, k.end) - r.start, s.value, n.value
FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
  ON r.correlationId = k.correlationId AND (r.globalTid & -16777216) = k.globalPid
JOIN StringIds s ON s.id = r.nameId JOIN StringIds n ON n.id = k.demangledName
ORDER BY r.start, k.start
"""


@pytest.fixture(scope="module")
def demo() -> NsysReport:
    return NsysReport(external_fixture("nsys/llama3_demo.sqlite"))


def query(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute(sql).fetchall()


def test_real_export_matches_cuda_kern_exec_trace(demo: NsysReport) -> None:
    expected = query(demo.path, EXEC_TRACE_SQL)
    trace = demo.get_kernel_launches()
    columns = [
        "api_start_ns",
        "api_dur_ns",
        "queue_dur_ns",
        "kernel_start_ns",
        "kernel_dur_ns",
        "total_dur_ns",
        "s_api_name",
        "s_kernel_name",
    ]
    got = [
        tuple(None if pd.isna(v) else v for v in row)
        for row in trace[columns].itertuples(False)
    ]
    want = [(*row[:6], row[6].removesuffix("_v7000"), row[7]) for row in expected]
    assert got == want
    # cross-check, computed separately with the formulas of nsys's cuda_kern_exec_trace
    # report: 64 kernels, 57 with a queue time
    assert len(trace) == 64 and trace["queue_dur_ns"].count() == 57
    assert trace["api_dur_ns"].mean() == pytest.approx(206224.6, abs=0.1)
    assert (demo.schema_version, demo.product_version) == ("3.16.1", "2024.6.2.225")


def test_real_export_summary_statistics(demo: NsysReport) -> None:
    rows = [
        r for r in query(demo.path, EXEC_TRACE_SQL) if r[7] == "ampere_sgemm_128x64_nn"
    ]
    api = [r[1] for r in rows]
    queue = [r[2] for r in rows if r[2] is not None]
    summary = (
        demo.get_launch_summary()
        .set_index("s_kernel_name")
        .loc["ampere_sgemm_128x64_nn"]
    )
    assert (
        (summary["count"], summary["queue_count"])
        == (len(rows), len(queue))
        == (16, 15)
    )
    assert summary["api_mean_ns"] == pytest.approx(statistics.mean(api))
    assert summary["api_median_ns"] == statistics.median(api)
    assert summary["api_std_ns"] == pytest.approx(statistics.stdev(api))  # sample std
    assert summary["queue_mean_ns"] == pytest.approx(statistics.mean(queue))


def union_length(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def test_real_export_steps_from_nvtx_ranges(demo: NsysReport) -> None:
    steps = demo.get_steps(r"^layer_\d+_forward$")
    ranges = query(
        demo.path,
        "SELECT text, start, end, globalTid FROM NVTX_EVENTS "
        "WHERE text GLOB 'layer_*_forward' ORDER BY start",
    )
    assert steps["s_name"].tolist() == [r[0] for r in ranges]
    for (_, start, end, gtid), (_, step) in zip(ranges, steps.iterrows(), strict=True):
        calls = query(
            demo.path,
            "SELECT r.start, r.end, k.start, k.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
            "JOIN StringIds s ON s.id = r.nameId LEFT JOIN CUPTI_ACTIVITY_KIND_KERNEL k "
            "ON k.correlationId = r.correlationId WHERE s.value LIKE 'cudaLaunchKernel%' "
            f"AND r.globalTid = {gtid} AND r.start >= {start} AND r.start < {end}",
        )
        assert step["launch_calls"] == len(calls)
        assert step["launch_overhead_ns"] == sum(c[1] - c[0] for c in calls)
        gpu = query(  # every GPU activity launched by any call of the step
            demo.path,
            " UNION ALL ".join(
                f"SELECT g.start, g.end FROM {table} g JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                f"ON r.correlationId = g.correlationId WHERE r.globalTid = {gtid} "
                f"AND r.start >= {start} AND r.start < {end}"
                for table in (
                    "CUPTI_ACTIVITY_KIND_KERNEL",
                    "CUPTI_ACTIVITY_KIND_MEMCPY",
                    "CUPTI_ACTIVITY_KIND_MEMSET",
                )
            ),
        )
        assert step["gpu_busy_ns"] == union_length(gpu)
        span = max(e for _, e in gpu) - min(s for s, _ in gpu)
        assert step["gpu_idle_ns"] == span - union_length(gpu)
        assert step["wall_ns"] == end - start
    assert steps["launch_calls"].tolist() == [8] * 8


def test_schema_3_0_export_by_hand() -> None:
    report = NsysReport(external_fixture("nsys/vector_add_schema3.sqlite"))
    assert report.schema_version == "3.0.0"  # EXPORT_META_DATA
    trace = report.get_kernel_launches()
    first, second = trace.iloc[0], trace.iloc[1]
    # call 547243632..548779588, kernel 548779327..548801887 starts before the call ends
    assert pd.isna(first["queue_dur_ns"])
    assert first["total_dur_ns"] == 548801887 - 547243632
    # call 548781141..548789156, kernel 548795167..548824222
    assert second["queue_dur_ns"] == 548795167 - 548789156
    assert second["total_dur_ns"] == 548824222 - 548781141
    steps = report.get_steps()  # no NVTX, no graphs: one step over the whole trace
    assert steps["launch_overhead_ns"].tolist() == [1535956 + 8015 + 6260 + 6707]
    assert steps["gpu_busy_ns"].tolist() == [
        548875581 - 548779327
    ]  # 4 overlapping kernels


PID = 77
GT, GP = global_tid(PID, PID), global_pid(PID)


def test_graph_node_trace_is_attributed_to_the_graph_launch(tmp_path: Path) -> None:
    report = NsysReport(write_graph_node_export(tmp_path / "graph.sqlite"))
    trace = report.get_kernel_launches()
    graph = trace[trace["s_api_name"] == "cudaGraphLaunch"]
    assert graph["graph_node_id"].tolist() == [7, 8, 9]
    assert graph["call_kernels"].tolist() == [3, 3, 3]
    assert graph["queue_dur_ns"].tolist() == [10, 50, 150]  # node start - 2150
    assert trace.iloc[0][["grid_x", "grid_y", "block_x"]].tolist() == [64, 2, 256]
    steps = report.get_steps()  # default pattern: decode_step#N
    assert steps["launch_overhead_ns"].tolist() == [10 + 30, 50]
    assert steps["graph_launches"].tolist() == [0, 1]
    assert steps["graph_kernels"].tolist() == [0, 3]
    # step 0 GPU: [1120,1200) [1210,1250) memset [1400,1450): busy 80+40+50, span 330
    assert steps["gpu_busy_ns"].tolist() == [170, 110]
    assert steps["gpu_idle_ns"].tolist() == [330 - 170, 150 - 110]


def test_oldest_schema_without_enum_tables(tmp_path: Path) -> None:
    path = write_graph_node_export(tmp_path / "old.sqlite", schema="2.9.1")
    tables = {r[0] for r in query(path, "SELECT name FROM sqlite_master")}
    assert "EXPORT_META_DATA" in tables and not any(
        t.startswith("ENUM_") for t in tables
    )
    report = NsysReport(path)
    assert report.schema_version == "2.9.1"
    assert report.ranges["s_name"].tolist() == ["decode_step#0", "decode_step#1"]
    assert report.get_steps()["launch_overhead_ns"].tolist() == [40, 50]


def test_whole_graph_trace_and_launch_without_gpu_rows(tmp_path: Path) -> None:
    path = tmp_path / "graph_mode.sqlite"
    with NsysExportWriter(path) as w:
        w.add_api_calls(
            [
                ApiRow(100, 120, GT, 1, "cudaGraphLaunch_v10000"),
                ApiRow(500, 530, GT, 2, "cudaGraphLaunch_v10000"),
            ]
        )
        w.add_graph_traces(
            [GraphTraceRow(130, 400, GP, 1)]
        )  # second replay not captured
    steps = NsysReport(
        path
    ).get_steps()  # graph-launch boundaries: [100, 500), [500, 530)
    assert steps["launch_calls"].tolist() == [1, 1]
    assert steps["launch_overhead_ns"].tolist() == [20, 30]
    assert steps["kernels"].tolist() == [0, 0]
    assert steps["gpu_busy_ns"].tolist() == [270, 0]


def test_no_cuda_activity_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    path = external_fixture("nsys/no_cuda_activity.sqlite")
    with pytest.raises(
        TraceParseError, match="holds no CUDA activity.*--trace=cuda,nvtx"
    ):
        NsysReport(path)
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "nsys", str(path)])
    assert exit_info.value.code == 2
    assert "no CUDA activity" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "name", "expected"),
    [
        (b"", "empty.sqlite", "is empty"),
        (b"not a database\n", "notes.sqlite", "not an nsys SQLite export"),
        (b"NSYS report bytes", "run.nsys-rep", "must be exported first"),
    ],
)
def test_bad_files_exit_2_with_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    name: str,
    expected: str,
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "nsys", str(path), "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and str(path) in err and "\n" not in err


def test_truncated_and_foreign_sqlite(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.sqlite"
    truncated.write_bytes(
        external_fixture("nsys/llama3_demo.sqlite").read_bytes()[:65536]
    )
    with pytest.raises(TraceParseError, match="truncated or corrupt"):
        NsysReport(truncated)
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(TraceParseError, match="not an nsys export.*META_DATA_EXPORT"):
        NsysReport(foreign)


def test_cli_writes_the_three_csvs(tmp_path: Path) -> None:
    export = write_graph_node_export(tmp_path / "graph.sqlite")
    result = CliRunner().invoke(
        cli, ["analyze", "nsys", str(export), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 0, result.output
    # launch overhead per step: (40 + 50) / 2 ns
    assert (
        "launch overhead per step" in result.output and "mean 0.045 us" in result.output
    )
    with (tmp_path / "o" / "kernel_launches.csv").open() as fh:
        header = next(csv.reader(fh))
    assert header == [c.name for c in KERNEL_LAUNCH_SCHEMA]
    with (tmp_path / "o" / "steps.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == [c.name for c in STEP_SCHEMA]
    assert [r["launch_overhead_ns"] for r in rows] == ["40", "50"]


def test_cli_pattern_matching_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = external_fixture("nsys/llama3_demo.sqlite")
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "analyze",
                "nsys",
                str(path),
                "--out",
                str(tmp_path),
                "--step-pattern",
                "decode",
            ]
        )
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "matches no NVTX range name" in err and "'attention_simulation' (16)" in err
    assert "--step-pattern" in err and "\n" not in err


def test_nsys_profile_argv() -> None:
    spec = NsysProfileSpec(Path("traces"), "run1")
    argv = nsys_profile_argv(spec, ["python", "serve.py", "--port", "8001"])
    assert argv[:2] == ["nsys", "profile"]
    assert {
        "--trace=cuda,nvtx",
        "--cuda-graph-trace=node",
        "--sample=none",
        "--export=sqlite",
        "--output=traces/run1",
    } <= set(argv)
    assert argv[-4:] == ["python", "serve.py", "--port", "8001"]
    assert not any(a.startswith("--capture-range") for a in argv)
    nvtx = NsysProfileSpec(Path("t"), capture_range="nvtx", nvtx_capture="decode@*")
    argv, env = wrap_with_nsys(nvtx, ["python", "x.py"], Path("/opt/nsys"))
    assert argv[0] == "/opt/nsys"
    assert {
        "--capture-range=nvtx",
        "--capture-range-end=stop",
        "--nvtx-capture=decode@*",
    } <= set(argv)
    assert env == {"NSYS_NVTX_PROFILER_REGISTER_ONLY": "0"}  # torch.cuda.nvtx strings


@pytest.mark.parametrize(
    ("spec", "command", "expected"),
    [
        (
            NsysProfileSpec(Path("t"), capture_range="nvtx"),
            ["x"],
            "needs --nvtx-capture",
        ),
        (
            NsysProfileSpec(Path("t"), nvtx_capture="decode"),
            ["x"],
            "--capture-range nvtx",
        ),
        (NsysProfileSpec(Path("t")), [], "no command to profile"),
    ],
)
def test_nsys_profile_argv_rejects(
    spec: NsysProfileSpec, command: list, expected: str
) -> None:
    with pytest.raises(ConfigError, match=expected):
        nsys_profile_argv(spec, command)


def test_profile_without_nsys_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "bin" / "nsys"
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "profile",
                "nsys",
                "--nsys",
                str(missing),
                "--out",
                str(tmp_path),
                "--",
                "python",
                "-c",
                "pass",
            ]
        )
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert f"--nsys {missing} is not an executable file" in err and "\n" not in err
    assert not (tmp_path / "report.sqlite").exists()
