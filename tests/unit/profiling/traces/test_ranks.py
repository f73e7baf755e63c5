"""``trtbench analyze nsys|kineto`` of several ranks: a folder of rank exports, per-rank and
combined tables, step alignment (by name, by position, none), a rank with no kernels, and bad
rank files (exit 2 naming them; the others analysed with --skip-bad-ranks). Expected values come
from the timing model of ``write_decode_export`` (its docstring) or the rows written here."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.support.synth_nsys import (
    ApiRow,
    NsysExportWriter,
    NvtxRow,
    global_tid,
    write_decode_export,
)
from trtbench.cli import main
from trtbench.core.errors import TraceParseError
from trtbench.profiling.traces.ranks import (
    align_steps,
    analyze_ranks,
    expand_inputs,
    rank_files,
)

KPS = 3  # kernels per step: eager step overhead 3 x 4000 ns, graph step 20000 ns
EAGER, GRAPH = KPS * 4000, 20000
WALL = 5000 * KPS + 20000 - 1000  # range length of every step


def write_ranks(folder: Path) -> Path:
    """rank 0: 4 steps, last 2 graph, GPU 0; rank 1: 4 eager steps, GPU 1; rank 2: 3 steps,
    last one graph, GPU 2 (a step fewer)."""
    folder.mkdir()
    for rank, steps, graph in ((0, 4, 2), (1, 4, 0), (2, 3, 1)):
        write_decode_export(
            folder / f"report_rank{rank}.sqlite",
            steps=steps,
            kernels_per_step=KPS,
            graph_steps=graph,
            pid=100 + rank,
            device=rank,
        )
    return folder


def test_a_folder_of_ranks_gives_per_rank_and_combined_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_ranks(tmp_path / "traces")
    out = tmp_path / "out"
    main(["analyze", "nsys", str(folder), "--out", str(out), "--jobs", "2"])
    for rank in range(3):
        rank_dir = out / f"report_rank{rank}"
        assert sorted(p.name for p in rank_dir.iterdir()) == [
            "kernel_launches.csv",
            "launch_summary.csv",
            "steps.csv",
        ]
    steps = pd.read_csv(out / "steps_ranks.csv")
    assert steps["rank"].tolist() == [0] * 4 + [1] * 4 + [2] * 3
    assert steps["device_id"].tolist() == [0] * 4 + [1] * 4 + [2] * 3
    assert steps["rank_file"].iloc[0] == "report_rank0.sqlite"
    assert steps["aligned_step"].tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2]
    assert steps["launch_overhead_ns"].tolist() == (
        [EAGER, EAGER, GRAPH, GRAPH] + [EAGER] * 4 + [EAGER, EAGER, GRAPH]
    )
    alignment = pd.read_csv(out / "step_alignment.csv")
    assert alignment["s_name"].tolist() == [f"decode_step#{i}" for i in range(4)]
    assert alignment["ranks"].tolist() == [3, 3, 3, 2]  # rank 2 has no decode_step#3
    step2 = alignment.iloc[2]  # overheads: rank 0 graph, rank 1 eager, rank 2 graph
    assert step2["launch_overhead_mean_ns"] == pytest.approx(
        (GRAPH + EAGER + GRAPH) / 3
    )
    assert (step2["launch_overhead_min_ns"], step2["launch_overhead_max_ns"]) == (
        EAGER,
        GRAPH,
    )
    assert step2["launch_overhead_max_rank"] == 0  # the first rank at the maximum
    assert alignment["kernels_min"].tolist() == [KPS] * 4
    assert alignment["wall_max_ns"].tolist() == [WALL] * 4
    step3 = alignment.iloc[3]  # ranks 0 (graph) and 1 (eager)
    assert step3["launch_overhead_mean_ns"] == (GRAPH + EAGER) / 2
    summary = pd.read_csv(out / "launch_summary_ranks.csv")
    assert set(summary["rank"]) == {0, 1, 2}
    # per rank and kernel name: rank 1 launches kernel_0..2 once per step, eagerly
    rank1 = summary[summary["rank"] == 1]
    assert rank1["count"].tolist() == [4, 4, 4]
    captured = capsys.readouterr()
    printed = captured.out
    # a progress line per rank as it finishes (in any order with --jobs 2), counting up
    progress = [
        ln for ln in captured.err.splitlines() if ln.startswith("analysed rank")
    ]
    assert sorted(ln.split(":")[0] for ln in progress) == [
        f"analysed rank {r} (report_rank{r}.sqlite)" for r in range(3)
    ]
    assert [ln.split(": ")[1] for ln in progress] == [f"{n} of 3" for n in (1, 2, 3)]
    assert "3 ranks; steps aligned by step name" in printed
    assert "1 of them on only some ranks" in printed
    assert "rank 2 (report_rank2.sqlite, device 2): 9 kernels, 3 steps" in printed


def test_steps_without_names_align_by_position_or_not_at_all() -> None:
    def steps(n: int) -> pd.DataFrame:
        return pd.DataFrame({"s_name": ["graph_launch"] * n})

    source = "graph-launch boundaries"
    aligned, how = align_steps([steps(2), steps(2)], [source, source])
    assert [a.tolist() for a in aligned] == [[0, 1], [0, 1]]
    assert how == "by position: every rank has 2 steps"
    aligned, how = align_steps([steps(2), steps(3)], [source, source])
    assert [a.isna().all() for a in aligned] == [True, True]
    assert how.startswith("not aligned: the ranks have different step counts (2, 3)")


def test_unaligned_ranks_leave_the_alignment_table_empty(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    for rank, n in ((0, 2), (1, 3)):  # graph launches only, no NVTX: 2 and 3 steps
        gt = global_tid(10 + rank, 10 + rank)
        with NsysExportWriter(folder / f"r{rank}.sqlite") as w:
            w.add_api_calls(
                ApiRow(100 * i, 100 * i + 10, gt, i + 1, "cudaGraphLaunch_v10000")
                for i in range(n)
            )
    result = analyze_ranks(expand_inputs([folder], "nsys"), tmp_path / "o")
    assert "not aligned" in result.aligned_by
    assert result.steps["aligned_step"].isna().all() and result.alignment.empty
    assert pd.read_csv(tmp_path / "o" / "step_alignment.csv").empty


def test_a_rank_with_no_kernels(tmp_path: Path) -> None:
    folder = write_ranks(tmp_path / "t")
    for old in folder.glob("report_rank[12].sqlite"):
        old.unlink()
    gt = global_tid(7, 7)
    with NsysExportWriter(folder / "report_rank1.sqlite") as w:  # launches, no GPU rows
        w.add_api_calls([ApiRow(1_100, 1_150, gt, 1, "cudaGraphLaunch_v10000")])
        w.add_nvtx_ranges([NvtxRow(1_000, 2_000, gt, "decode_step#0")])
    result = analyze_ranks(expand_inputs([folder], "nsys"), tmp_path / "o")
    (rank0, first), (rank1, second) = result.ranks
    assert (rank1.rank, second.kernels) == (1, 0)
    steps = result.steps[result.steps["rank"] == 1]
    assert steps["device_id"].isna().all()
    assert steps["launch_overhead_ns"].tolist() == [50] and steps[
        "kernels"
    ].tolist() == [0]
    assert steps["aligned_step"].tolist() == [0]  # decode_step#0, as on rank 0
    assert result.alignment["ranks"].tolist() == [2, 1, 1, 1]
    kernels = pd.read_csv(tmp_path / "o" / "report_rank1" / "kernel_launches.csv")
    assert kernels.empty and first.kernels == 4 * KPS


def test_a_truncated_rank_stops_everything_unless_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_ranks(tmp_path / "t")
    bad = folder / "report_rank1.sqlite"
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "nsys", str(folder), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err
    assert str(bad) in err and "truncated" in err
    assert not out.exists()  # checked before any rank was analysed
    main(["analyze", "nsys", str(folder), "--out", str(out), "--skip-bad-ranks"])
    captured = capsys.readouterr()
    assert f"skipped rank 1: {bad}" in captured.err
    steps = pd.read_csv(out / "steps_ranks.csv")
    assert sorted(set(steps["rank"])) == [0, 2]
    assert not (out / "report_rank1").exists()


def sigint_while_parking(args: list[str], parked_in: Path) -> tuple[int, str]:
    """``trtbench analyze nsys ARGS`` in a child process, sent SIGINT once its parked rows
    appear in ``parked_in`` (so the analysis is surely running); its exit code and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "trtbench.cli", "analyze", "nsys", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while proc.poll() is None and not list(parked_in.glob("trtbench_*")):
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate()
    return proc.returncode, err


def test_sigint_on_one_export_leaves_no_table(tmp_path: Path) -> None:
    """One export stopped while its rows are parked: nothing of it is left, nor the table
    of an earlier run in the same folder."""
    export = tmp_path / "big.sqlite"
    write_decode_export(export, steps=1000, kernels_per_step=200, graph_steps=0)
    out = tmp_path / "o"
    out.mkdir()
    (out / "steps.csv").write_text("stale\n")
    returncode, err = sigint_while_parking([str(export), "--out", str(out)], out)
    assert returncode == 128 + signal.SIGINT and "stopped by SIGINT" in err, err
    assert list(out.iterdir()) == []


def test_sigint_keeps_finished_ranks_and_starts_no_more(tmp_path: Path) -> None:
    """Ctrl-C while rank 1 runs (its parked rows are on disk): rank 0's tables stay, rank 1
    stops and leaves nothing, rank 2 never starts and an earlier run's table of it is gone;
    no combined table; exit 130."""
    folder = tmp_path / "t"
    folder.mkdir()
    for rank, steps in ((0, 4), (1, 1000), (2, 4)):
        write_decode_export(
            folder / f"report_rank{rank}.sqlite",
            steps=steps,
            kernels_per_step=200,
            graph_steps=0,
            pid=100 + rank,
            device=rank,
        )
    out = tmp_path / "o"
    (out / "report_rank2").mkdir(parents=True)
    (out / "report_rank2" / "steps.csv").write_text("stale\n")
    returncode, err = sigint_while_parking(
        [str(folder), "--out", str(out), "--jobs", "1"], out / "report_rank1"
    )
    assert returncode == 128 + signal.SIGINT, err
    assert "stopped by SIGINT" in err
    assert sorted(p.name for p in (out / "report_rank0").iterdir()) == [
        "kernel_launches.csv",
        "launch_summary.csv",
        "steps.csv",
    ]
    assert not (out / "report_rank1").exists()
    assert not (out / "report_rank2").exists()
    assert sorted(p.name for p in out.iterdir()) == ["report_rank0"]


def test_every_rank_bad_is_an_error_even_when_skipping(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    for name in ("a_0.sqlite", "b_1.sqlite"):
        (folder / name).write_bytes(b"not a database\n")
    with pytest.raises(
        TraceParseError, match="no rank could be analysed.*2 rank files"
    ):
        analyze_ranks(expand_inputs([folder], "nsys"), tmp_path / "o", skip_bad=True)


def test_rank_numbers_from_file_names_else_positions(tmp_path: Path) -> None:
    named = [Path("x/report.rank-3.sqlite"), Path("x/report.rank-10.sqlite")]
    assert [(f.rank, f.label) for f in rank_files(named)] == [
        (3, "report.rank-3"),
        (10, "report.rank-10"),
    ]
    clash = [Path("a/trace_1.json.gz"), Path("b/trace_1.json.gz"), Path("c/x.json")]
    assert [(f.rank, f.label) for f in rank_files(clash)] == [
        (0, "trace_1_rank0"),
        (1, "trace_1_rank1"),
        (2, "x"),
    ]


def kineto_rank(path: Path, launch_us: float) -> Path:
    """One ProfilerStep#0 [1000, 2000) us with one cudaLaunchKernel of ``launch_us``."""
    step = {"cat": "user_annotation", "name": "ProfilerStep#0", "ts": 1000, "dur": 1000}
    call = {
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "ts": 1100,
        "dur": launch_us,
    }
    gpu = {"cat": "kernel", "name": "gemm", "ts": 1150, "dur": 10}
    events = [
        {"ph": "X", "pid": 1, "tid": 1, **step, "args": {}},
        {"ph": "X", "pid": 1, "tid": 1, **call, "args": {"correlation": 1}},
        {"ph": "X", "pid": 0, "tid": 7, **gpu, "args": {"correlation": 1, "device": 0}},
    ]
    with gzip.open(path, "wt") as fh:
        json.dump({"traceEvents": events}, fh)
    return path


def test_kineto_ranks(tmp_path: Path) -> None:
    a = kineto_rank(tmp_path / "rank0.json.gz", 5)
    b = kineto_rank(tmp_path / "rank1.json.gz", 9)
    out = tmp_path / "o"
    main(["analyze", "kineto", str(a), str(b), "--out", str(out)])
    alignment = pd.read_csv(out / "step_alignment.csv")
    assert alignment["s_name"].tolist() == ["ProfilerStep#0"]
    assert alignment["launch_overhead_mean_ns"].tolist() == [(5000 + 9000) / 2]
    assert alignment["launch_overhead_max_rank"].tolist() == [1]
    assert (out / "rank0" / "steps.csv").is_file()


def test_a_failed_rerun_leaves_no_table_of_the_earlier_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A complete analysis, then the same folder again with a step pattern matching nothing:
    exit 2 naming the rank, and no table of the first run is left to pass for this one's."""
    folder = write_ranks(tmp_path / "t")
    out = tmp_path / "o"
    main(["analyze", "nsys", str(folder), "--out", str(out)])
    assert (out / "steps_ranks.csv").is_file() and (out / "report_rank2").is_dir()
    capsys.readouterr()
    argv = ["analyze", "nsys", str(folder), "--out", str(out), "--jobs", "1"]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--step-pattern", "no_such_range"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err
    assert "rank 0 (report_rank0.sqlite): step pattern 'no_such_range'" in err
    assert list(out.iterdir()) == []


def test_a_table_in_the_other_format_is_not_left_beside_the_new_one(
    tmp_path: Path,
) -> None:
    folder = write_ranks(tmp_path / "t")
    export, out = folder / "report_rank0.sqlite", tmp_path / "o"
    main(["analyze", "nsys", str(export), "--out", str(out), "--format", "csv"])
    main(["analyze", "nsys", str(export), "--out", str(out), "--format", "parquet"])
    assert sorted(p.name for p in out.iterdir()) == [
        "kernel_launches.parquet",
        "launch_summary.parquet",
        "steps.parquet",
    ]


def test_a_rank_with_corrupt_pages_is_one_line_or_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the right size, its pages overwritten: sqlite3 says "malformed", not a traceback
    folder = write_ranks(tmp_path / "t")
    bad = folder / "report_rank1.sqlite"
    data = bytearray(bad.read_bytes())
    data[100:] = b"\xa5" * (len(data) - 100)
    bad.write_bytes(bytes(data))
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "nsys", str(folder), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err
    assert f"{bad} is truncated or corrupt" in err
    main(["analyze", "nsys", str(folder), "--out", str(out), "--skip-bad-ranks"])
    assert f"skipped rank 1: {bad}" in capsys.readouterr().err


def test_a_bad_step_pattern_stops_before_any_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_ranks(tmp_path / "t")
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "nsys", str(folder), "--out", str(out), "--step-pattern", "("])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "'(' is not a regular expression" in err
    assert not out.exists()  # nothing written, no rank analysed
