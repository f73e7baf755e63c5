"""The Recommendation on hand-made runs (run_factory: real schemas and writers).

The run (output tok/s; TPOT p50 ms in brackets):

    tier  baseline     draft (K=4)           medusa
    c1    100 [10]     180 [5]               150 [6]
    c4    300 [12]     390 [8]               360 [9]
    c8    500 [14]     999 partial (killed)  520 [13]
    c16   800 [16]     600 [20]              640 [18]

By output tok/s: c1 draft (180/150 = 1.2 over medusa, 1.8 over baseline), c4 draft
(390/360 = 1.0833, 390/300 = 1.3), c8 medusa (520/500 = 1.04; draft's c8 is partial and must
not win), c16 baseline (800/640 = 1.25 over medusa). Crossover of draft over the complete
tiers c1, c4, c16 (ratios 1.8, 1.3, 0.75): pays up to 4, stops at 16, estimate
2^(2 + 0.3/0.55·2) = 2^3.0909 = 8.52. Medusa (1.5, 1.2, 1.04, 0.8): pays up to 8, stops at
16, estimate 2^(3 + 0.04/0.24) = 2^3.1667 = 8.98. Draft wins 2 tiers, medusa 1: winner draft.
Draft's per-position acceptance [0.9, 0.7, 0.4, 0.2] at c1 and c4: K = 2 (largest j with
a_j ≥ 0.5), cap 4 → schedule {1: 2, 4: 2}.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support.run_factory import (
    summary_row,
    throughput_intervals,
    write_breakdown,
    write_build,
    write_summary,
)
from trtbench.cli import cli, main
from trtbench.core.errors import ConfigError
from trtbench.core.export import write_csv
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.recommend import contract_view
from trtbench.pipeline.report import analyze_run, write_report
from trtbench.profiling.loadtest.stats.acceptance import ACCEPTANCE_SCHEMA
from trtbench.profiling.report.inputs import RUN_CSV_SCHEMAS
from trtbench.profiling.report.recommendation import recommend
from trtbench.profiling.report.recommendation_config import (
    ContractView,
    Policy,
    llmapi_snippet,
    vllm_snippet,
)
from trtbench.profiling.report.run_data import load_run
from trtbench.spec.bench import parse_spec

TOK = {
    "baseline": (100.0, 300.0, 500.0, 800.0),
    "draft": (180.0, 390.0, 999.0, 600.0),
    "medusa": (150.0, 360.0, 520.0, 640.0),
}
TPOT = {
    "baseline": (10.0, 12.0, 14.0, 16.0),
    "draft": (5.0, 8.0, 7.0, 20.0),
    "medusa": (6.0, 9.0, 13.0, 18.0),
}
TIERS = (1, 4, 8, 16)
GIB = 1024**3


def make_run(root, *, intervals=None, acceptance=True, goodput=False):
    """``intervals``: {(variant, c): (tok_low, tok_high, ratio_low, ratio_high)}."""
    rows = []
    for variant in TOK:
        for i, c in enumerate(TIERS):
            row = summary_row(
                variant,
                c,
                tok_s=TOK[variant][i],
                tpot=TPOT[variant][i],
                tpot_p50=TPOT[variant][i],
            )
            if variant == "draft" and c == 8:
                row.update(tier_status="partial", tier_status_reason="server died")
            if goodput:
                row["request_goodput_per_s"] = TOK[variant][i] / 100
            if intervals and (variant, c) in intervals:
                lo, hi, rlo, rhi = intervals[(variant, c)]
                row.update(throughput_intervals(lo, hi, rlo, rhi))
            rows.append(row)
    write_summary(root, rows)
    write_build(root, "baseline", "baseline")
    write_build(root, "draft", "draft_target", draft_len=4)
    write_build(root, "medusa", "medusa", choices=[[0], [0, 0], [1]])
    write_breakdown(
        root,
        [
            {
                "variant": "baseline",
                "mode": "baseline",
                "weights_total_bytes": 16 * GIB,
                "weight_source": "files",
            },
            {
                "variant": "draft",
                "mode": "draft_target",
                "weights_total_bytes": 18 * GIB,
                "weight_source": "files",
                "draft_kv_max_blocks": 64,
            },
            {
                "variant": "medusa",
                "mode": "medusa",
                "weights_total_bytes": 17 * GIB,
                "weight_source": "files",
            },
        ],
    )
    if acceptance:
        rates = (0.9, 0.7, 0.4, 0.2)
        acc = [
            {
                "variant": "draft",
                "tier": f"c{c}",
                "kind": "position",
                "draft_position": j,
                "steps_count": 100,
                "hits_count": round(a * 100),
                "value_ratio": a,
                "source": "server_per_step",
            }
            for c in (1, 4)
            for j, a in enumerate(rates, start=1)
        ]
        write_csv(pd.DataFrame(acc), RunDir(root).acceptance_csv, ACCEPTANCE_SCHEMA)
    return root


def rec_of(root, objective="output_tok_s"):
    run = load_run(root, RUN_CSV_SCHEMAS)
    a = analyze_run(run)
    return recommend(
        a.tiers, run.summary, objective, run.baseline, a.memory, run.memory_breakdown
    )


def test_best_per_tier_by_throughput_partial_tier_excluded(tmp_path):
    rec = rec_of(make_run(tmp_path))
    best = {t.tier: t.best for t in rec.tiers}
    assert best == {"c1": "draft", "c4": "draft", "c8": "medusa", "c16": "baseline"}
    c1, c4, c8, c16 = rec.tiers
    assert c1.runner_up.over == "medusa" and c1.runner_up.ratio == pytest.approx(1.2)
    assert c1.over_baseline.ratio == pytest.approx(1.8)
    assert c4.runner_up.ratio == pytest.approx(390 / 360)
    assert c8.over_baseline.ratio == pytest.approx(1.04)
    assert c16.runner_up.over == "medusa" and c16.runner_up.ratio == pytest.approx(1.25)
    assert c16.over_baseline is None
    assert c8.excluded == ("`draft` c8: partial (server died)",)
    assert rec.excluded == ("`draft` c8: partial (server died)",)
    # no repeats: nothing is called significant, and the reader is told how to get it
    assert c1.runner_up.significant is None
    assert c1.runner_up.basis == "no interval: run with loadtest.repeats ≥ 3"
    assert rec.winner == "draft"


def test_best_per_tier_by_tpot_p50_and_goodput(tmp_path):
    rec = rec_of(make_run(tmp_path, goodput=True), "tpot_p50")
    best = {
        t.tier: t.best for t in rec.tiers
    }  # lower is better; draft c8 (7 ms) is partial
    assert best == {"c1": "draft", "c4": "draft", "c8": "medusa", "c16": "baseline"}
    assert rec.tiers[0].runner_up.ratio == pytest.approx(6 / 5)
    assert rec.tiers[0].over_baseline.ratio == pytest.approx(10 / 5)
    good = rec_of(tmp_path, "goodput")  # goodput = tok/s / 100: same ranking
    assert [t.best for t in good.tiers] == ["draft", "draft", "medusa", "baseline"]
    assert good.tiers[0].value == pytest.approx(1.8)


def test_crossover_without_intervals(tmp_path):
    rec = rec_of(make_run(tmp_path))
    cross = {c.variant: c for c in rec.crossovers}
    d, m = cross["draft"], cross["medusa"]
    assert (d.pays_up_to, d.stops_at) == (4, 16)
    assert d.estimate == pytest.approx(2 ** (2 + 0.3 / 0.55 * 2))
    assert (d.low, d.high) == (None, None)
    assert (m.pays_up_to, m.stops_at) == (8, 16)
    assert m.estimate == pytest.approx(2 ** (3 + 0.04 / 0.24))


def test_significance_and_crossover_interval_with_repeats(tmp_path):
    iv = {  # (tok low, tok high, ratio-over-baseline low, high)
        ("baseline", 1): (90, 110, None, None),
        ("draft", 1): (170, 190, 1.6, 2.0),
        ("medusa", 1): (140, 160, 1.3, 1.7),
        ("baseline", 4): (280, 320, None, None),
        ("draft", 4): (350, 430, 1.1, 1.5),
        ("medusa", 4): (340, 380, 1.1, 1.3),
        ("baseline", 16): (780, 820, None, None),
        ("draft", 16): (580, 620, 0.7, 0.8),
        ("medusa", 16): (600, 680, 0.7, 0.9),
    }
    rec = rec_of(make_run(tmp_path, intervals=iv))
    c1, c4 = rec.tiers[0], rec.tiers[1]
    assert c1.runner_up.significant is True  # 170 > 160: disjoint
    assert c1.runner_up.low == pytest.approx(170 / 160)
    assert c4.runner_up.significant is False  # [350, 430] and [340, 380] overlap
    assert c4.over_baseline.significant is True and c4.over_baseline.low == 1.1
    d = next(c for c in rec.crossovers if c.variant == "draft")
    assert (d.pays_up_to, d.stops_at, d.low, d.high) == (4, 16, 4, 16)
    assert "95 % interval" in d.basis


def test_memory_cost(tmp_path):
    rec = rec_of(make_run(tmp_path))
    mem = {m.variant: m for m in rec.memory}
    assert mem["draft"].extra_weights_bytes == 2 * GIB
    assert mem["draft"].kv_blocks_speculation == 64
    assert mem["draft"].max_concurrency_unqueued is None
    assert mem["draft"].queue_note.startswith("not measured")


def test_report_opens_with_recommendation_and_writes_json(tmp_path):
    root = make_run(tmp_path)
    result = CliRunner().invoke(cli, ["report", str(root)])
    assert result.exit_code == 0, result.output
    text = (root / "report.md").read_text()
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections[0] == "## Recommendation"
    assert (
        "**Serve `draft` (draft model) up to concurrency 4, speculation off above"
        in text
    )
    doc = json.loads((root / "recommendation.json").read_text())
    assert doc["winner"] == "draft" and doc["objective"]["name"] == "output_tok_s"
    assert doc["policy"]["max_concurrency"] == 4
    assert doc["policy"]["schedule"] == [[1, 2], [4, 2]]
    assert doc["excluded"] == ["`draft` c8: partial (server died)"]
    by_target = {s["target"]: s for s in doc["snippets"]}
    assert by_target["trtbench variant"]["config"]["variants"][0]["speculation"] == {
        "max_concurrency": 4,
        "draft_len_schedule": {"1": 2, "4": 2},
    }
    new = by_target["TensorRT-LLM 1.4.0rc4 LLM API"]["config"]["speculative_config"]
    assert new["decoding_type"] == "DraftTarget" and new["max_draft_len"] == 4
    assert (
        new["draft_len_schedule"] == {"1": 2, "4": 2} and "max_concurrency" not in new
    )
    old = by_target["TensorRT-LLM 1.2.1 LLM API"]
    assert old["config"]["speculative_config"]["max_draft_len"] == 2  # schedule[1] rule
    assert any("not confirmed" in n for n in old["notes"])
    vllm = by_target["vLLM 0.32"]["config"]
    assert vllm["method"] == "draft_model" and vllm["num_speculative_tokens"] == 4
    assert vllm["num_speculative_tokens_per_batch_size"] == [
        [1, 1, 2],
        [2, 4, 2],
        [5, 5, 0],
    ]
    assert "disable_by_batch_size" in by_target["vLLM 0.32"]["notes"][0]
    engine = by_target["engine path"]["text"]
    assert "c1 … c4: serve the `draft` engine" in engine
    assert "c16: serve the `baseline` engine" in engine


def test_without_acceptance_no_schedule_cap_only(tmp_path):
    root = make_run(tmp_path, acceptance=False)
    write_report(root)
    doc = json.loads((root / "recommendation.json").read_text())
    assert doc["policy"]["schedule"] is None
    by_target = {s["target"]: s for s in doc["snippets"]}
    spec = by_target["TensorRT-LLM 1.4.0rc4 LLM API"]["config"]["speculative_config"]
    assert spec["max_concurrency"] == 4 and "draft_len_schedule" not in spec
    ranges = by_target["vLLM 0.32"]["config"]["num_speculative_tokens_per_batch_size"]
    assert ranges == [[1, 4, 4], [5, 5, 0]]


POLICY = Policy("draft", "draft_target", 4, 8, ((1, 4), (8, 2)))


def test_llmapi_snippet_versions_and_a_field_a_version_lacks():
    new = llmapi_snippet(POLICY, contract_view("1.4.0rc4", "draft_target"))
    old = llmapi_snippet(POLICY, contract_view("1.2.1", "draft_target"))
    assert new.config["speculative_config"]["max_draft_len"] == 4
    assert new.config["speculative_config"]["draft_len_schedule"] == {1: 4, 8: 2}
    # contract evidence: 1.4.0rc4 from its release docs, 1.2.1 from a stored 1.2-era copy
    assert (
        "speculative_config.draft_len_schedule: presence at 1.4.0rc4 not confirmed "
        "(contract evidence: release_docs)"
    ) in new.notes
    assert (
        "speculative_config.draft_len_schedule: presence at 1.2.1 not confirmed "
        "(contract evidence: stored_copy)"
    ) in old.notes
    assert old.config["speculative_config"]["max_draft_len"] == 4  # == schedule[1]
    assert any(
        "requires draft_len_schedule[1] == max_draft_len" in n for n in old.notes
    )
    assert not any("requires" in n for n in new.notes)
    # the same policy against a contract table lacking draft_len_schedule (1.2.1's minus it)
    real = contract_view("1.2.1", "draft_target")
    lacking = ContractView(
        "1.2.1",
        real.decoding_type,
        {k: v for k, v in real.fields.items() if k != "draft_len_schedule"},
    )
    snip = llmapi_snippet(POLICY, lacking)
    assert "draft_len_schedule" not in snip.config["speculative_config"]
    assert (
        "TensorRT-LLM 1.2.1's contract has no speculative_config.draft_len_schedule: "
        "left out"
    ) in snip.notes
    medusa = llmapi_snippet(
        Policy("m", "medusa", None, 8, None), contract_view("1.4.0rc4", "medusa")
    )
    assert medusa.config == {} and "PyTorch backend" in medusa.text


def test_vllm_snippet():
    snip = vllm_snippet(POLICY)
    assert snip.config["num_speculative_tokens_per_batch_size"] == [
        [1, 1, 4],
        [2, 8, 2],
        [9, 9, 0],
    ]
    payload = snip.text.split("--speculative-config '", 1)[1].rstrip("'")
    assert json.loads(payload) == snip.config
    # n-gram as measured (prompt lookup over 1-2 tokens): the window is written out, not
    # left to vLLM's default of 5; the snippet's own keys stay its own.
    ngram = Policy("ng", "ngram", 4, None, None)
    measured = {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 2,
        "prompt_lookup_min": 1,
    }
    assert vllm_snippet(ngram, measured).config == measured
    assert "prompt_lookup_max" not in vllm_snippet(ngram).config
    # unknown keys are said to be unknown, never left to look like the measured config
    assert any("own vLLM keys are unknown" in n for n in vllm_snippet(ngram).notes)
    assert not any("unknown" in n for n in vllm_snippet(ngram, measured).notes)


def test_goodput_without_slos_exits_2_one_line(tmp_path, capsys):
    root = make_run(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["report", str(root), "--objective", "goodput"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "goodput needs SLOs" in err
    assert "loadtest.slo_ttft_ms" in err


def test_objective_from_run_json_and_cli_override(tmp_path):
    root = make_run(tmp_path, goodput=True)
    RunDir(root).update_run_json(
        "build",
        {
            "spec": {
                "report": {"objective": "tpot_p50"},
                "loadtest": {"slo_ttft_ms": 500.0},
            }
        },
    )
    write_report(root)
    doc = json.loads((root / "recommendation.json").read_text())
    assert doc["objective"]["name"] == "tpot_p50" and doc["objective"]["unit"] == "ms"
    assert doc["tiers"][0]["value"] == 5.0  # draft's TPOT p50 at c1
    write_report(root, objective="goodput")
    doc = json.loads((root / "recommendation.json").read_text())
    assert doc["objective"]["name"] == "goodput" and doc["tiers"][0]["value"] == 1.8


def test_spec_refuses_goodput_without_slos():
    text = "models: {target: /tmp}\nvariants: [{name: b, mode: baseline}]\n"
    with pytest.raises(ConfigError, match="report.objective goodput needs SLOs"):
        parse_spec(text + "report: {objective: goodput}\n")
    spec = parse_spec(
        text + "report: {objective: goodput}\nloadtest: {slo_tpot_ms: 50}\n"
    )
    assert spec.report.objective == "goodput"
    assert parse_spec(text).report.objective == "output_tok_s"


def test_two_servers_trtbench_did_not_build(tmp_path):
    """`trtbench loadtest --variant spec-off` then `--variant spec-on --baseline spec-off`
    into one directory: no build.json says either's method. spec-on is best at both tiers
    (180 vs 100, 390 vs 300 tok/s): it is the answer, named with its method unknown, over
    the baseline run.json records — not "serve without speculation" under a table that
    names spec-on best."""
    rows = []
    for variant, toks in (("spec-off", (100.0, 300.0)), ("spec-on", (180.0, 390.0))):
        for c, tok in zip((1, 4), toks, strict=True):
            rows.append(summary_row(variant, c, tok_s=tok, tpot=1000 / tok))
    write_summary(tmp_path, rows, baseline="spec-off")
    RunDir(tmp_path).update_run_json("baseline", "spec-off")
    write_report(tmp_path)
    doc = json.loads((tmp_path / "recommendation.json").read_text())
    assert doc["winner"] == "spec-on" and doc["baseline"] == "spec-off"
    assert doc["answer"].startswith(
        "Serve `spec-on` (its method not recorded) at every measured concurrency: "
        "best by output tok/s at 2 of 2 complete tiers"
    )
    assert [t["best"] for t in doc["tiers"]] == ["spec-on", "spec-on"]
    assert doc["snippets"] == []  # no config to write out for a server it did not build
