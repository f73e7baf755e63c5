"""The race of a ``rounds: auto`` run, made from the run's one context value
(:class:`~trtbench.pipeline.context.RunContext`): it races the context's variants only, keeps
to the (variant, tier) pairs of its cells, writes its order into the context's run directory
and reports its bound to the context's progress.

The spec: three variants, tiers c1 and c4, a budget of 5 rounds; the run selects ``base`` and
``b`` (not ``a``), ``base`` at both tiers and ``b`` at c4 only (as a follow-up measures each
best variant where it was best). So the race may hand out (base, c1), (base, c4) and (b, c4),
nothing else.
"""

from __future__ import annotations

from trtbench.core.run_dir import RunDir
from trtbench.pipeline.context import RunContext
from trtbench.pipeline.measuring import plan_design, race_plan
from trtbench.pipeline.serving import Collected
from trtbench.spec.bench import parse_spec

SPEC = """
name: ctx
backend: reference
models: {target: /models/target}
variants:
  - {name: base, mode: baseline}
  - {name: a, mode: ngram, max_draft_len: 3}
  - {name: b, mode: ngram, max_draft_len: 2}
loadtest:
  concurrency: [1, 4]
  rounds: auto
  budget: {max_rounds: 5}
"""


class Totals:
    """A run progress that keeps what ``retotal`` was told."""

    def __init__(self) -> None:
        self.totals: list[tuple[int, bool]] = []

    def start(self, stage: str, total: int, unit: str, at_most: bool = False) -> None:
        pass

    def advance(self, label: str) -> None:
        pass

    def retotal(
        self, total: int, at_most: bool, seconds_left: float | None = None
    ) -> None:
        self.totals.append((total, at_most))

    def stop(self) -> None:
        pass


def test_the_race_reads_variants_cells_run_dir_and_progress_from_the_context(tmp_path):
    spec = parse_spec(SPEC)
    selected = spec.select(("base", "b"))
    design, cells = plan_design(spec, selected, {"base": ["c1", "c4"], "b": ["c4"]})
    progress = Totals()
    rd = RunDir(tmp_path)
    ctx = RunContext(
        rd, spec, tuple(selected), design, tuple(cells), progress, Collected()
    )
    record: dict = {}
    plan = race_plan(ctx, record)
    handed = []
    while batch := plan.next_round():
        handed += batch
        for c in batch:  # b clearly ahead of base at c4: decided at the first look
            plan.cell_done(c, 150.0 if c.variant == "b" else 100.0)

    assert design.stop_when_decided
    assert {(c.variant, c.tier.label) for c in handed} == {
        ("base", "c1"),
        ("base", "c4"),
        ("b", "c4"),
    }
    order = [[c.round, c.tier.label, c.variant] for c in handed]
    assert rd.read_run_json()["design"]["order"] == order
    assert progress.totals[-1] == (len(handed), False)  # the race over: exact
