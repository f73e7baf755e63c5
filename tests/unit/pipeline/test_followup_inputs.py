"""``trtbench follow-up``: the follow-up spec made from a run's recorded spec and its
recommendation, every bad input refused (exit 2, one line) before anything is built, and the
"Follow-up check" section of ``trtbench report``. The run: ``tests/support/followup_runs.py``
(its docstring works out the recommendation).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.support.cli import run_cli
from tests.support.followup_runs import INTERVALS, make_run, spec_text
from trtbench.pipeline.followup import plan_follow_up
from trtbench.pipeline.followup_spec import (
    recommended_variant,
    without_defaults,
)
from trtbench.profiling.report.followup_check import (
    check_basis,
    check_document,
    check_tiers,
)
from trtbench.spec import BenchSpec, parse_spec


@pytest.fixture
def run(tmp_path, tiny_models):
    return make_run(tmp_path / "run", tiny_models)


def test_plan_runs_the_recommended_config_over_the_same_tiers(run):
    rec = json.loads((run / "recommendation.json").read_text())
    # the recommendation itself, as the module docstring works it out
    assert rec["winner"] == "ngram"
    snippet = next(s for s in rec["snippets"] if s["target"] == "trtbench variant")
    wanted = snippet["config"]["variants"][0]["speculation"]
    assert wanted == {"max_concurrency": 1, "draft_len_schedule": {"1": 2}}
    plan = plan_follow_up(run)  # real preflight: tokenizer, tritonserver, prompts
    (v,) = plan.spec.variants
    assert (v.name, v.mode, v.max_draft_len) == ("ngram-recommended", "ngram", 4)
    assert v.prompt_lookup_max == 3  # the winner's own field is kept
    assert v.speculation.max_concurrency == 1
    assert v.speculation.draft_len_schedule == {1: 2}
    lt = plan.spec.loadtest
    assert [lt.concurrency, lt.repeats, lt.requests_per_tier, lt.seed] == [
        [1, 2],
        3,
        4,
        5,
    ]
    assert plan.best == {"c1": "ngram", "c2": "baseline"}
    assert plan.out.root == run / "follow-up"
    assert not (run / "follow-up").exists()  # nothing built or written yet


def test_baseline_everywhere_follows_up_with_the_baseline(tiny_models):
    recorded = parse_spec(spec_text(tiny_models)).model_dump(mode="json")
    fields, source = recommended_variant(
        recorded, {"winner": None, "baseline": "baseline", "snippets": []}, "rec.json"
    )
    assert source == "baseline" and fields["name"] == "baseline-recommended"
    assert fields["mode"] == "baseline" and "speculation" not in fields


def test_recorded_spec_reads_back_equal(tiny_models):
    spec = parse_spec(spec_text(tiny_models))
    again = BenchSpec.model_validate(
        without_defaults(BenchSpec, spec.model_dump(mode="json"))
    )
    assert again == spec


def _goodput_objective(run):
    path = run / "recommendation.json"
    doc = json.loads(path.read_text())
    path.write_text(
        json.dumps({**doc, "objective": {**doc["objective"], "name": "goodput"}})
    )


def _no_spec(run):
    doc = json.loads((run / "run.json").read_text())
    doc["build"].pop("spec")
    (run / "run.json").write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda r: (r / "recommendation.json").unlink(), "recommendation.json does not exist"),
        (lambda r: (r / "recommendation.json").write_text('{"schema_version": 1, "tie'),
         "not valid JSON"),
        (_goodput_objective, "objective goodput has no per-variant 95 % interval"),
        (_no_spec, "records no spec (build.spec)"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line(run, capsys, damage, says):
    damage(run)
    capsys.readouterr()  # the report's own warnings
    code, out, err = run_cli(["follow-up", run], capsys)
    assert code == 2
    assert err.count("\n") == 1 and says in err, err
    assert not (run / "follow-up").exists()


def test_a_run_without_repeats_cannot_be_checked(tmp_path, tiny_models, capsys):
    root = make_run(tmp_path / "once", tiny_models, repeats=1)
    capsys.readouterr()  # the report's own warnings
    code, _, err = run_cli(["follow-up", root], capsys)
    assert code == 2 and "loadtest.repeats 1" in err and err.count("\n") == 1
    code, _, err = run_cli(["follow-up", tmp_path / "absent"], capsys)
    assert code == 2 and "does not exist" in err


def test_report_shows_the_follow_up_check(run, capsys):
    assert "## Follow-up check" not in (run / "report.md").read_text()
    original = pd.DataFrame([
        {"variant": v, "tier": f"c{c}", "output_tokens_per_s": x,
         "output_tokens_per_s_ci95_low": lo, "output_tokens_per_s_ci95_high": hi,
         "tier_status": "complete", "repeats_count": 3, "concurrency": c}
        for (v, c), (x, lo, hi, _, _) in INTERVALS.items()
    ])  # fmt: skip
    follow = original[original["variant"] == "ngram"].assign(
        variant="ngram-recommended"
    )
    tiers = check_tiers(original, follow, {"c1": "ngram", "c2": "baseline"},
                        "ngram-recommended", check_basis("output_tok_s"))  # fmt: skip
    # c2: recommended 140 [130, 150] against baseline 150 [140, 160]: 150 >= 140, pass
    assert [t.status for t in tiers] == ["pass", "pass"]
    doc = check_document(tiers, check_basis("output_tok_s"),
                         {"variant": "ngram-recommended", "from": "ngram"}, {})  # fmt: skip
    (run / "follow-up").mkdir()
    (run / "follow-up" / "check.json").write_text(json.dumps(doc))
    code, _, _ = run_cli(["report", run], capsys)
    assert code == 0
    text = (run / "report.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[:2] == ["## Recommendation", "## Follow-up check"]
    assert "keeps up with the best fixed variant at every tier: pass" in text
