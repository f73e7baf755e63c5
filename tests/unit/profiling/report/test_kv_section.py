"""The report's KV section from /metrics readings written in Triton's text format by hand.

Readings per phase (waiting, blocks used, block_steps, speculative_block_steps, preemptions,
kv_waits), gauges ``max`` 8 requests and 40 blocks; counter deltas per tier are the next
tier's first reading minus this tier's first (the last tier: its last minus its first):

    baseline  c1 (0,5,0,0,0,0) (0,5,40,0,0,0)        steps 40,  share 0
              c4 (0,20,40,0,0,0) (0,20,200,0,0,0)    steps 160, share 0
              c8 (2,40,200,0,0,0) (3,40,600,0,1,2)   1 preemption, 2 KV waits: queued
    draft-k4  c1 (0,6,0,0,0,0) (0,6,50,10,0,0)       10 / 50   = 20 %
              c4 (0,30,50,10,0,0) (0,30,250,40,0,0)  30 / 200  = 15 %

so baseline is served without queueing up to c4 (c8 waited), draft-k4 up to c4 (its top).
"""

from __future__ import annotations

import pandas as pd

from tests.support.run_factory import (
    summary_row,
    write_breakdown,
    write_build,
    write_summary,
)
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.report import write_report
from trtbench.profiling.memory.kv_pressure import kv_pressure
from trtbench.profiling.memory.server_metrics import (
    metrics_frame,
    parse_metrics_text,
    write_server_metrics_csv,
)
from trtbench.profiling.report.kv_section import HEADING, kv_lines, kv_summary

LABELS = 'model="reference",version="1"'
COUNTERS = ("block_steps", "speculative_block_steps", "preemptions", "kv_waits")
BASELINE = [
    ("tier:c1", (0, 5, 0, 0, 0, 0)),
    ("tier:c1", (0, 5, 40, 0, 0, 0)),
    ("tier:c4", (0, 20, 40, 0, 0, 0)),
    ("tier:c4", (0, 20, 200, 0, 0, 0)),
    ("tier:c8", (2, 40, 200, 0, 0, 0)),
    ("tier:c8", (3, 40, 600, 0, 1, 2)),
]
DRAFT = [
    ("tier:c1", (0, 6, 0, 0, 0, 0)),
    ("tier:c1", (0, 6, 50, 10, 0, 0)),
    ("tier:c4", (0, 30, 50, 10, 0, 0)),
    ("tier:c4", (0, 30, 250, 40, 0, 0)),
]


def reading(waiting, used, *counters) -> str:
    lines = [
        "# TYPE nv_trt_llm_request_metrics gauge",
        f'nv_trt_llm_request_metrics{{{LABELS},request_type="active"}} {waiting + 2}',
        f'nv_trt_llm_request_metrics{{{LABELS},request_type="waiting"}} {waiting}',
        f'nv_trt_llm_request_metrics{{{LABELS},request_type="max"}} 8',
        "# TYPE nv_trt_llm_kv_cache_block_metrics gauge",
        f'nv_trt_llm_kv_cache_block_metrics{{{LABELS},kv_cache_block_type="max"}} 40',
        f'nv_trt_llm_kv_cache_block_metrics{{{LABELS},kv_cache_block_type="used"}} {used}',
        "# TYPE trtbench_reference_counters counter",
    ]
    lines += [
        f'trtbench_reference_counters{{{LABELS},counter="{name}"}} {value}'
        for name, value in zip(COUNTERS, counters, strict=True)
    ]
    return "\n".join(lines) + "\n"


def metrics() -> pd.DataFrame:
    samples = []
    for variant, readings, t0 in (("baseline", BASELINE, 0), ("draft-k4", DRAFT, 100)):
        for t, (phase, values) in enumerate(readings, start=t0):
            samples += parse_metrics_text(
                reading(*values), t_ns=t, variant=variant, phase=phase
            )
    return metrics_frame(samples)


def test_summary_per_variant():
    summary = kv_summary(kv_pressure(metrics())).set_index("variant")
    assert list(summary.index) == ["baseline", "draft-k4"]
    assert summary.loc["baseline", "largest_unqueued_concurrency"] == 4
    assert summary.loc["draft-k4", "largest_unqueued_concurrency"] == 4
    assert summary.loc["baseline", "speculative_share_text"] == "0.0 %"
    assert summary.loc["draft-k4", "speculative_share_text"] == "15.0 %–20.0 %"
    assert summary.loc[
        "baseline", ["kv_max_blocks", "max_kv_used_blocks"]
    ].tolist() == [40, 40]
    assert summary.loc["baseline", ["kv_waits", "preemptions"]].tolist() == [2, 1]
    assert summary.loc["draft-k4", ["kv_waits", "preemptions"]].tolist() == [0, 0]


def test_lines_show_both_tables_and_nothing_without_gauges():
    lines = kv_lines(kv_pressure(metrics()))
    assert lines[0] == HEADING
    text = "\n".join(lines)
    assert "| baseline | 4 | 40 | 40 | 0.0 % | 2 | 1 |" in text
    assert "| draft-k4 | 4 | 40 | 30 | 15.0 %–20.0 % | 0 | 0 |" in text
    # per tier: blocks used, pool, most active (waiting + 2), most waiting, waits, preemptions
    assert "| baseline | tier:c8 | 40 | 40 | 5 | 3 | 2 | 1 | - | 0.0 % |" in text
    assert "| draft-k4 | tier:c1 | 6 | 40 | 2 | 0 | 0 | 0 | - | 20.0 % |" in text
    assert kv_lines(None) == [] and kv_lines(pd.DataFrame()) == []


def test_report_shows_the_section_and_the_recommendation_the_same_capacity(tmp_path):
    root = tmp_path / "run"
    rows = [
        summary_row(v, c, tpot=t, tpot_p50=t, tok_s=c * 1000.0 / t)
        for v, tpots in (
            ("baseline", (10.0, 11.0, 14.0)),
            ("draft-k4", (5.0, 8.0, 16.0)),
        )
        for c, t in zip((1, 4, 8), tpots, strict=True)
    ]
    write_summary(root, rows)
    write_build(root, "baseline", "baseline")
    write_build(root, "draft-k4", "draft_target", draft_len=4)
    write_breakdown(
        root,
        [
            {
                "variant": "baseline",
                "mode": "baseline",
                "weights_total_bytes": 100,
                "weight_source": "files",
            },
            {
                "variant": "draft-k4",
                "mode": "draft_target",
                "weights_total_bytes": 120,
                "weight_source": "files",
            },
        ],
    )
    write_server_metrics_csv(metrics(), RunDir(root).server_metrics_csv)
    text = write_report(root).report_path.read_text()
    section = text[text.index(HEADING) :]
    assert "| draft-k4 | 4 | 40 | 30 | 15.0 %–20.0 % | 0 | 0 |" in section
    recommendation = text[: text.index("## Comparison matrix")]
    assert "`draft-k4`" in recommendation
    assert "largest concurrency without queueing: 4." in recommendation
