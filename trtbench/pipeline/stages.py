"""How ``trtbench run`` and ``trtbench follow-up`` report their stages: each stage (the builds,
the server starts, the load test's cells) has a total and advances one item at a time.

The pipeline says what happened, never how it is shown: the CLI draws one line per stage from
these calls (``trtbench.commands.stage_lines``); what each item measured goes to the run's log
(``RUN_DIR/trtbench.log``), not through here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

BUILD, DEPLOY, LOAD_TEST = "build", "deploy", "load test"
"""The stages of a run, in order (the ``rounds`` and ``sequential`` designs start servers
inside the load test: no deploy stage of their own)."""
CELL = "cell"
"""The load test's unit: a race's totals count cells (:meth:`RunProgress.retotal`)."""


class RunProgress(Protocol):
    """Receives a run's stages (the CLI: one live line per stage)."""

    def start(self, stage: str, total: int, unit: str, at_most: bool = False) -> None:
        """A stage begins (ending the one before): ``total`` items of ``unit`` (``cell``);
        ``at_most``: ``total`` is an upper bound (rounds by need may stop early)."""
        ...

    def advance(self, label: str) -> None:
        """One more item of the stage is done; ``label`` names it (``round 3 · c4
        medusa``)."""
        ...

    def retotal(
        self, total: int, at_most: bool, seconds_left: float | None = None
    ) -> None:
        """The stage's total is now ``total`` cells (a race dropped cells, or ended); a
        stage counting other units ignores it (a race with fresh servers per block is
        planned before the load test's stage starts, while the build's is current).
        ``seconds_left``: the time budget's bound on the stage's remaining seconds
        (``RacePlan.seconds_left``; None: none)."""
        ...

    def stop(self) -> None:
        """The stage ended (finished, or stopped early)."""
        ...


@dataclass(frozen=True)
class Prefixed:
    """``inner`` with every stage named ``<prefix> · <stage>`` (the follow-up's stages)."""

    inner: RunProgress
    prefix: str

    def start(self, stage: str, total: int, unit: str, at_most: bool = False) -> None:
        self.inner.start(f"{self.prefix} · {stage}", total, unit, at_most)

    def advance(self, label: str) -> None:
        self.inner.advance(label)

    def retotal(
        self, total: int, at_most: bool, seconds_left: float | None = None
    ) -> None:
        self.inner.retotal(total, at_most, seconds_left)

    def stop(self) -> None:
        self.inner.stop()


def prefixed(progress: RunProgress | None, prefix: str) -> RunProgress | None:
    """``progress`` with its stages named after ``prefix`` (None stays None)."""
    return None if progress is None else Prefixed(progress, prefix)


def load_test_stage(rounds: int, by_need: bool) -> str:
    """The load test's stage name with its rounds: ``load test, ≤ 8 rounds`` by need
    (``rounds``: the budget), ``load test, 3 rounds``, ``load test`` for one round."""
    if rounds <= 1 and not by_need:
        return LOAD_TEST
    return f"{LOAD_TEST}, {'≤ ' if by_need else ''}{rounds} round{'s' * (rounds != 1)}"


def cell_label(variant: str, tier: str, round_index: int) -> str:
    """A cell as the progress names it: ``round 3 · c4 medusa`` (``round_index`` 0-based)."""
    return f"round {round_index + 1} · {tier} {variant}"
