"""The streamed Kineto analysis (``analyze_kineto_stream``): tables byte-identical to the
whole-file reader's (``KinetoTrace``, checked against the raw events and by hand in
``test_kineto.py``) on the real traces and on synthetic ones cut into many chunks and buckets,
including text that defeats the chunk guess; the JSON stream's cuts and errors by hand."""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import astuple
from pathlib import Path

import pytest

from tests.support.data import hta_trace
from tests.support.synth_kineto import graph_trace, write_decode_trace
from trtbench.cli import main
from trtbench.core.errors import TraceParseError
from trtbench.profiling.traces.json_stream import (
    ArrayMemberStream,
    JsonStreamError,
    exact_cut,
)
from trtbench.profiling.traces.kineto import KinetoTrace
from trtbench.profiling.traces.kineto_stream import analyze_kineto_stream
from trtbench.profiling.traces.schemas import (
    KERNEL_LAUNCH_SCHEMA,
    LAUNCH_SUMMARY_SCHEMA,
    STEP_SCHEMA,
)
from trtbench.profiling.traces.table_io import write_trace_tables

TABLES = ("kernel_launches.csv", "launch_summary.csv", "steps.csv")


def eager_tables(path: Path, out: Path, pattern: str | None = None):
    """The tables as ``trtbench analyze kineto`` wrote them before streaming (the whole-file
    reader, then one write per table)."""
    analysis = KinetoTrace(path).analyze(pattern)
    write_trace_tables(
        [
            ("kernel_launches.csv", analysis.kernel_launches, KERNEL_LAUNCH_SCHEMA),
            ("launch_summary.csv", analysis.launch_summary, LAUNCH_SUMMARY_SCHEMA),
            ("steps.csv", analysis.steps, STEP_SCHEMA),
        ],
        out,
        "csv",
    )
    return analysis


def same_summary(a: object, b: object) -> bool:
    """Dataclasses equal field by field, NaN equal to NaN."""
    return all(
        x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
        for x, y in zip(astuple(a), astuple(b), strict=True)
    )


def assert_streamed_equal(
    path: Path, tmp: Path, pattern: str | None = None, **sizes: int
) -> None:
    eager = eager_tables(path, tmp / "eager", pattern)
    result = analyze_kineto_stream(path, tmp / "s", pattern, "csv", **sizes)
    for table in TABLES:
        assert (tmp / "s" / table).read_bytes() == (
            tmp / "eager" / table
        ).read_bytes(), table
    assert result.source == eager.source
    assert result.kernels == len(eager.kernel_launches)
    assert same_summary(result.summary, eager.summary)
    assert not list(tmp.glob("s/trtbench_*"))  # parked rows removed


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("simple_add", None),
        ("simple_add", r"\|measure\|forward\]$"),
        ("alexnet", None),
        ("triton_example", None),
    ],
)
@pytest.mark.parametrize("sizes", [{}, {"block_bytes": 700, "bucket_rows": 3}])
def test_real_traces_streamed_equal_the_whole_file_reader(
    tmp_path: Path, name: str, pattern: str | None, sizes: dict
) -> None:
    assert_streamed_equal(hta_trace(name), tmp_path, pattern, **sizes)


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize(
    "sizes",
    [
        {},
        {"block_bytes": 500, "bucket_rows": 7},
        {"block_bytes": 64},
        {"block_bytes": 3000, "workers": 2},  # decoded in two worker processes
    ],
)
def test_synthetic_decode_trace_streamed(
    tmp_path: Path, suffix: str, sizes: dict
) -> None:
    # 30 steps of 40 kernels: eager launches, then graph replays (steps 10-19), flows
    path = write_decode_trace(tmp_path / f"decode{suffix}", 1200, per_step=40)
    assert_streamed_equal(path, tmp_path, **sizes)


def test_graph_driver_and_flow_trace_streamed(tmp_path: Path) -> None:
    assert_streamed_equal(graph_trace(tmp_path / "g.json.gz"), tmp_path, block_bytes=90)


# Text the chunk guess and the fast decoder cannot take as it is: "}, {" inside a string and
# in a nested array, escaped quotes and backslashes, NaN, a lone surrogate, more than three
# decimals, an exponent, string ids, a ts that is a string, elements that are not objects,
# calls sharing a correlation id, calls linked to kernels only by a flow (ts written as 1510.0
# and 1510.000), launch calls without GPU work, a kernel without a call, a memcpy without a
# device, a bad grid; the base time after the events.
ODD_EVENTS = [
    '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 10, '
    '"tid": 10, "ts": 1000, "dur": 1000}',
    '{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 10, "tid": 10, '
    '"ts": 2000, "dur": 1000, "args": {"Input Dims": [[1, 2], []], "x": [{"a": 1}, {"b": 2}]}}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, '
    '"tid": 10, "ts": 1100.5, "dur": 10.25, "args": {"correlation": 1, "cbid": 211}}',
    '{"ph": "X", "cat": "kernel", "name": "void f<\\"q\\\\\\\\\\">(}, {)", "pid": 0, '
    '"tid": 7, "ts": 1120.125, "dur": 80, "args": {"correlation": 1, "device": 0, '
    '"stream": 7, "grid": [4, 1, 1], "block": [128, 1, 1]}}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": "10", '
    '"tid": "11", "ts": 1200.0015, "dur": 2, "args": {"correlation": 2}}',
    '{"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 1210, '
    '"dur": 3, "args": {"correlation": 2, "device": 0, "stream": 7, "grid": [1, 2], '
    '"block": null}}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 10, '
    '"tid": 10, "ts": 1300, "dur": 7, "args": {"correlation": 3}}',
    '{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", '
    '"pid": 0, "tid": 8, "ts": 1310, "dur": 20, "args": {"correlation": 3}}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, '
    '"tid": 10, "ts": 1400, "dur": 4, "args": {"correlation": 4}}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, '
    '"tid": 10, "ts": 1450, "dur": 6, "args": {"correlation": 4}}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, '
    '"tid": 10, "ts": 1500, "dur": 5}',
    '{"ph": "s", "cat": "ac2g", "id": 99, "pid": 10, "tid": 10, "ts": 1500}',
    '{"ph": "X", "cat": "kernel", "name": "legacy", "pid": 0, "tid": 7, "ts": 1510.0, '
    '"dur": 5, "args": {"device": 0, "stream": 7}}',
    '{"ph": "f", "cat": "ac2g", "id": 99, "pid": 0, "tid": 7, "ts": 1510.000, "bp": "e"}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, '
    '"tid": 10, "ts": 1600, "dur": 3, "args": {}}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, '
    '"tid": 12, "ts": 1650, "dur": 8, "args": null}',
    '{"ph": "X", "cat": "python_function", "name": "x\\ud800", "pid": 10, "tid": 10, '
    '"ts": 1660, "dur": 1, "args": {"v": NaN}}',
    '{"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 10, "tid": 10, '
    '"ts": 2100, "dur": 30, "args": {"correlation": 5}}',
    '{"ph": "X", "cat": "kernel", "name": "triton_\u00e9\u4e2d", "pid": 0, "tid": 7, '
    '"ts": 2120, "dur": 9, "args": {"correlation": 5, "device": 0, "stream": 7}}',
    '{"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 2130, '
    '"dur": 1, "args": {"correlation": 77, "device": 0, "stream": 7}}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 10, '
    '"tid": 10, "ts": 2500, "dur": 50, "args": {"correlation": 6}}',
    '{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 2560, '
    '"dur": 40, "args": {"correlation": 6, "device": 0, "stream": 7, "graph node id": 7}}',
    '{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 2600, '
    '"dur": 10, "args": {"correlation": 6, "device": 0, "stream": 7, "graph node id": 8}}',
    '{"ph": "X", "cat": "kernel", "name": "bad_ts", "pid": 0, "tid": 7, "ts": "12", '
    '"dur": 1, "args": {"correlation": 6}}',
    '{"ph": "i", "cat": "cuda_runtime", "name": "marker", "pid": 10, "tid": 10, "ts": 2610}',
    "5",
    '"text"',
    "null",
    "[1, {}]",
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 10, '
    '"tid": 10, "ts": 2.7e3, "dur": 1E1, "args": {"correlation": 8}}',
]


def odd_trace(path: Path, events: list[str], separator: str = ", ") -> Path:
    text = (
        '{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU}, {x"}], '
        '"traceEvents": [' + separator.join(events) + '], "traceName": "t", '
        '"baseTimeNanoseconds": 1700000000000000000}'
    )
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(text, encoding="utf-8")
    return path


STEP_NAMES = ("ProfilerStep#", "user_annotation")


@pytest.mark.parametrize("variant", ["steps", "graph_launches", "whole_trace"])
@pytest.mark.parametrize("block_bytes", [48, 150, 333, 1 << 20])
def test_odd_text_streamed_equal_the_whole_file_reader(
    tmp_path: Path, variant: str, block_bytes: int
) -> None:
    events = ODD_EVENTS
    if (
        variant != "steps"
    ):  # no step ranges: windows from graph launches or the whole trace
        events = [e for e in events if "ProfilerStep" not in e]
    if variant == "whole_trace":
        events = [e for e in events if "cudaGraphLaunch" not in e]
    path = odd_trace(tmp_path / "odd.json", events, ",\n  ")
    assert_streamed_equal(path, tmp_path, block_bytes=block_bytes, bucket_rows=2)


def test_a_refused_cut_in_a_worker_reads_the_trace_again(tmp_path: Path) -> None:
    # the guess cuts inside "void f<...>(}, {)": the worker refuses, one process reads
    path = odd_trace(tmp_path / "odd.json.gz", ODD_EVENTS)
    assert_streamed_equal(path, tmp_path, block_bytes=120, workers=2)


def test_odd_trace_by_hand(tmp_path: Path) -> None:
    # what the comparison above relies on, seen in the streamed tables themselves
    path = odd_trace(tmp_path / "odd.json.gz", ODD_EVENTS)
    result = analyze_kineto_stream(path, tmp_path, fmt="csv", block_bytes=100)
    text = (tmp_path / "kernel_launches.csv").read_text(encoding="utf-8")
    assert '"void f<""q\\\\"">(}, {)"' in text  # the name with its quote and backslash
    assert "triton_\u00e9\u4e2d" in text
    assert result.kernels == 6  # orphan (no call) and bad_ts (ts not a number) left out
    rows = text.splitlines()
    legacy = next(r for r in rows if r.endswith(",legacy"))
    assert legacy.startswith(
        "1500000,5000,1505000,5000,1510000,"
    )  # call ts 1500 via flow
    k2 = next(r for r in rows if r.endswith(",k2"))
    assert k2.startswith("1200002,2000,")  # 1200.0015 us -> 1200001.5 ns, half to even
    steps = (tmp_path / "steps.csv").read_text().splitlines()
    assert len(steps) == 3  # ProfilerStep#0 (annotation) and #1 (legacy cpu_op)


def test_exact_cut_by_hand() -> None:
    data = b' {"a": "x,]\\"}, {"}, [1, {"b": "\\\\"}], 3 ] , "k": 1}'
    # the string "x,]\"}, {" holds a comma, a bracket and an escaped quote; "\\" ends in a
    # backslash that is itself escaped, so the quote after it closes the string
    assert exact_cut(data) == ("end", data.index(b"]", data.index(b"3")))
    inside = data[: data.index(b"3")]
    assert exact_cut(inside) == ("split", inside.rindex(b","))
    assert exact_cut(b'{"a": [1, 2') is None


def test_member_stream_keeps_other_members_and_refuses_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"a": 1.50, "traceEvents": [{"x": 1}, {"y": 2}], "b": [true]}')
    stream = ArrayMemberStream(path, "traceEvents", block_bytes=4)
    elements = [e for c in stream for e in json.loads(bytes(c.text))]
    assert elements == [{"x": 1}, {"y": 2}]
    assert stream.found and stream.members == {"a": 1.5, "b": [True]}
    assert (
        str(stream.members["a"]) == "1.50"
    )  # a Decimal, as json.load(parse_float=...)
    for text, why in [
        ('{"traceEvents": [{"x": 1}, {"y"', "inside the array"),
        ('{"traceEvents": []} x', "extra data"),
        ('{"traceEvents": [], "traceEvents": []}', "occurs twice"),
        ('{"a": 1, 2: 3}', "not a string"),
    ]:
        path.write_text(text)
        with pytest.raises(JsonStreamError, match=why):
            list(ArrayMemberStream(path, "traceEvents", block_bytes=8))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"traceEvents": [{"ph": "X"}, {"ph": ', "truncated or not JSON"),
        (b'{"traceEvents": [{"name": "\xff"}]}', "truncated or not JSON"),
        (b'{"traceEvents": []} trailing', "truncated or not JSON"),
        (b'{"traceEvents": {"ph": "X"}}', "has no traceEvents list"),
        (b'{"traceEvents": []}', "holds no CUDA activity"),
    ],
    ids=["truncated-array", "not-utf8", "extra-data", "not-a-list", "empty"],
)
def test_bad_traces_fail_as_the_whole_file_reader_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, expected: str
) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(content)
    with pytest.raises(TraceParseError, match=expected):
        KinetoTrace(path)
    with pytest.raises(SystemExit) as exit_info:
        main(["analyze", "kineto", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and expected in err and "\n" not in err
    assert not list((tmp_path / "out").glob("*"))  # no table, no parked rows
