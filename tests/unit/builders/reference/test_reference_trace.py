"""Kineto traces of the reference engine: one ``decode_step#N`` range per batched decode step.

``trtbench analyze kineto`` measures launch overhead, so it refuses a trace without CUDA
activity (``KinetoTrace``: "holds no CUDA activity"); a CPU engine's trace has none. What the
analyzer would use — its default step pattern applied to the trace's annotation ranges — is
checked on the JSON instead, with the analyzer's own window function. (On a GPU machine
``tests/gpu/test_reference_cuda_graphs.py`` runs the engine on CUDA.)
"""

from __future__ import annotations

import json

import pytest

from tests.support.random_llama import make_tokenizer, random_llama
from trtbench.builders.reference.loading import make_engine
from trtbench.builders.reference.tracing import record_kineto_trace
from trtbench.core.errors import TraceParseError
from trtbench.profiling.traces.kineto import analyze_kineto_trace
from trtbench.profiling.traces.launch_steps import (
    DEFAULT_STEP_PATTERN,
    step_windows_from_ranges,
)
from trtbench.profiling.traces.launches import make_range_frame

PROMPTS = [[5, 6, 7], [9, 10]]


@pytest.fixture(scope="module")
def traced(tmp_path_factory, one_torch_thread):
    """A CPU baseline engine with 2 slots, both prompts traced together for 5 tokens."""
    engine = make_engine(
        "baseline",
        random_llama(seed=0),
        make_tokenizer(64),
        max_seq_len=32,
        max_input_len=8,
        max_batch_size=2,
    )
    path = tmp_path_factory.mktemp("trace") / "reference.json"
    outputs = record_kineto_trace(engine, PROMPTS, path, max_tokens=5)
    return engine, path, outputs


def annotations(path) -> list[dict]:
    events = json.loads(path.read_text())["traceEvents"]
    return [e for e in events if e.get("cat") == "user_annotation"]


def test_one_range_per_prefill_and_decode_step(traced):
    """Both prompts are admitted in the first iteration (2 prefills); each gets its first
    token from the prefill and 4 more from 4 decode steps that run both rows at once."""
    engine, path, outputs = traced
    names = sorted(e["name"] for e in annotations(path))
    assert names == [
        "decode_step#0",
        "decode_step#1",
        "decode_step#2",
        "decode_step#3",
        "prefill",
        "prefill",
    ]
    assert outputs == [engine.generate_ids(p, 5, end_id=-1) for p in PROMPTS]


def test_analyzer_default_pattern_finds_each_decode_step_in_order(traced):
    _, path, _ = traced
    found = annotations(path)
    ranges = make_range_frame(
        {
            "s_name": [e["name"] for e in found],
            "pid": [e["pid"] for e in found],
            "tid": [e["tid"] for e in found],
            "start_ns": [round(e["ts"] * 1000) for e in found],
            "end_ns": [round((e["ts"] + e["dur"]) * 1000) for e in found],
        }
    )
    windows = step_windows_from_ranges(ranges, DEFAULT_STEP_PATTERN)
    assert list(windows["s_name"]) == [f"decode_step#{i}" for i in range(4)]
    starts, ends = list(windows["start_ns"]), list(windows["end_ns"])
    assert all(
        ends[i] <= starts[i + 1] for i in range(3)
    )  # steps run one after another


def test_analyzer_refuses_a_cpu_only_trace(traced):
    _, path, _ = traced
    with pytest.raises(TraceParseError, match="holds no CUDA activity"):
        analyze_kineto_trace(path)
