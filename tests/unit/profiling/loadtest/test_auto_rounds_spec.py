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
