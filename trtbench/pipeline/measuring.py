"""The measuring stage of ``trtbench run`` and ``trtbench follow-up``: every variant's tiers, in
the run's design (:mod:`trtbench.profiling.loadtest.workload.design`, chosen by
:func:`trtbench.spec.design.resolve_design`).

* ``interleaved``: every variant's server is started, then the cells run one at a time over
  all of them; the servers stop at the end, together — or, with ``loadtest.restart_every``,
  after every block of rounds, fresh ones starting for the next
  (:mod:`trtbench.pipeline.interleaving`).
* ``rounds``: round by round, each variant served in the round's order, its passes of that
  round run, its server stopped (``variants × rounds`` server starts, announced before).
* ``sequential``: each variant served once, all its passes in a row.

The plan is written to run.json ``design`` before the first server starts: the design, rounds,
whether the servers were co-resident, server starts and the order of the cells
(``[[round, tier, variant], …]``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from trtbench.pipeline.context import RunContext
from trtbench.pipeline.interleaving import serve_interleaved
from trtbench.pipeline.loadtest import tiers_of
from trtbench.pipeline.serving import measure_variant
from trtbench.pipeline.stages import CELL, load_test_stage
from trtbench.profiling.loadtest.driver.round_plans import (
    RacePlan,
)
from trtbench.profiling.loadtest.stats.decisions import LookSchedule
from trtbench.profiling.loadtest.workload.design import (
    DESIGN_TEXT,
    INTERLEAVED,
    ROUNDS,
    Cell,
    order_json,
    plan_cells,
    rounds_of,
    server_starts,
)
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.repeats import (
    MIN_ROUNDS,
    TierPass,
)
from trtbench.spec.bench import BenchSpec, VariantSpec
from trtbench.spec.design import ResolvedDesign, resolve_design

log = logging.getLogger(__name__)


def plan_design(
    spec: BenchSpec,
    variants: Sequence[VariantSpec],
    tiers_of_variant: Mapping[str, Sequence[str]] | None = None,
) -> tuple[ResolvedDesign, list[Cell]]:
    """The run's design and its cells (checked before anything is built).

    Args:
        spec: the bench spec.
        variants: the variants to measure, in spec order.
        tiers_of_variant: variant → the tier labels it measures (default: every tier).

    Raises:
        ConfigError: a design the variants cannot have (:func:`resolve_design`).
    """
    design = resolve_design(spec, variants)
    cells = plan_cells(
        design.name,
        [v.name for v in variants],
        tiers_of(spec.loadtest),
        design.rounds,
        spec.loadtest.seed,
        tiers_of_variant,
    )
    return design, cells


def design_line(design: ResolvedDesign, variants: int, spec: BenchSpec) -> str:
    """What the terminal says before the first server starts (with the spec's
    server-instance term: ``loadtest.instance_sd``, ``restart_every``)."""
    every = _restart_every(design, spec)
    starts = server_starts(design.name, variants, design.rounds, every)
    if every and every > 1 and design.stop_when_decided:
        starts = f"up to {starts}"
    rounds = f"{design.rounds} round(s)"
    if design.stop_when_decided:
        minutes = f" or {design.max_minutes:g} min" if design.max_minutes else ""
        rounds = (
            f"rounds by need (budget: {design.rounds} rounds{minutes}; a variant clearly "
            "behind a tier's leader stops there, the run ends when every comparison is "
            "decided)"
        )
    if design.no_race:
        rounds += f" (no race by need: {design.no_race}; give loadtest.rounds a number)"
    sd = spec.loadtest.instance_sd
    fresh = (
        f", fresh servers every {every} round(s)"
        if design.name == INTERLEAVED and every
        else ""
    )
    return (
        f"design {design.name}: {rounds}, {starts} server start(s){fresh}; "
        f"{DESIGN_TEXT[design.name].split(':', 1)[1].strip()}; intervals between variants "
        f"carry a server-instance SD of {sd:.1%} (loadtest.instance_sd)"
    )


def _passes(cells: Sequence[Cell]) -> list[TierPass]:
    return [TierPass(c.round, c.tier_index, c.tier) for c in cells]


def race_plan(ctx: RunContext, record: dict[str, Any]) -> RacePlan:
    """The race of a ``rounds: auto`` run; it rewrites run.json ``design`` (``order``:
    the cells handed out so far; ``stopping``: how the race stands) after every round.
    The race keeps to the (variant, tier) pairs of ``ctx.cells`` (empty: every variant at
    every tier)."""

    told: list[bool] = []
    spec, progress, cells = ctx.spec, ctx.progress, ctx.cells

    def written(plan: RacePlan) -> None:
        record["order"] = order_json(plan.cells)
        record["stopping"] = {**record.get("stopping", {}), **plan.as_json()}
        ctx.rd.update_run_json("design", record)
        log.info("race: %s", round_line(plan))
        if plan.resolution and not told:
            told.append(True)
            log.info("race: %s", resolution_line(plan))
        if progress is not None and (bound := race_bound(plan)) is not None:
            progress.retotal(*bound, seconds_left=plan.seconds_left(time.monotonic()))

    return RacePlan(
        [v.name for v in ctx.variants],
        tiers_of(spec.loadtest),
        spec.loadtest.seed,
        LookSchedule(
            spec.loadtest.budget.max_rounds,
            instance_sd=spec.loadtest.instance_sd,
            restart_every=spec.loadtest.restart_every,
        ),
        spec.report.equivalence_margin,
        spec.loadtest.budget.max_minutes,
        written,
        tiers_of_variant(cells) if cells else None,
    )


def race_bound(plan: RacePlan) -> tuple[int, bool] | None:
    """(cells, whether an upper bound) a race measures: once it is over, the cells it
    handed out; before, those plus the last round's for every round its budget has left (a
    variant that stops at a tier never comes back there). None: no round budget."""
    if plan.stopped_because is not None:
        return len(plan.cells), False
    most = plan.schedule.max_rounds
    if not most:
        return None
    last = sum(c.round == plan.rounds_run - 1 for c in plan.cells)
    return len(plan.cells) + max(0, most - plan.rounds_run) * last, True


def tiers_of_variant(cells: Sequence[Cell]) -> dict[str, list[str]]:
    """Variant → the tier labels it has cells at."""
    out: dict[str, list[str]] = {}
    for c in cells:
        if c.tier.label not in out.setdefault(c.variant, []):
            out[c.variant].append(c.tier.label)
    return out


def resolution_line(plan: RacePlan) -> str:
    """What the budget can resolve, per tier, from the first look's spread: ``budget 8
    rounds resolves (from 3 rounds' spread): c1 ±3.1–12.0 %; c2 ±2.5 %``."""
    parts = []
    for label, by_variant in plan.resolution.items():
        pct = sorted(100 * (r - 1) for r in by_variant.values())
        if pct:
            span = f"{pct[0]:.1f}" + (
                f"–{pct[-1]:.1f}" if pct[-1] > pct[0] + 0.05 else ""
            )
            parts.append(f"{label} ±{span} %")
    most = plan.expected_rounds or plan.schedule.max_rounds
    how = ""
    if plan.max_minutes is not None and most != plan.schedule.max_rounds:
        how = f" (what {plan.max_minutes:g} min hold at the pace so far)"
    return (
        f"budget {most} rounds{how} resolves (from the spread of the first "
        f"{MIN_ROUNDS} rounds, leader vs each other variant): "
        + ("; ".join(parts) or "nothing yet")
    )


def round_line(plan: RacePlan) -> str:
    """One line: rounds run and, per tier, the variants still measured."""
    tiers = "; ".join(
        f"{label} {', '.join(race.active) if race.active else 'settled'}"
        for label, race in plan.races.items()
    )
    why = f", stopped: {plan.stopped_because}" if plan.stopped_because else ""
    return f"{plan.rounds_run} round(s){why}" + (f"; {tiers}" if tiers else "")


def _restart_every(design: ResolvedDesign, spec: BenchSpec) -> int | None:
    """Rounds per set of server processes: ``loadtest.restart_every`` when interleaved,
    1 for the ``rounds`` design (every round starts its servers), None (one set) for
    ``sequential``."""
    if design.name == INTERLEAVED:
        return spec.loadtest.restart_every
    return 1 if design.name == ROUNDS else None


def measure_variants(ctx: RunContext, prompts: list[Prompt] | None) -> dict[str, Any]:
    """Measure ``ctx.variants`` in ``ctx.design``; results, samples and cell timings go to
    ``ctx.got`` (module docstring).

    Args:
        ctx: the run (:class:`~trtbench.pipeline.context.RunContext`); ``ctx.nsys``: each
            server under its own session (with ``rounds`` the first round's servers only).
        prompts: the preflight's prompts (None: made from the first variant's tokenizer).

    Returns:
        run.json's ``design`` record (also written there before the first server starts).

    Raises:
        ConfigError, DeployError, ServerStartError, LoadTestError: as
            :func:`~trtbench.pipeline.serving.measure_variant` (what finished is kept in
            ``ctx.got``).
    """
    spec, variants, design, cells = ctx.spec, ctx.variants, ctx.design, ctx.cells
    got, progress = ctx.got, ctx.progress
    record = {
        **design.as_json(),
        "server_starts": server_starts(
            design.name, len(variants), design.rounds, _restart_every(design, spec)
        ),
        "seed": spec.loadtest.seed,
        "instance": {
            "sd": spec.loadtest.instance_sd,
            "restart_every": _restart_every(design, spec),
        },
        "output_length": "fixed" if spec.loadtest.fixed_output_len else "natural",
        "order": order_json(cells),
    }
    ctx.rd.update_run_json("design", record)
    log.info("%s", design_line(design, len(variants), spec))
    stage = (
        load_test_stage(design.rounds, design.stop_when_decided),
        len(cells),
        CELL,
        design.stop_when_decided,
    )
    if design.name == INTERLEAVED:
        if design.stop_when_decided:
            record["order"] = []
            serve_interleaved(ctx, race_plan(ctx, record), prompts, stage)
            return record
        serve_interleaved(ctx, cells, prompts, stage)
        return record
    if progress is not None:  # its servers start inside the load test
        progress.start(*stage)
    by_name = {v.name: v for v in variants}
    if design.name == ROUNDS:
        for r in range(design.rounds):
            for name in dict.fromkeys(c.variant for c in cells if c.round == r):
                mine = rounds_of(cells, name)[r]
                nsys = ctx.nsys if r == 0 else None
                prompts = measure_variant(
                    ctx, by_name[name], prompts, nsys, _passes(mine)
                )
                if got.results[name].interrupted:
                    return record
        return record
    for v in variants:  # sequential
        mine = [c for c in cells if c.variant == v.name]
        prompts = measure_variant(ctx, v, prompts, ctx.nsys, _passes(mine))
        if got.results[v.name].interrupted:
            break
        if (
            got.results[v.name].server_failure is not None
        ):  # the next has its own server
            log.info("%s: %s", v.name, got.results[v.name].server_failure)
    return record
