"""report.html's parts without a browser: the Markdown rendered with the answer as a box,
the plot images replaced or inlined, and the figures' numbers (hand-worked frames); the
browser test is tests/integration/test_report_html.py."""

from __future__ import annotations

import base64

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from tests.support.data import REPO_ROOT
from trtbench.profiling.report.page import (
    anchor,
    render_page,
    with_extra_figures,
    write_page,
)
from trtbench.profiling.report.page_figures import (
    PageFigure,
    categories,
    page_figures,
    positions,
    rounds,
    vs_load,
)
from trtbench.profiling.report.page_memory import MIB, memory_over_time, min_max_points

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


def test_anchors_are_github_s():
    # GitHub's anchors, as docs/recommendation.md and docs/metrics.md link them
    assert anchor("The rest of report.md") == "the-rest-of-reportmd"
    assert (
        anchor("Latency (per request, `loadtest/requests.csv` and `summary.csv`)")
        == "latency-per-request-loadtestrequestscsv-and-summarycsv"
    )
    assert anchor("Statistics a reader can trust") == "statistics-a-reader-can-trust"


TIERS = pd.DataFrame(
    {
        "variant": ["b", "s"],
        "mode": ["baseline", "ngram"],
        "tier": ["c1", "c1"],
        "concurrency": [1, 1],
        "ttft_p50_ms": [5.0, 4.0],
        "tpot_mean_ms": [2.0, 1.0],
        "output_tokens_per_s": [100.0, 150.0],
        "tokens_per_step": [1.0, 2.0],
        "speedup_ratio": [None, 1.5],
    }
)
"""A baseline ``b`` and a speculative ``s`` at one tier: every per-tier figure draws."""
CATS = pd.DataFrame(
    {
        "variant": ["s"],
        "tier": ["c1"],
        "category": ["chat"],
        "acceptance_length_tokens": [2.0],
    }
)


def test_each_figure_names_its_unit_and_a_heading_of_the_metrics_doc():
    headings = {
        line[3:].strip()
        for line in (REPO_ROOT / "docs" / "metrics.md").read_text().splitlines()
        if line.startswith("## ")
    }
    memory = pd.DataFrame(
        {
            "t_ns": [0, 10**8],
            "variant": ["s", "s"],
            "phase": ["load"] * 2,
            "source": ["rss"] * 2,
            "rss_bytes": [MIB, 2 * MIB],
        }
    )
    figures = page_figures(
        TIERS, pd.DataFrame(), None, None, "r", True, CATS, memory_over_time(memory)
    )
    units = {f.key: f.unit for f in figures}
    assert units == {
        "speedup": "ratio",
        "ttft": "ms",
        "tpot": "ms",
        "throughput": "tokens/s",
        "acceptance": "tokens",
        "categories": "tokens",
        "memory_time": "MiB",
    }
    assert {f.definition for f in figures} <= headings


def test_the_caption_links_the_definition_and_says_how_it_was_drawn(tmp_path):
    fig = PageFigure(
        "m", "M", go.Figure(), "MiB", "Memory over time (`memory.csv`)", "thinned"
    )
    page = render_page("# r\n", None, [fig], tmp_path, "r")
    caption = page.split("<figcaption>")[1].split("</figcaption>")[0]
    assert caption.startswith("Unit: MiB. Definition: <a")
    assert 'metrics.md#memory-over-time-memorycsv"' in caption
    assert caption.endswith("</a>. thinned")


def test_min_max_points_keep_each_run_s_lowest_and_highest():
    values = np.array([5, 1, 9, 2, 3, 3, 8, 0, 4], dtype=float)
    # two runs: readings 0-4 (lowest at 1, highest at 2) and 5-8 (highest 6, lowest 7)
    assert list(min_max_points(values, 4)) == [1, 2, 6, 7]
    assert list(min_max_points(values, 9)) == list(range(9))  # few enough: all
    assert list(min_max_points(np.array([3.0, 3.0, 3.0]), 2)) == [0]  # one run, flat
    with pytest.raises(ValueError):
        min_max_points(values, 1)


def _memory_rows() -> pd.DataFrame:
    """Variant a without NVML (RSS, the first reading empty); variant b on GPUs 0 (the
    server's processes listed) and 1 (none listed: the device's used memory)."""
    rows = [
        (1_000_000_000, "a", "load", "rss", None, None, None, None),
        (1_100_000_000, "a", "load", "rss", None, None, None, 2 * MIB),
        (1_200_000_000, "a", "tier:c1", "rss", None, None, None, 3 * MIB),
        (1_500_000_000, "b", "load", "nvml", 0, 4 * MIB, 8 * MIB, None),
        (1_500_000_000, "b", "load", "nvml", 1, None, 16 * MIB, None),
        (2_000_000_000, "b", "tier:c1", "nvml", 0, 5 * MIB, 9 * MIB, None),
        (2_000_000_000, "b", "tier:c1", "nvml", 1, None, 17 * MIB, None),
    ]
    columns = ["t_ns", "variant", "phase", "source", "device_index"]
    columns += ["proc_used_bytes", "mem_used_bytes", "rss_bytes"]
    return pd.DataFrame(rows, columns=columns)


def test_memory_over_time_draws_a_line_per_variant_and_device():
    fig = memory_over_time(_memory_rows())
    lines = {t.name: (list(t.x), list(t.y)) for t in fig.figure.data}
    assert lines == {
        "a": ([0.1, 0.2], [2.0, 3.0]),  # the empty reading left out; s since 1.0 s
        "b GPU 0": ([0.5, 1.0], [4.0, 5.0]),  # the server's processes, not the device
        "b GPU 1": ([0.5, 1.0], [16.0, 17.0]),  # none listed: the device's used memory
    }
    assert fig.note == "All 6 readings drawn."
    # shards on other hosts: each line from its own first reading
    apart = memory_over_time(_memory_rows(), same_clock=False)
    assert [list(t.x) for t in apart.figure.data] == [
        [0.0, 0.1],
        [0.0, 0.5],
        [0.0, 0.5],
    ]
    assert memory_over_time(None) is None


def test_memory_over_time_thins_to_its_budget_and_says_so():
    n = 100
    frame = pd.DataFrame(
        {
            "t_ns": np.arange(n) * 10**8,
            "variant": "a",
            "phase": "load",
            "source": "rss",
            "rss_bytes": (np.arange(n) % 7) * MIB,  # 0..6 MiB, repeating
        }
    )
    fig = memory_over_time(frame, total_points=10)
    (line,) = fig.figure.data
    # 5 runs of 20 readings, each holding 0 and 6 MiB: 10 points, every one a trough or peak
    assert len(line.y) == 10 and set(line.y) == {0.0, 6.0}
    assert fig.note.startswith(
        "100 readings drawn as 10 points: a line of more than 10"
    )


def test_acceptance_per_category_groups_by_category_then_tier():
    frame = pd.DataFrame(
        {
            "variant": ["d", "d", "d", "d", "base", "n"],
            "tier": ["c8", "c2", "c2", "c4", "c2", "c2"],
            "category": ["chat", "chat", "code", "chat", "chat", "code"],
            "tier_status": [
                "complete",
                "complete",
                "complete",
                "partial",
                "complete",
                None,
            ],
            "acceptance_length_tokens": [3.0, 2.5, 1.5, 9.0, None, 1.2],
            "draft_acceptance_rate_ratio": [0.5, 0.4, 0.1, 0.9, None, 0.05],
            "requests_count": [24, 24, 24, 3, 24, 24],
        }
    )
    fig = categories(frame).figure
    bars = {t.name: (list(t.x[0]), list(t.x[1]), list(t.y)) for t in fig.data}
    assert bars == {  # the partial tier and the baseline's empty rows left out
        "d": (["chat", "chat", "code"], ["c2", "c8", "c2"], [2.5, 3.0, 1.5]),
        "n": (["code"], ["c2"], [1.2]),
    }
    assert categories(frame.iloc[4:5]) is None


def test_a_variant_has_one_colour_in_every_figure():
    # alone among the speculative variants "s" would take tab10's first colour, beside
    # the baseline its second: the page's map decides everywhere
    colors = {"b": "#000001", "s": "#000002"}
    figures = page_figures(
        TIERS, pd.DataFrame(), None, None, "r", True, CATS, None, colors
    )
    drawn = {
        (f.key, t.name): t.marker.color if f.key == "categories" else t.line.color
        for f in figures
        for t in f.figure.data
    }
    assert {c for (_, name), c in drawn.items() if name == "s"} == {"#000002"}
    assert ("speedup", "s") in drawn and ("categories", "s") in drawn
