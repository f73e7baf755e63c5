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
from tests.support.followup_runs import make_run, spec_text
from trtbench.pipeline.followup import plan_follow_up
from trtbench.pipeline.followup_spec import (
    is_measured_config,
    recommended_variant,
    without_defaults,
)
from trtbench.profiling.report.followup_check import (
    PASS,
    StageResult,
    check_basis,
    check_document,
    settle,
)
from trtbench.spec.bench import BenchSpec, parse_spec


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
    # the recommended config, then the best fixed variant of each tier (c1 ngram, c2
    # baseline), served side by side
    v, *fixed = plan.spec.variants
    assert [f.name for f in fixed] == ["ngram", "baseline"]
    assert (v.name, v.mode, v.max_draft_len) == ("ngram-recommended", "ngram", 4)
    assert v.prompt_lookup_max == 3  # the winner's own field is kept
    assert v.speculation.max_concurrency == 1
    assert v.speculation.draft_len_schedule == {1: 2}
    lt = plan.spec.loadtest
    assert [lt.concurrency, lt.repeats, lt.requests_per_tier, lt.seed] == [
        [1, 2],
        8,  # the follow-up's own rounds (--rounds, default 8)
        4,
        5,
    ]
    # a race within those rounds: the servers share the host (interleaved) and the
    # objective is output tok/s; a tier stops once its comparison is decided
    assert lt.stop_when_decided and lt.budget.max_rounds == 8
    assert plan.best == {"c1": "ngram", "c2": "baseline"}
    assert plan.tiers_of() == {
        "ngram-recommended": ["c1", "c2"],
        "ngram": ["c1"],
        "baseline": ["c2"],
    }
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
        (
            lambda r: (r / "recommendation.json").unlink(),
            "recommendation.json does not exist",
        ),
        (
            lambda r: (r / "recommendation.json").write_text(
                '{"schema_version": 1, "tie'
            ),
            "not valid JSON",
        ),
        (_goodput_objective, "objective goodput needs SLOs"),
        (_no_spec, "records no spec (build.spec)"),
    ],
)
def test_bad_input_exits_2_with_one_line(run, capsys, damage, says):
    damage(run)
    capsys.readouterr()  # the report's own warnings
    code, out, err = run_cli(["follow-up", run], capsys)
    assert code == 2
    assert err.count("\n") == 1 and says in err, err
    assert not (run / "follow-up").exists()


def test_too_few_rounds_or_no_run_exit_2(run, tmp_path, capsys):
    capsys.readouterr()  # the report's own warnings
    code, _, err = run_cli(["follow-up", run, "--rounds", "2"], capsys)
    assert code == 2 and "--rounds" in err
    code, _, err = run_cli(["follow-up", run, "--rounds", "1000000000"], capsys)
    assert code == 2 and "--rounds" in err and "100" in err  # the option, not a file
    code, _, err = run_cli(["follow-up", tmp_path / "absent"], capsys)
    assert code == 2 and "does not exist" in err
    # a folder that is no run, and a run that measured nothing: said before any build
    folder = tmp_path / "folder"
    folder.mkdir()
    code, _, err = run_cli(["follow-up", folder], capsys)
    assert code == 2 and "has no run.json: it is not a run directory" in err
    (run / "loadtest" / "summary.csv").unlink()
    code, _, err = run_cli(["follow-up", run], capsys)
    assert code == 2 and "summary.csv is missing: the run measured nothing" in err
    assert not (run / "follow-up").exists()


def test_report_shows_the_follow_up_check(run, capsys):
    assert "## Follow-up check" not in (run / "report.md").read_text()
    basis = check_basis("output_tok_s")
    stage = StageResult(1.02, 0.97, 1.07, 8, PASS, "not significantly worse")
    checks = [
        settle("c1", 1, "ngram", stage, None),
        settle("c2", 2, "baseline", stage, None),
    ]
    doc = check_document(
        checks, basis, {"variant": "ngram-recommended", "from": "ngram"}, {}, 8
    )
    (run / "follow-up").mkdir()
    (run / "follow-up" / "check.json").write_text(json.dumps(doc))
    code, _, _ = run_cli(["report", run], capsys)
    assert code == 0
    text = (run / "report.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[:2] == ["## Recommendation", "## Follow-up check"]
    assert "keeps up with the best fixed variant at every tier" in text
    assert "| c1 | ngram | 1.02x [0.97, 1.07] (8 rounds) | - | yes:" in text


def test_a_damaged_run_is_refused_before_anything_is_built(run, capsys):
    # what `trtbench report` refuses, the follow-up refuses too: a rounds.csv cell twice
    from trtbench.core.export import write_csv
    from trtbench.profiling.loadtest.files.rounds_table import ROUNDS_SCHEMA

    row = {c.name: 1.0 for c in ROUNDS_SCHEMA}
    row.update(
        variant="ngram", tier="c1", round=0, started_at="x", interference_flag=False
    )
    write_csv(pd.DataFrame([row, row]), run / "loadtest" / "rounds.csv", ROUNDS_SCHEMA)
    capsys.readouterr()
    code, _, err = run_cli(["follow-up", run], capsys)
    assert code == 2 and "rounds.csv:3: round 0 c1 ngram has a second row" in err
    assert not (run / "follow-up").exists()


def _without_policy(run):
    """The run's recommendation with the snippet's speculation: policy removed: serve
    ``ngram`` as it was measured (K=4 at every batch)."""
    path = run / "recommendation.json"
    doc = json.loads(path.read_text())
    snippet = next(s for s in doc["snippets"] if s["target"] == "trtbench variant")
    del snippet["config"]["variants"][0]["speculation"]
    path.write_text(json.dumps(doc))


def test_a_policy_or_a_changed_field_is_a_new_config(run):
    # the module docstring's recommendation: ngram with max_concurrency 1 and a schedule
    assert plan_follow_up(run).measured is False
    _without_policy(run)
    assert plan_follow_up(run).measured is True  # ngram exactly as the run measured it
    path = run / "recommendation.json"
    doc = json.loads(path.read_text())
    snippet = next(s for s in doc["snippets"] if s["target"] == "trtbench variant")
    snippet["config"]["variants"][0]["max_draft_len"] = 2  # the run measured K=4
    path.write_text(json.dumps(doc))
    assert plan_follow_up(run).measured is False


def test_the_baseline_recommended_is_the_baseline_measured(tiny_models):
    recorded = parse_spec(spec_text(tiny_models)).model_dump(mode="json")
    rec = {"winner": None, "baseline": "baseline", "snippets": []}
    fields, source = recommended_variant(recorded, rec, "rec.json")
    assert is_measured_config(recorded, fields, source)


def test_a_config_measured_as_is_is_not_measured_again(run, capsys):
    _without_policy(run)
    code, out, _ = run_cli(["follow-up", run], capsys)
    assert code == 0, out
    check = json.loads((run / "follow-up" / "check.json").read_text())
    assert check["verdict"] == "skipped" and check["passed"] is None
    assert check["recommended"]["from"] == "ngram"
    assert check["unchecked"] == ["c1", "c2"] and check["tiers"] == []
    assert not (run / "follow-up" / "run.json").exists()  # nothing built or served
    text = (run / "report.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[:2] == ["## Recommendation", "## Follow-up check"]
    assert (
        "`ngram-recommended` was not measured again: the recommended config is " in text
    )
    assert "was not measured again" in out
