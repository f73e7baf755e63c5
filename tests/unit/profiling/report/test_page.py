"""report.html's parts without a browser: the Markdown rendered with the answer as a box,
the plot images replaced or inlined, and the figures' numbers (hand-worked frames); the
browser test is tests/integration/test_report_html.py."""

from __future__ import annotations

import base64

import pandas as pd
import plotly.graph_objects as go

from trtbench.profiling.report.page import render_page, with_extra_figures, write_page
from trtbench.profiling.report.page_figures import (
    PageFigure,
    positions,
    rounds,
    vs_load,
)

ANSWER = "Serve `ngram` (n-gram) at every tier."
TEXT = f"""# trtbench report: r

## Recommendation

**{ANSWER}**

| tier | best |
|---|---|
| c1 | `ngram` |

## Plots

![Speedup](plots/speedup.png)
![Memory](plots/memory.png)

## What limited this run
"""


def _figure(key: str, traces: int) -> PageFigure:
    fig = go.Figure([go.Scatter(x=[1], y=[1], name=f"v{i}") for i in range(traces)])
    return PageFigure(key, key.title(), fig)


def test_extra_figures_follow_the_last_plot():
    out = with_extra_figures(TEXT, [_figure("rounds", 1)])
    lines = out.splitlines()
    at = lines.index("![Memory](plots/memory.png)")
    assert lines[at + 1] == "![Rounds](page:rounds)"


def test_the_page_is_the_report_with_its_answer_as_a_box(tmp_path):
    (tmp_path / "plots").mkdir()
    png = b"\x89PNG not really"
    (tmp_path / "plots" / "memory.png").write_bytes(png)
    page = render_page(
        TEXT, ANSWER, [_figure("speedup", 2), _figure("rounds", 3)], tmp_path, "r"
    )
    box = '<p id="answer">Serve <code>ngram</code> (n-gram) at every tier.</p>'
    assert page.count('id="answer"') == 1 and box in page
    assert "<strong>Serve" not in page  # the bold line became the box
    assert page.index(box) < page.index("<table>")
    assert 'id="plot-speedup"' in page and 'id="plot-rounds"' in page
    assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in page
    assert "plots/" not in page.split("<body>")[1]  # every image inlined or replaced
    assert page.index('id="plot-speedup"') < page.index('id="plot-rounds"')
    assert page.index('id="plot-rounds"') < page.index("What limited this run")


def test_write_page_puts_the_html_beside_the_markdown(tmp_path):
    md = tmp_path / "cmp.md"
    md.write_text("# A vs B\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    out = write_page(md)
    assert out == tmp_path / "cmp.html"
    text = out.read_text()
    assert "<title>A vs B</title>" in text and "<td>1</td>" in text
    assert 'id="answer"' not in text  # no answer given: no box


def test_interval_bars_reach_the_interval_from_the_point():
    tiers = pd.DataFrame(
        {
            "variant": ["a", "a"],
            "tier": ["c1", "c2"],
            "concurrency": [1, 2],
            "tpot_mean_ms": [2.0, 4.0],
            "tpot_mean_ms_ci95_low": [1.5, 4.5],  # c2: the point lies below it
            "tpot_mean_ms_ci95_high": [3.0, 6.0],
        }
    )
    fig = vs_load(tiers, "tpot_mean_ms", "tpot", "TPOT (ms)", "TPOT").figure
    (trace,) = fig.data
    assert list(trace.error_y.array) == [1.0, 2.0]
    assert list(trace.error_y.arrayminus) == [0.5, 0.0]  # clipped at the point
    assert "[4.5, 6] (95 %)" in trace.customdata[1][1]


def test_acceptance_per_position_pools_the_tiers():
    rows = [
        ("d", "c1", "position", 1, 4, 3),
        ("d", "c2", "position", 1, 4, 1),
        ("d", "c1", "position", 2, 4, 1),
        ("d", "c1", "histogram", 1, 4, 4),  # not a position row
        ("m", "c1", "position", 1, 10, 9),
    ]
    frame = pd.DataFrame(
        rows,
        columns=[
            "variant",
            "tier",
            "kind",
            "draft_position",
            "steps_count",
            "hits_count",
        ],
    )
    fig = positions(frame).figure
    by_name = {t.name: list(t.y) for t in fig.data}
    assert by_name == {"d": [0.5, 0.25], "m": [0.9]}  # (3 + 1) / (4 + 4); 1 / 4


def test_rounds_mark_the_interfered_ones():
    frame = pd.DataFrame(
        {
            "variant": ["a", "b", "a"],
            "tier": ["c1", "c1", "c2"],
            "round": [0, 0, 1],
            "start_s": [0.0, 1.0, 2.0],
            "output_tokens_per_s": [100.0, 120.0, 90.0],
            "interference_flag": [True, False, False],
            "host_other_cpu_share": [0.4, 0.01, 0.02],
        }
    )
    fig = rounds(frame).figure
    cells = {(t.name, t.xaxis): t for t in fig.data}  # c1 on the first panel, c2 next
    assert sorted(cells) == [("a", "x"), ("a", "x2"), ("b", "x")]
    assert list(cells["a", "x"].marker.symbol) == ["x"]
    assert list(cells["a", "x2"].marker.symbol) == ["circle"]
    assert list(cells["b", "x"].marker.symbol) == ["circle"]
    assert cells["a", "x"].customdata[0][2] == "40%"
    assert [t.showlegend for t in fig.data] == [
        True,
        False,
        True,
    ]  # one entry a variant
    assert rounds(frame.iloc[0:0]) is None
