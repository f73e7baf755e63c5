"""Capacity per tier from /metrics readings written in Triton's text format by hand."""

from __future__ import annotations

import math

import pandas as pd

from trtbench.profiling.memory.kv_pressure import (
    kv_pressure,
    largest_unqueued_concurrency,
)
from trtbench.profiling.memory.server_metrics import metrics_frame, parse_metrics_text

LABELS = 'model="reference",version="1"'


def gauges(waiting: int, used: int) -> str:
    return f"""# HELP nv_trt_llm_request_metrics x
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{{{LABELS},request_type="active"}} {waiting + 2}
nv_trt_llm_request_metrics{{{LABELS},request_type="waiting"}} {waiting}
nv_trt_llm_request_metrics{{{LABELS},request_type="max"}} 8
# HELP nv_trt_llm_kv_cache_block_metrics x
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{{{LABELS},kv_cache_block_type="max"}} 40
nv_trt_llm_kv_cache_block_metrics{{{LABELS},kv_cache_block_type="used"}} {used}
"""


def reading(waiting, used, steps, spec, preempt, waits) -> str:
    counters = "\n".join(
        f'trtbench_reference_counters{{{LABELS},counter="{name}"}} {value}'
        for name, value in (
            ("block_steps", steps),
            ("speculative_block_steps", spec),
            ("preemptions", preempt),
            ("kv_waits", waits),
        )
    )
    return (
        gauges(waiting, used)
        + "# HELP trtbench_reference_counters x\n"
        + "# TYPE trtbench_reference_counters counter\n"
        + counters
        + "\n"
    )


def frame(variant, readings, t0=0, text=reading) -> pd.DataFrame:
    """One reading per item at t_ns = t0, t0 + 1, … (servers run one after another)."""
    samples = []
    for t, (phase, values) in enumerate(readings, start=t0):
        samples += parse_metrics_text(
            text(*values), t_ns=t, variant=variant, phase=phase
        )
    return metrics_frame(samples)


def test_waits_share_and_the_largest_calm_tier():
    base = frame(
        "baseline",
        [
            ("warmup", (0, 0, 0, 0, 0, 0)),
            ("tier:c1", (0, 5, 0, 0, 0, 0)),
            ("tier:c1", (1, 5, 50, 0, 0, 0)),
            ("tier:c4", (0, 20, 50, 0, 0, 0)),
            ("tier:c4", (0, 30, 250, 0, 0, 0)),
            ("tier:c8", (3, 40, 250, 0, 0, 0)),
            ("tier:c8", (1, 40, 650, 0, 2, 3)),
        ],
    )
    medusa = frame(
        "medusa",
        [
            ("tier:c1", (0, 6, 0, 0, 0, 0)),
            ("tier:c1", (0, 6, 60, 10, 0, 0)),
            ("tier:c4", (0, 40, 60, 10, 0, 0)),
            ("tier:c4", (0, 40, 360, 70, 1, 0)),
        ],
        t0=100,
    )
    table = kv_pressure(pd.concat([base, medusa], ignore_index=True))
    rows = table.set_index(["variant", "phase"])
    assert list(table["phase"]) == [
        "tier:c1",
        "tier:c4",
        "tier:c8",
        "tier:c1",
        "tier:c4",
    ]
    assert list(table["concurrency"]) == [1, 4, 8, 1, 4]
    assert rows.loc[("baseline", "tier:c8"), "max_waiting_requests"] == 3
    assert rows.loc[("baseline", "tier:c8"), "max_active_requests"] == 5
    assert rows.loc[("baseline", "tier:c4"), "max_kv_used_blocks"] == 30
    assert rows.loc[("baseline", "tier:c4"), "kv_max_blocks"] == 40
    # counter deltas: the next phase's first reading minus this phase's first reading
    assert rows.loc[("baseline", "tier:c4"), "speculative_block_share"] == 0
    # the last phase: its own last reading
    assert rows.loc[("baseline", "tier:c8"), ["preemptions", "kv_waits"]].tolist() == [
        2,
        3,
    ]
    assert rows.loc[("medusa", "tier:c1"), "speculative_block_share"] == 10 / 60
    assert rows.loc[("medusa", "tier:c4"), "speculative_block_share"] == 60 / 300
    assert rows.loc[("medusa", "tier:c4"), "preemptions"] == 1
    # baseline c1 had a transient waiting reading but no KV wait: still calm
    calm = largest_unqueued_concurrency(table)
    assert calm["baseline"] == 4 and calm["medusa"] == 1
    none = largest_unqueued_concurrency(table[table["phase"] != "tier:c1"])
    assert math.isnan(none["medusa"])


def test_without_reference_counters_the_waiting_gauge_decides():
    trt = frame(
        "trt",
        [
            ("tier:c2", (0, 9)),
            ("tier:c4", (0, 20)),
            ("tier:c8", (2, 40)),
            ("tier:c16", (0, 40)),
        ],
        text=gauges,
    )
    table = kv_pressure(trt)
    assert table["speculative_block_share"].isna().all()
    # c8 waited; c16 is above the 8 batch slots: queued whatever the snapshot says
    assert largest_unqueued_concurrency(table)["trt"] == 4
