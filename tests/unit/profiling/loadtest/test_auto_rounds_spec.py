"""``loadtest.rounds: auto`` in a spec: what it sets, and the runs it is refused for
(before anything is built)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trtbench.core.errors import ConfigError
from trtbench.spec.bench import LoadtestSpec
from trtbench.spec.design import resolve_design
from trtbench.spec.report import ReportSpec


def test_auto_is_the_budget_s_rounds_with_stopping():
    spec = LoadtestSpec.model_validate({"rounds": "auto", "budget": {"max_rounds": 8}})
    assert spec.repeats == 8 and spec.stop_when_decided
    assert LoadtestSpec.model_validate({"repeats": "auto"}).repeats == 12  # default
    fixed = LoadtestSpec.model_validate({"rounds": 3})
    assert fixed.repeats == 3 and not fixed.stop_when_decided
    # a spec written back (run.json) reads the same
    again = LoadtestSpec.model_validate(spec.model_dump())
    assert again.repeats == 8 and again.stop_when_decided


def test_a_budget_below_three_rounds_is_refused():
    with pytest.raises(ValueError, match="max_rounds"):
        LoadtestSpec.model_validate({"rounds": "auto", "budget": {"max_rounds": 2}})


def _spec(design: str, objective: str = "output_tok_s", co_resident: bool = True):
    loadtest = LoadtestSpec.model_validate({"rounds": "auto", "design": design})
    return SimpleNamespace(
        loadtest=loadtest,
        deploy=SimpleNamespace(co_resident=co_resident),
        report=ReportSpec(objective=objective),
    )


def test_auto_rounds_resolve_to_a_race_in_the_interleaved_design():
    design = resolve_design(_spec("interleaved"), [])
    assert design.stop_when_decided and design.rounds == 12
    assert design.as_json()["stopping"] == {
        "rule": "race",
        "max_rounds": 12,
        "max_minutes": None,
    }


@pytest.mark.parametrize(
    "design, objective, co, needle",
    [
        ("rounds", "output_tok_s", True, "give loadtest.rounds a number"),
        ("auto", "output_tok_s", False, "this run is rounds"),
        ("interleaved", "tpot_p50", True, "report.objective is tpot_p50"),
    ],
)
def test_auto_rounds_are_refused_where_no_race_can_run(design, objective, co, needle):
    with pytest.raises(ConfigError, match=needle):
        resolve_design(_spec(design, objective, co), [])


def test_the_equivalence_margin_is_a_fraction():
    assert ReportSpec().equivalence_margin == 0.05
    with pytest.raises(ValueError):
        ReportSpec(equivalence_margin=5)


def test_a_spec_without_rounds_races_where_it_can_and_measures_one_round_elsewhere():
    plain = LoadtestSpec.model_validate({})
    assert plain.stop_when_decided and plain.rounds_by_default and plain.repeats == 12
    race = resolve_design(
        SimpleNamespace(
            loadtest=plain,
            deploy=SimpleNamespace(co_resident=True),
            report=ReportSpec(),
        ),
        [],
    )
    assert race.stop_when_decided and race.rounds == 12 and race.no_race is None
    # the rounds design (servers not co-resident): no race, one round, and why
    one = resolve_design(
        SimpleNamespace(
            loadtest=plain,
            deploy=SimpleNamespace(co_resident=False),
            report=ReportSpec(),
        ),
        [],
    )
    assert (one.name, one.rounds, one.stop_when_decided) == ("rounds", 1, False)
    assert "restarts servers" in one.as_json()["no_race"]
    # another objective: the same
    tpot = resolve_design(
        SimpleNamespace(
            loadtest=plain,
            deploy=SimpleNamespace(co_resident=True),
            report=ReportSpec(objective="tpot_p50"),
        ),
        [],
    )
    assert (tpot.rounds, tpot.stop_when_decided) == (1, False)
    assert "objective is tpot_p50" in tpot.no_race


def test_rounds_are_given_once_auto_in_any_case_and_a_budget_only_for_auto():
    with pytest.raises(
        ValueError, match="give rounds or repeats .the same field., not both"
    ):
        LoadtestSpec.model_validate({"rounds": 3, "repeats": 3})
    assert LoadtestSpec.model_validate({"rounds": "AUTO"}).stop_when_decided
    with pytest.raises(
        ValueError, match="budget applies to rounds: auto, and rounds is 3"
    ):
        LoadtestSpec.model_validate({"rounds": 3, "budget": {"max_rounds": 6}})
    # a fixed spec written back (run.json: the default budget beside it) reads the same
    fixed = LoadtestSpec.model_validate({"repeats": 3})
    assert LoadtestSpec.model_validate(fixed.model_dump()).repeats == 3
