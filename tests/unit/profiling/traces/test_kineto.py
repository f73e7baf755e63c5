"""KinetoTrace on real PyTorch profiler traces (values from the raw JSON or by hand), a
synthesized graph/driver/legacy-flow trace, bad inputs, and the ``trtbench analyze kineto`` CLI."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from tests.support.data import hta_trace
from tests.support.synth_kineto import graph_trace
from trtbench.cli import main
from trtbench.core.errors import TraceParseError
from trtbench.profiling.traces.kineto import KinetoTrace


def raw_events(name: str) -> list[dict]:
    with gzip.open(hta_trace(name), "rt") as fh:
        return json.load(fh)["traceEvents"]


def test_absolute_timestamps_match_the_raw_events() -> None:
    events = raw_events("simple_add")
    calls = {
        e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"
    }
    want = []
    for k in (e for e in events if e.get("cat") == "kernel"):
        c = calls[k["args"]["correlation"]]
        api_end, k_end = (c["ts"] + c["dur"]) * 1000, (k["ts"] + k["dur"]) * 1000
        queue = k["ts"] * 1000 - api_end if k["ts"] * 1000 >= api_end else None
        want.append(
            (
                c["ts"] * 1000,
                c["dur"] * 1000,
                queue,
                k["ts"] * 1000,
                max(api_end, k_end) - c["ts"] * 1000,
                c["name"],
            )
        )
    trace = KinetoTrace(hta_trace("simple_add")).get_kernel_launches()
    columns = [
        "api_start_ns",
        "api_dur_ns",
        "queue_dur_ns",
        "kernel_start_ns",
        "total_dur_ns",
        "s_api_name",
    ]
    got = [
        tuple(None if pd.isna(v) else v for v in r)
        for r in trace[columns].itertuples(False)
    ]
    assert got == sorted(want, key=lambda r: (r[0], r[3]))
    assert len(got) == 79


def test_memory_rows_agree_with_hta_launch_rows() -> None:
    # HTA 0.5.0 (PyPI holistictraceanalysis) get_cuda_kernel_launch_stats on simple_add:
    # (cpu_duration, gpu_duration, launch_delay) in us for correlations 14, 25 and 40
    launches = KinetoTrace(hta_trace("simple_add")).launches
    rows = launches.set_index("correlation_id").loc[[14, 25, 40]]
    assert ((rows["api_end_ns"] - rows["api_start_ns"]) // 1000).tolist() == [
        48,
        19,
        218,
    ]
    assert ((rows["end_ns"] - rows["start_ns"]) // 1000).tolist() == [11, 1, 110]
    delay = (rows["start_ns"] - rows["api_end_ns"]).clip(lower=0) // 1000
    assert delay.tolist() == [1, 4, 0]


def test_relative_timestamps_and_driver_launch() -> None:
    trace = KinetoTrace(hta_trace("triton_example"))
    assert trace.base_time_ns == 1727743122000000000
    row = trace.get_kernel_launches().iloc[0]
    # cuLaunchKernel ts 2413669097399.166 dur 47.768; kernel ts 2413669097444.592 dur 1.76
    assert row["s_api_name"] == "cuLaunchKernel" and row["api_kind"] == "kernel_launch"
    assert (row["api_start_ns"], row["api_dur_ns"]) == (2413669097399166, 47768)
    assert (row["kernel_start_ns"], row["kernel_dur_ns"]) == (2413669097444592, 1760)
    assert (
        pd.isna(row["queue_dur_ns"]) and row["launch_delay_ns"] == 0
    )  # starts before end
    assert (
        row["total_dur_ns"] == 47768
    )  # call end 2413669097446934 > kernel end ...446352


def test_graph_driver_and_flow_linked_launches(tmp_path: Path) -> None:
    trace = KinetoTrace(graph_trace(tmp_path / "t.json.gz"))
    launches = trace.get_kernel_launches()
    assert launches["s_api_name"].tolist() == [
        "cudaLaunchKernel",
        "cuLaunchKernel",
        "cudaLaunchKernel",
        "cudaGraphLaunch",
        "cudaGraphLaunch",
        "cudaGraphLaunch",
    ]
    first = launches.iloc[
        0
    ]  # call 1100.5 + 10.25 us -> ends 1110750 ns; kernel at 1120125
    assert first["queue_dur_ns"] == 1120125 - 1110750
    assert launches.iloc[2]["correlation_id"] == 99  # from the ac2g flow
    graph = launches.iloc[3:]
    assert graph["graph_node_id"].tolist() == [7, 8, 9] and set(
        graph["call_kernels"]
    ) == {3}
    steps = trace.get_steps()  # default pattern: ProfilerStep#N
    assert steps["launch_calls"].tolist() == [3, 1]
    assert steps["launch_overhead_ns"].tolist() == [10250 + 30000 + 5000, 50000]
    assert steps["graph_kernels"].tolist() == [0, 3]
    assert steps["gpu_busy_ns"].tolist() == [80000 + 40000 + 5000, 110000]
    assert steps["launch_delay_mean_ns"].tolist() == [(9375 + 0 + 5000) / 3, 10000]


def test_cpu_only_trace_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    path = hta_trace("cpu_only")
    with pytest.raises(TraceParseError, match="holds no CUDA activity"):
        KinetoTrace(path)
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "kineto", str(path)])
    assert exit_info.value.code == 2 and "no CUDA activity" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is empty"),
        (b"{not json", "truncated or not JSON"),
        (b'{"schemaVersion": 1}', "has no traceEvents list"),
        (
            gzip.compress(b'{"traceEvents": [1, 2, 3]}', mtime=0)[:20],
            "truncated or not JSON",
        ),
    ],
    ids=["empty", "not-json", "no-trace-events", "truncated-gzip"],
)
def test_bad_traces_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, expected: str
) -> None:
    path = tmp_path / "trace.json.gz"
    path.write_bytes(content)
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "kineto", str(path), "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and str(path) in err and "\n" not in err


def test_pattern_matching_nothing_lists_annotations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hta_trace("simple_add")
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "analyze",
                "kineto",
                str(path),
                "--out",
                str(tmp_path),
                "--step-pattern",
                "decode",
            ]
        )
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "matches no annotation name" in err
    assert "'[param|clear_cache]' (2)" in err


def test_cli_steps_from_an_annotation_pattern(tmp_path: Path) -> None:
    path = hta_trace("simple_add")
    pattern = r"\|measure\|forward\]$"
    main(
        [
            "analyze",
            "kineto",
            str(path),
            "--out",
            str(tmp_path),
            "--step-pattern",
            pattern,
        ]
    )
    steps = pd.read_csv(tmp_path / "steps.csv")
    events = raw_events("simple_add")
    measure = [e for e in events if str(e.get("name")).endswith("|measure|forward]")]
    assert len(steps) == len(measure) == 2
    for (_, step), window in zip(steps.iterrows(), measure, strict=True):
        start, end = window["ts"], window["ts"] + window["dur"]
        calls = [
            e
            for e in events
            if e.get("cat") == "cuda_runtime"
            and e["name"] == "cudaLaunchKernel"
            and start <= e["ts"] < end
        ]
        assert step["launch_calls"] == len(calls)
        assert step["launch_overhead_ns"] == sum(e["dur"] for e in calls) * 1000


# Epoch-microsecond timestamps with 3 decimals, written as JSON text (json.dump of a Python
# float would round them first). Doubles near 1.7e15 are 0.25 apart, so float parsing is off.
EPOCH_TRACE = """{"schemaVersion": 1, "traceEvents": [
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10,
  "ts": 1733212345678901.234, "dur": 5.125, "args": {"correlation": 1}},
 {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
  "ts": 1733212345678907.001, "dur": 12.999,
  "args": {"correlation": 1, "device": 0, "stream": 7}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10,
  "ts": 1733212345678950.1, "dur": 2, "args": {"correlation": 2}},
 {"ph": "X", "cat": "kernel", "name": "relu", "pid": 0, "tid": 7,
  "ts": 1733212345678953.37, "dur": 1.5e0,
  "args": {"correlation": 2, "device": 0, "stream": 7}}
]}"""


def test_epoch_float_timestamps_are_exact_ns(tmp_path: Path) -> None:
    path = tmp_path / "epoch.json"
    path.write_text(EPOCH_TRACE)
    rows = KinetoTrace(path).get_kernel_launches()
    # by hand from the literal text: digits with the decimal point moved 3 places
    assert rows["api_start_ns"].tolist() == [1733212345678901234, 1733212345678950100]
    assert rows["api_dur_ns"].tolist() == [5125, 2000]
    assert rows["kernel_start_ns"].tolist() == [
        1733212345678907001,
        1733212345678953370,
    ]
    assert rows["kernel_dur_ns"].tolist() == [12999, 1500]
    assert rows["queue_dur_ns"].tolist() == [
        1733212345678907001 - 1733212345678906359,  # api end = start + 5125
        1733212345678953370 - 1733212345678952100,
    ]
    # the binary-float path this replaces is off on these values
    assert round(1733212345678901.234 * 1000) != 1733212345678901234
    assert round(1733212345678907.001 * 1000) != 1733212345678907001


@pytest.mark.parametrize(
    ("text", "ns"),
    [("0.0005", 0), ("0.0015", 2), ("-1.5", -1500), ("2.25e3", 2250000), ("7E-3", 7)],
)
def test_decimal_text_edge_cases(tmp_path: Path, text: str, ns: int) -> None:
    # sub-ns digits round half to even; exponents go through Decimal
    base = 1000
    path = tmp_path / "t.json"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",'
        f' "pid": 1, "tid": 1, "ts": {base}, "dur": {text}, "args": {{"correlation": 1}}}}]}}'
    )
    launches = KinetoTrace(path).launches
    assert (launches["api_end_ns"] - launches["api_start_ns"]).tolist() == [ns]


def test_a_step_without_gpu_work_has_no_gpu_idle_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # triton_example: its one kernel belongs to another process than the only step, so the
    # step ran nothing on the GPU; idle time is undefined there, not 0
    path = hta_trace("triton_example")
    main(["analyze", "kineto", str(path), "--out", str(tmp_path)])
    steps = pd.read_csv(tmp_path / "steps.csv")
    assert len(steps) == 1 and steps.loc[0, "gpu_busy_ns"] == 0
    assert pd.isna(steps.loc[0, "gpu_idle_ns"])
    captured = capsys.readouterr()
    assert "GPU idle n/a" in captured.out
    # the trace's one kernel and its call are another process's: said, not silent
    assert "warning: the 1 step(s) hold no launch call" in captured.err
    assert "1 kernel(s) with their launch call" in captured.err


def test_steps_with_launches_give_no_empty_step_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["analyze", "kineto", str(hta_trace("simple_add")), "--out", str(tmp_path)])
    assert "warning" not in capsys.readouterr().err
