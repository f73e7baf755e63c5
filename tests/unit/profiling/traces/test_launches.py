"""Launch analyzers on hand-made launch frames: every expected number is worked out in comments."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from trtbench.core.errors import ConfigError
from trtbench.profiling.traces.launch_steps import (
    step_windows_from_graph_launches,
    step_windows_from_ranges,
    step_windows_whole_trace,
)
from trtbench.profiling.traces.launches import (
    classify_api,
    kernel_launch_summary,
    kernel_launch_trace,
    make_launch_frame,
    make_range_frame,
    resolve_step_windows,
    step_table,
    strip_api_version,
    summarize_steps,
)

NA = None


def frame(*rows: dict) -> pd.DataFrame:
    """Launch frame from rows given as dicts of the fields that matter; the rest default."""
    defaults = {
        "pid": 1,
        "tid": 1,
        "correlation_id": NA,
        "s_api_name": "cudaLaunchKernel",
        "api_start_ns": NA,
        "api_end_ns": NA,
        "gpu_kind": "kernel",
        "start_ns": NA,
        "end_ns": NA,
        "device_id": 0,
        "stream_id": 7,
        "graph_node_id": NA,
        "s_name": "k",
        "grid_x": 1,
        "grid_y": 1,
        "grid_z": 1,
        "block_x": 128,
        "block_y": 1,
        "block_z": 1,
    }
    full = [{**defaults, **r} for r in rows]
    return make_launch_frame({c: [r[c] for r in full] for c in defaults})


def call(corr: int, api: str, api_start: int, api_end: int, **gpu: object) -> dict:
    return {
        "correlation_id": corr,
        "s_api_name": api,
        "api_start_ns": api_start,
        "api_end_ns": api_end,
        **gpu,
    }


def ranges(*rows: tuple[str, int, int]) -> pd.DataFrame:
    return make_range_frame(
        {
            "s_name": [r[0] for r in rows],
            "pid": [1] * len(rows),
            "tid": [1] * len(rows),
            "start_ns": [r[1] for r in rows],
            "end_ns": [r[2] for r in rows],
        }
    )


@pytest.mark.parametrize(
    ("raw", "stripped", "kind"),
    [
        ("cudaLaunchKernel_v7000", "cudaLaunchKernel", "kernel_launch"),
        ("cudaLaunchKernel_ptsz_v7000", "cudaLaunchKernel_ptsz", "kernel_launch"),
        ("cuLaunchKernelEx", "cuLaunchKernelEx", "kernel_launch"),
        ("cudaGraphLaunch_v10000", "cudaGraphLaunch", "graph_launch"),
        ("cuGraphLaunch", "cuGraphLaunch", "graph_launch"),
        (
            "cuGetProcAddress_v2",
            "cuGetProcAddress_v2",
            "other",
        ),  # _v2 is part of the name
        ("cudaGetDeviceProperties_v2_v12000", "cudaGetDeviceProperties_v2", "other"),
        ("cudaLaunchHostFunc_v10000", "cudaLaunchHostFunc", "other"),  # no kernel
    ],
)
def test_api_names_are_stripped_and_classified(
    raw: str, stripped: str, kind: str
) -> None:
    assert strip_api_version(raw) == stripped
    assert classify_api(stripped) == kind


def trace_frame() -> pd.DataFrame:
    return frame(
        call(1, "cudaLaunchKernel", 100, 110, start_ns=105, end_ns=130, s_name="a"),
        call(2, "cuLaunchKernel", 200, 204, start_ns=210, end_ns=215, s_name="a"),
        call(
            3, "cudaGraphLaunch", 300, 320, start_ns=330, end_ns=340, graph_node_id=11
        ),
        call(
            3, "cudaGraphLaunch", 300, 320, start_ns=340, end_ns=360, graph_node_id=12
        ),
        call(
            3, "cudaGraphLaunch", 300, 320, start_ns=325, end_ns=328, graph_node_id=10
        ),
        call(
            4, "cudaMemsetAsync", 400, 405, gpu_kind="memset", start_ns=410, end_ns=420
        ),
        {"start_ns": 500, "end_ns": 510},  # kernel whose call is unknown
    )


def test_kernel_trace_follows_cuda_kern_exec_trace() -> None:
    trace = kernel_launch_trace(trace_frame())
    # memset and the kernel without a call are left out: 5 rows, by (api start, kernel start)
    assert trace["kernel_start_ns"].tolist() == [105, 210, 325, 330, 340]
    first = trace.iloc[0]  # kernel started at 105, before the call returned at 110
    assert pd.isna(first["queue_dur_ns"]) and pd.isna(first["queue_start_ns"])
    assert first["total_dur_ns"] == 130 - 100  # max(110, 130) - 100
    assert first["launch_delay_ns"] == 0  # max(0, 105 - 110)
    second = trace.iloc[1]
    assert (second["queue_start_ns"], second["queue_dur_ns"]) == (204, 6)  # 210 - 204
    assert second["total_dur_ns"] == 15  # max(204, 215) - 200
    assert second["api_dur_ns"] == 4 and second["s_api_name"] == "cuLaunchKernel"


def test_graph_kernels_are_attributed_to_their_graph_launch() -> None:
    graph = kernel_launch_trace(trace_frame()).iloc[2:]
    assert set(graph["s_api_name"]) == {"cudaGraphLaunch"}
    assert graph["call_kernels"].tolist() == [3, 3, 3]
    assert graph["call_index"].tolist() == [0, 1, 2]  # by start: 325, 330, 340
    assert graph["graph_node_id"].tolist() == [10, 11, 12]
    assert graph["queue_dur_ns"].tolist() == [5, 10, 20]  # start - 320
    assert graph["total_dur_ns"].tolist() == [28, 40, 60]  # max(320, end) - 300


def test_summary_uses_nsys_statistics() -> None:
    rows = [
        call(1, "cudaLaunchKernel", 0, 10, start_ns=20, end_ns=25, s_name="a"),
        call(2, "cudaLaunchKernel", 100, 120, start_ns=110, end_ns=130, s_name="a"),
        call(3, "cudaLaunchKernel", 200, 260, start_ns=264, end_ns=270, s_name="a"),
        call(4, "cudaLaunchKernel", 300, 301, start_ns=305, end_ns=306, s_name="b"),
    ]
    summary = kernel_launch_summary(kernel_launch_trace(frame(*rows))).set_index(
        "s_kernel_name"
    )
    a = summary.loc["a"]
    assert (a["count"], a["queue_count"]) == (
        3,
        2,
    )  # call 2's kernel starts before its end
    assert a["api_mean_ns"] == 30 and a["api_median_ns"] == 20  # durations 10, 20, 60
    # sample std: deviations -20, -10, 30 -> sqrt((400 + 100 + 900) / 2)
    assert a["api_std_ns"] == pytest.approx(math.sqrt(700))
    assert (a["queue_min_ns"], a["queue_max_ns"], a["queue_mean_ns"]) == (4, 10, 7)
    assert a["total_max_ns"] == 70  # max(260, 270) - 200
    b = summary.loc["b"]
    assert b["count"] == 1 and b["api_std_ns"] == 0  # one value: nsys prints 0
    assert summary.index.tolist() == ["a", "b"]  # by total mean: a (25+30+70)/3 > b 6


def step_frame() -> pd.DataFrame:
    return frame(
        # step 0 [1000, 2000): two eager launches on two streams + a memset
        call(1, "cudaLaunchKernel", 1100, 1110, start_ns=1120, end_ns=1200),
        call(
            2, "cudaLaunchKernel", 1150, 1160, start_ns=1150, end_ns=1250, stream_id=8
        ),
        call(
            3,
            "cudaMemsetAsync",
            1300,
            1305,
            gpu_kind="memset",
            start_ns=1400,
            end_ns=1450,
        ),
        # step 1 [2000, 3000): a graph replay of 3 nodes, a graph launch without GPU rows
        call(
            5,
            "cudaGraphLaunch",
            2100,
            2150,
            start_ns=2160,
            end_ns=2200,
            graph_node_id=1,
        ),
        call(
            5,
            "cudaGraphLaunch",
            2100,
            2150,
            start_ns=2200,
            end_ns=2260,
            graph_node_id=2,
        ),
        call(
            5,
            "cudaGraphLaunch",
            2100,
            2150,
            start_ns=2300,
            end_ns=2310,
            graph_node_id=3,
        ),
        call(6, "cudaGraphLaunch", 2400, 2420, gpu_kind=NA),
        # another thread and an unknown call: in no step
        {
            **call(7, "cudaLaunchKernel", 2500, 2510, start_ns=2520, end_ns=2530),
            "tid": 2,
        },
        {"start_ns": 2600, "end_ns": 2700},
    )


STEP_RANGES = (
    ("noise", 0, 5000),
    ("decode_step#0", 1000, 2000),
    ("decode_step#1", 2000, 3000),
)


def test_steps_from_ranges_count_calls_kernels_and_gpu_time() -> None:
    # the owner thread's calls only (the rule before issue 33; expected values unchanged)
    launches = step_frame()
    windows = step_windows_from_ranges(ranges(*STEP_RANGES), r"^decode_step#\d+$")
    steps = step_table(launches, windows, threads="owner").set_index("s_name")
    s0, s1 = steps.loc["decode_step#0"], steps.loc["decode_step#1"]
    assert (s0["launch_calls"], s0["graph_launches"], s0["kernels"]) == (2, 0, 2)
    assert s0["launch_overhead_ns"] == 10 + 10  # the memset call is not a launch call
    assert (
        s0["launch_delay_mean_ns"] == 5 and s0["launch_delay_max_ns"] == 10
    )  # 10 and 0
    assert (s0["gpu_start_ns"], s0["gpu_end_ns"]) == (1120, 1450)
    assert s0["gpu_busy_ns"] == (1250 - 1120) + (1450 - 1400)  # overlap counted once
    assert s0["gpu_idle_ns"] == (1450 - 1120) - 180
    assert s0["wall_ns"] == 1000
    assert (s1["launch_calls"], s1["graph_launches"]) == (2, 2)
    assert (s1["kernels"], s1["graph_kernels"]) == (3, 3)
    assert s1["launch_overhead_ns"] == 50 + 20  # each graph launch once
    assert s1["launch_delay_calls"] == 1 and s1["launch_delay_mean_ns"] == 2160 - 2150
    assert s1["gpu_busy_ns"] == 40 + 60 + 10 and s1["gpu_idle_ns"] == 150 - 110


def test_steps_count_the_calls_of_every_thread_of_the_process() -> None:
    # thread 2's call 7 (2500..2510, kernel 2520..2530) starts inside decode_step#1 [2000, 3000)
    launches = step_frame()
    windows = step_windows_from_ranges(ranges(*STEP_RANGES), r"^decode_step#\d+$")
    steps = step_table(launches, windows).set_index("s_name")
    s0, s1 = steps.loc["decode_step#0"], steps.loc["decode_step#1"]
    assert (s0["launch_calls"], s0["owner_launch_calls"], s0["launch_threads"]) == (
        2,
        2,
        1,
    )
    assert (s1["launch_calls"], s1["graph_launches"]) == (3, 2)  # calls 5, 6 and 7
    assert (s1["owner_launch_calls"], s1["owner_graph_launches"]) == (2, 2)
    assert (s1["launch_threads"], s1["owner_tid"]) == (2, 1)
    assert s1["launch_overhead_ns"] == 50 + 20 + 10
    assert (
        s1["owner_launch_overhead_ns"] == 50 + 20
    )  # the owner-thread figure of before
    assert (s1["kernels"], s1["owner_kernels"], s1["graph_kernels"]) == (4, 3, 3)
    # delays: call 5 2160 - 2150, call 7 2520 - 2510
    assert s1["launch_delay_calls"] == 2 and s1["launch_delay_mean_ns"] == 10
    assert (s1["gpu_start_ns"], s1["gpu_end_ns"]) == (2160, 2530)
    assert s1["gpu_busy_ns"] == 40 + 60 + 10 + 10
    assert s1["gpu_idle_ns"] == (2530 - 2160) - 120
    owner = step_table(launches, windows, threads="owner").set_index("s_name")
    for column in ("launch_calls", "graph_launches", "launch_overhead_ns", "kernels"):
        assert steps[f"owner_{column}"].tolist() == owner[column].tolist()


def test_a_call_in_nested_windows_counts_in_each() -> None:
    windows = step_windows_from_ranges(ranges(*STEP_RANGES), "noise|decode")
    steps = step_table(step_frame(), windows, threads="owner").set_index("s_name")
    assert steps.loc["noise", "launch_calls"] == 4  # thread 1's launch calls 1, 2, 5, 6
    assert steps["launch_calls"].tolist() == [4, 2, 2]
    # every thread: call 7 (thread 2, at 2500) is in noise and decode_step#1 as well
    steps = step_table(step_frame(), windows).set_index("s_name")
    assert steps["launch_calls"].tolist() == [5, 2, 3]
    assert steps["owner_launch_calls"].tolist() == [4, 2, 2]


def test_graph_launch_boundaries() -> None:
    windows = step_windows_from_graph_launches(step_frame())
    # graph launch at 2100 until the next one at 2400; the last ends at thread 1's last call end
    assert list(zip(windows["start_ns"], windows["end_ns"], strict=True)) == [
        (2100, 2400),
        (2400, 2420),
    ]
    steps = step_table(step_frame(), windows)
    assert steps["launch_overhead_ns"].tolist() == [50, 20]
    assert steps["kernels"].tolist() == [3, 0]
    assert steps["gpu_busy_ns"].tolist() == [110, 0]
    # step 2 ran nothing on the GPU: no idle time to report (NA, not 0)
    assert steps["gpu_idle_ns"].iloc[0] == 40 and pd.isna(steps["gpu_idle_ns"].iloc[1])


def test_whole_trace_window_per_thread() -> None:
    eager = step_frame().iloc[[0, 1, 7]]
    windows = step_windows_whole_trace(eager)
    assert list(
        zip(windows["tid"], windows["start_ns"], windows["end_ns"], strict=True)
    ) == [
        (1, 1100, 1160),
        (2, 2500, 2510),
    ]


def test_resolution_order_and_summary() -> None:
    launches = step_frame()
    _, source = resolve_step_windows(launches, ranges(*STEP_RANGES), None, what="range")
    assert "decode_step" in source  # the default pattern matches decode_step#N
    _, source = resolve_step_windows(
        launches, ranges(("noise", 0, 9)), None, what="range"
    )
    assert source == "graph-launch boundaries"
    windows, source = resolve_step_windows(
        launches, ranges(*STEP_RANGES), None, what="range"
    )
    summary = summarize_steps(step_table(launches, windows, threads="owner"), source)
    assert summary.steps == 2 and summary.graph_launches_total == 2
    assert summary.launch_overhead_mean_ns == (20 + 70) / 2
    # delay mean over calls with GPU work: (10 + 0 + 10) / 3
    assert summary.launch_delay_mean_ns == pytest.approx(20 / 3)
    # every thread: thread 2's call 7 (10 ns, delay 10) joins step 1
    summary = summarize_steps(step_table(launches, windows), source)
    assert summary.launch_overhead_mean_ns == (20 + 80) / 2
    assert summary.launch_delay_mean_ns == pytest.approx((10 + 0 + 10 + 10) / 4)


def test_unknown_thread_rule_is_refused() -> None:
    windows = step_windows_from_ranges(ranges(*STEP_RANGES), "decode")
    with pytest.raises(ValueError, match="threads 'thread'"):
        step_table(step_frame(), windows, threads="thread")


def test_pattern_matching_nothing_lists_the_names() -> None:
    with pytest.raises(ConfigError) as err:
        step_windows_from_ranges(ranges(*STEP_RANGES), "prefill", what="NVTX range")
    message = str(err.value)
    assert "matches no NVTX range name" in message and "'noise' (1)" in message
    # decode_step#0 and #1 listed as one name, digits as N
    assert "'decode_step#N' (2)" in message and "--step-pattern" in message
    assert "decode_step#1" not in message
    assert "\n" not in message


def test_invalid_pattern_names_the_option() -> None:
    with pytest.raises(
        ConfigError, match="not a valid regular expression.*--step-pattern"
    ):
        step_windows_from_ranges(ranges(*STEP_RANGES), "decode(")
