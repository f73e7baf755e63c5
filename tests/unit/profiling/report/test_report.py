"""``trtbench report`` / ``compare`` on hand-made run directories written with the real schemas.

The run (values chosen so the arithmetic is easy):

    tier  baseline TPOT  draft-k4 TPOT  medusa TPOT
    c1    10 ms          5  -> 2.000x   6  -> 1.667x
    c4    11 ms          8  -> 1.375x   9  -> 1.222x
    c16   14 ms          16 -> 0.875x   12 -> 1.167x

draft-k4 reports an acceptance length of 3.0 tokens/step; medusa only the client's 2.5 tokens
per response. Memory (GiB): weights 16 / 18.5 / 17.5, device peaks 60 / 62 / 60.5. Traces:
eager steps 1.4, 1.5, 1.3 ms of launch calls; graph steps 0.18, 0.17, 0.19 ms.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support.run_factory import (
    summary_row,
    write_breakdown,
    write_build,
    write_repo_metadata,
    write_steps,
    write_summary,
)
from trtbench.cli import cli, main
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.report import analyze_run, compare_runs, write_report
from trtbench.profiling.report.comparison import crossovers
from trtbench.profiling.report.run_data import load_run

GIB = 1024**3
TPOT = {
    "baseline": (10.0, 11.0, 14.0),
    "draft-k4": (5.0, 8.0, 16.0),
    "medusa": (6.0, 9.0, 12.0),
}
TIERS = (1, 4, 16)


def make_run(root, tpot=TPOT, draft_streams=True, with_extras=True):
    rows = []
    for variant, values in tpot.items():
        for c, tpot_value in zip(TIERS, values, strict=True):
            t = tpot_value
            extra = {"accept": 3.0} if variant == "draft-k4" else {}
            if variant == "medusa":
                extra = {"per_response": 2.5}
            if variant == "draft-k4" and not draft_streams:
                t = float("nan")  # one response per request: no TPOT
            rows.append(
                summary_row(
                    variant,
                    c,
                    tpot=t,
                    tpot_p50=t,
                    ttft_p50=20.0 + c,
                    ttft_p95=30.0 + c,
                    tok_s=c * 1000.0 / tpot_value,
                    **extra,
                )
            )
    write_summary(root, rows)
    modes = {"baseline": "baseline", "draft-k4": "draft_target", "medusa": "medusa"}
    write_build(root, "baseline", "baseline")
    write_build(root, "draft-k4", "draft_target", draft_len=4)
    write_build(root, "medusa", "medusa", choices=[[0], [0, 0], [1]])
    for variant, mode in modes.items():
        streams = draft_streams or variant != "draft-k4"
        graphs = (
            (True, False, "no CUDA device")
            if variant == "medusa"
            else (False, False, "")
        )
        write_repo_metadata(root, variant, mode, streaming=streams, graphs=graphs)
    if with_extras:
        write_breakdown(
            root,
            [
                {
                    "variant": "baseline",
                    "mode": "baseline",
                    "weights_total_bytes": 16 * GIB,
                    "target_weights_bytes": 16 * GIB,
                    "weight_source": "files",
                    "peak_device_used_bytes": 60 * GIB,
                },
                {
                    "variant": "draft-k4",
                    "mode": "draft_target",
                    "weights_total_bytes": int(18.5 * GIB),
                    "target_weights_bytes": 16 * GIB,
                    "draft_weights_bytes": int(2.5 * GIB),
                    "weight_source": "files",
                    "peak_device_used_bytes": 62 * GIB,
                },
                {
                    "variant": "medusa",
                    "mode": "medusa",
                    "weights_total_bytes": int(17.5 * GIB),
                    "target_weights_bytes": 16 * GIB,
                    "medusa_heads_bytes": int(1.5 * GIB),
                    "weight_source": "files",
                    "peak_device_used_bytes": int(60.5 * GIB),
                },
            ],
        )
        write_steps(root, "baseline-eager", [1_400_000, 1_500_000, 1_300_000])
        write_steps(
            root, "baseline-graphs", [180_000, 170_000, 190_000], graph_launches=1
        )
    return root


@pytest.fixture
def analysis(tmp_path):
    return analyze_run(load_run(make_run(tmp_path / "run")))


def test_tier_speedups_and_tokens_per_step(analysis):
    t = analysis.tiers.set_index(["variant", "tier"])
    assert t.at[("draft-k4", "c16"), "speedup_ratio"] == pytest.approx(14 / 16)
    assert t.at[("medusa", "c4"), "speedup_ratio"] == pytest.approx(11 / 9)
    assert (
        t.at[("draft-k4", "c1"), "tokens_per_step"] == 3.0
    )  # server acceptance length
    assert t.at[("medusa", "c1"), "tokens_per_step"] == 2.5  # client tokens/response
    assert t.at[("baseline", "c4"), "tokens_per_step"] == 1.0
    assert (t["speedup_basis"] == "tpot").all()


def test_crossover_first_tier_and_interpolated(analysis):
    c = analysis.crossover.set_index("variant")
    assert c.at["draft-k4", "crossover_concurrency"] == 16
    # log2 C: 2 + (1.375 - 1) / (1.375 - 0.875) * (4 - 2) = 3.5 -> 2^3.5 = 11.31
    assert c.at["draft-k4", "crossover_interpolated"] == pytest.approx(2**3.5)
    assert math.isnan(c.at["medusa", "crossover_concurrency"])


def test_crossover_of_a_variant_slower_at_the_lowest_tier():
    # Speedups 0.93, 1.10, 1.05, 0.89 at C = 1, 2, 4, 8: slower from C = 1, and the first
    # fall from >= 1 to < 1 lies between 4 and 8 (the Recommendation's crossover too):
    # log2 C = 2 + (1.05 - 1) / (1.05 - 0.89) * (3 - 2) = 2.3125 -> C = 4.97.
    tiers = pd.DataFrame(
        {
            "variant": ["d"] * 4,
            "mode": ["draft_target"] * 4,
            "concurrency": [1.0, 2.0, 4.0, 8.0],
            "speedup_ratio": [0.93, 1.10, 1.05, 0.89],
        }
    )
    c = crossovers(tiers).set_index("variant")
    assert c.at["d", "crossover_concurrency"] == 1
    assert c.at["d", "crossover_interpolated"] == pytest.approx(2**2.3125)
    # never back above 1: no crossing
    tiers["speedup_ratio"] = [0.93, 0.95, 0.9, 0.89]
    assert math.isnan(crossovers(tiers).at[0, "crossover_interpolated"])


def test_matrix_values(analysis):
    m = analysis.matrix.set_index("variant")
    assert m.at["draft-k4", "speedup_low_ratio"] == pytest.approx(2.0)
    assert m.at["draft-k4", "speedup_high_ratio"] == pytest.approx(0.875)
    assert m.at["medusa", "speedup_high_ratio"] == pytest.approx(14 / 12)
    assert m.at["draft-k4", "extra_memory_bytes"] == 2 * GIB  # 62 - 60 GiB peak
    assert m.at["medusa", "extra_memory_bytes"] == 0.5 * GIB
    assert m.at["draft-k4", "extra_memory_basis"] == "peak_device_used_bytes"
    assert m.at["draft-k4", "tokens_per_step"] == 3.0
    assert m.at["draft-k4", "ttft_p50_ms"] == 21.0  # 20 + c at c = 1
    assert m.at["medusa", "cuda_graphs"] == "unavailable"
    assert m.at["baseline", "cuda_graphs"] == "off"
    mem = analysis.memory.set_index("variant")
    assert mem.at["draft-k4", "extra_weights_bytes"] == int(18.5 * GIB) - 16 * GIB


def test_launch_overhead_per_step(analysis):
    launches = analysis.launches.set_index("trace")
    assert launches.at["baseline-eager", "launch_overhead_mean_ms"] == pytest.approx(
        1.4
    )
    assert launches.at["baseline-graphs", "launch_overhead_mean_ms"] == pytest.approx(
        0.18
    )
    assert bool(launches.at["baseline-graphs", "cuda_graphs"])
    assert not bool(launches.at["baseline-eager", "cuda_graphs"])


def _is_png(path):
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_report_writes_markdown_and_plots(tmp_path):
    root = make_run(tmp_path / "run")
    result = CliRunner().invoke(cli, ["report", str(root)])
    assert result.exit_code == 0, result.output
    text = (root / "report.md").read_text()
    assert (
        "| draft-k4 | draft_target | +2.00 GiB | 1 | 2.00x | 16 | 0.88x | 16 | 11.3 |"
        in text
    )
    assert (
        "medusa`: CUDA graphs were requested but unavailable (no CUDA device)" in text
    )
    names = {p.name for p in (root / "plots").iterdir()}
    assert names == {
        "ttft.png",
        "tpot.png",
        "throughput.png",
        "speedup.png",
        "acceptance.png",
        "memory.png",
        "launch_overhead.png",
    }
    assert all(_is_png(p) for p in (root / "plots").iterdir())
    assert "plots/speedup.png" in text


def test_non_streaming_draft_uses_throughput_and_is_noted(tmp_path):
    root = make_run(tmp_path / "run", draft_streams=False, with_extras=False)
    result = write_report(root)
    text = result.report_path.read_text()
    assert "`draft-k4` does not stream" in text and "TTFT = E2E" in text
    assert "No memory_breakdown.csv" in text and "No traces/**/steps.csv" in text
    t = analyze_run(load_run(root)).tiers.set_index(["variant", "tier"])
    assert t.at[("draft-k4", "c4"), "speedup_basis"] == "throughput"
    assert {p.name for p in result.plot_paths} == {
        "ttft.png",
        "tpot.png",
        "throughput.png",
        "speedup.png",
        "acceptance.png",
    }


def test_compare_two_runs_gives_ratios(tmp_path):
    a = make_run(tmp_path / "a")
    faster = {**TPOT, "medusa": (3.0, 4.5, 6.0)}  # B halves Medusa's TPOT
    b = make_run(tmp_path / "b", tpot=faster)
    result = compare_runs(a, b, tmp_path / "cmp.md")
    md = result.markdown
    # c4: TTFT p50 20 + 4 = 24, p95 34 in both runs; Medusa TPOT 9 -> 4.5 ms
    assert "| medusa | c4 | 24 | 24 | 1.000 | 34 | 34 | 1.000 | 9 | 4.5 | 0.500 |" in md
    # tok/s = 4 * 1000 / TPOT: 444.4 -> 888.9; speedup 11/9 = 1.222 -> 11/4.5 = 2.444
    assert (
        "| medusa | c4 | 444.4 | 888.9 | 2.000 | 2.5 | 2.5 | 1.000 | 1.222 | 2.444 | 2.000 |"
        in md
    )
    assert "| draft-k4 | 18.5 | 18.5 | 1.000 | 62 | 62 | 1.000 |" in md
    assert (tmp_path / "cmp.md").read_text() == result.markdown
    page = (tmp_path / "cmp.html").read_text()  # the same tables as a page
    assert "<td>medusa</td>\n<td>c4</td>\n<td>24</td>" in page
    cli_out = CliRunner().invoke(cli, ["compare", str(a), str(b)])
    assert cli_out.exit_code == 0 and "B/A" in cli_out.output


def test_report_on_missing_run_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["report", str(tmp_path / "nope")])
    assert exc.value.code == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(tmp_path / "empty"), str(tmp_path / "empty")])
    assert exc.value.code == 2
    assert "summary.csv is missing" in capsys.readouterr().err


def test_modes_and_streaming_without_manifests(tmp_path):
    # `trtbench loadtest` alone leaves no build.json: the mode comes from the name, and
    # run.json's loadtest endpoint ("nostream") says the draft variant did not stream.
    root = tmp_path / "run"
    rows = [
        summary_row(v, c, tpot=t, accept=3.0 if v == "dtm-k4" else float("nan"))
        for v, t in (("baseline", 10.0), ("dtm-k4", 5.0))
        for c in (1, 8)
    ]
    write_summary(root, rows)
    RunDir(root).update_run_json(
        "loadtest",
        {"dtm-k4": {"endpoint": "nostream"}, "baseline": {"endpoint": "stream"}},
    )
    run = load_run(root)
    assert run.variants["dtm-k4"].mode == "draft_target"
    assert run.variants["dtm-k4"].mode_source == "name"
    assert run.variants["dtm-k4"].streaming is False
    assert run.variants["baseline"].streaming is True
    notes = analyze_run(run).notes
    assert any("guessed from the name" in n for n in notes)
    assert any("`dtm-k4` does not stream" in n for n in notes)


def test_vllm_served_variants_are_named_as_such_on_a_cpu_host(tmp_path):
    """A server: vllm variant is built with the reference checks but served by vLLM: the
    CPU note names vLLM for it, not the reference backend; an ngram variant keeps its K."""
    root = tmp_path / "run"
    rows = [
        summary_row(v, 1, tpot=5.0, tpot_p50=5.0, tok_s=100.0)
        for v in ("baseline", "vdt", "ng")
    ]
    write_summary(root, rows)
    write_build(root, "baseline", "baseline", host={"gpus": []})
    write_build(
        root, "vdt", "draft_target", draft_len=4, host={"gpus": []}, server="vllm"
    )
    write_build(root, "ng", "ngram", draft_len=3, host={"gpus": []})
    run = load_run(root)
    assert run.variants["vdt"].server == "vllm"
    assert run.variants["baseline"].server == "triton"
    assert run.variants["ng"].draft_len == 3
    notes = analyze_run(run).notes
    assert any(
        "`baseline`, `ng` ran on the reference backend without a GPU" in n
        for n in notes
    )
    assert any(
        "`vdt` were served by vLLM on a machine without a GPU" in n for n in notes
    )


def test_noisy_tier_and_cpu_host_are_noted(tmp_path):
    # baseline c1: TPOT mean 10 ms but median 4 ms (> 2x): noted as noisy.
    # build.json host.gpus = []: the reference backend ran without a GPU.
    root = tmp_path / "run"
    write_summary(
        root,
        [
            summary_row("baseline", 1, tpot=10.0, tpot_p50=4.0),
            summary_row("medusa", 1, tpot=5.0, tpot_p50=4.9, per_response=2.0),
        ],
    )
    write_build(root, "baseline", "baseline", host={"gpus": []})
    write_build(root, "medusa", "medusa", choices=[[0]], host={"gpus": []})
    run = load_run(root)
    assert run.variants["medusa"].gpus == 0
    notes = analyze_run(run).notes
    assert any("more than twice its median in `baseline` c1" in n for n in notes)
    assert any(
        "`baseline`, `medusa` ran on the reference backend without a GPU" in n
        for n in notes
    )
