"""Several served models load-tested side by side in time: the ``interleaved`` design.

Every variant's server is up (``deploy.co_resident``); one event loop holds one
:class:`~trtbench.profiling.loadtest.driver.runner.TierRunner` per variant (its own transport,
record sink and health watcher) and runs the run's cells one at a time, in the order of
:func:`~trtbench.profiling.loadtest.workload.design.plan_cells`: round r, tier t, variant v. Only one
cell sends at a time, so the servers never compete for the machine while measured; the
variants of a tier run back to back, seconds apart.

Each variant is warmed up first (its ``warmup_requests``, not recorded). A server that dies
stops its own runner (its tier is ``partial``/``failed`` as in a one-server run; each of its
later cells is a pass that was not measured, so none of its tiers reads complete) while the
others go on; a stop signal stops every runner (the cell in
progress is ``interrupted``) and no later cell runs. The event-loop lag is sampled once for
the loop and attributed to the cell that was running.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from trtbench.core.errors import LoadTestError
from trtbench.core.stop_signals import loop_stop_handlers
from trtbench.profiling.loadtest.clients.health import HealthCheck
from trtbench.profiling.loadtest.clients.target import (
    LoadSettings,
    LoadTarget,
    Progress,
)
from trtbench.profiling.loadtest.driver.round_plans import FixedPlan, RoundPlan
from trtbench.profiling.loadtest.driver.runner import GIL_SWITCH_S, TierRunner
from trtbench.profiling.loadtest.driver.tier_pass import opened, run_pass, warm_up
from trtbench.profiling.loadtest.records.cell_tally import CellTally
from trtbench.profiling.loadtest.records.loop_lag import LagHistogram, sample_loop_lag
from trtbench.profiling.loadtest.records.outcome import LoadResult
from trtbench.profiling.loadtest.records.record_sink import RecordSink
from trtbench.profiling.loadtest.workload.design import Cell
from trtbench.profiling.loadtest.workload.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.workload.repeats import TierPass, merge_passes
from trtbench.profiling.loadtest.workload.schedule import Tier


@dataclass(frozen=True)
class Lane:
    """One served variant of an interleaved run.

    Attributes:
        variant: its name (written into every record).
        target: where and how to send (a probed model).
        sink: receives its records as each request ends.
        tokenizer: for a model that returns only text (re-tokenization).
        progress: its tier progress (the pipeline marks its samplers there).
        health: its server's blocking health check (None: the transport's readiness).
    """

    variant: str
    target: LoadTarget
    sink: RecordSink
    tokenizer: TextTokenizer | None = None
    progress: Progress | None = None
    health: HealthCheck | None = None


async def _drive(
    runners: dict[str, TierRunner],
    lanes: Sequence[Lane],
    plan: RoundPlan,
    tallies: dict[str, CellTally],
    tiers: Sequence[Tier],
    seed: int,
) -> int | None:
    """Open every lane, warm each up, run the cells; returns the stop signal, if any."""
    stopped: list[int] = []

    def on_signal(signum: int) -> None:
        stopped.append(signum)
        for runner in runners.values():
            runner.on_signal(signum)

    loop = asyncio.get_running_loop()
    lag = LagHistogram()
    for runner in runners.values():
        runner.lag = lag  # one loop, one sampler: each pass pops its own share
    with loop_stop_handlers(loop, on_signal):
        async with contextlib.AsyncExitStack() as stack:
            for lane in lanes:
                runner = runners[lane.variant]
                await stack.enter_async_context(opened(runner, tiers, lane.health))
            sampler = asyncio.ensure_future(sample_loop_lag(lag))
            try:
                for lane in lanes:
                    await warm_up(runners[lane.variant], lane.variant, tiers)
                while not stopped and (batch := plan.next_round()):
                    for cell in batch:
                        if stopped:
                            break
                        one_pass = TierPass(cell.round, cell.tier_index, cell.tier)
                        await run_pass(
                            runners[cell.variant],
                            cell.variant,
                            one_pass,
                            seed,
                            len(tiers),
                        )
                        figure = tallies[cell.variant].tokens_per_s(
                            cell.tier.label, cell.round
                        )
                        plan.cell_done(cell, figure)
            finally:
                sampler.cancel()
    return stopped[0] if stopped else None


def run_interleaved(
    lanes: Sequence[Lane],
    prompts: Sequence[Prompt],
    tiers: Sequence[Tier],
    settings: LoadSettings,
    cells: Sequence[Cell] | RoundPlan,
    seed: int = 0,
) -> dict[str, LoadResult]:
    """Run ``cells`` against the lanes' servers, one cell at a time (module docstring).

    Args:
        lanes: one per variant named in ``cells``.
        prompts: used in order, cycling; the same for every variant and cell.
        tiers: the spec's tiers (a cell's ``tier_index`` points here).
        settings: per-tier size, warmup, timeout, arrival process (``repeats`` = rounds).
        cells: the run's order (:func:`~trtbench.profiling.loadtest.workload.design.plan_cells`),
            or a :class:`~trtbench.profiling.loadtest.driver.round_plans.RoundPlan` that
            hands out the cells round by round (a race, ``loadtest.rounds: auto``).
        seed: the load test's seed (open-loop arrivals of round r at tier i:
            ``seed + i + r · len(tiers)``, the same for every variant).

    Returns:
        Variant → its :class:`LoadResult` (one outcome per tier in ``tiers`` order, passes
        merged; a stop signal is recorded in every variant's result).

    Raises:
        LoadTestError: no prompts, a text-only model without a tokenizer, or every warmup
            request of a variant failed.
        ValueError: a cell names a variant without a lane.
    """
    if not prompts:
        raise LoadTestError("no prompts to send; give a dataset or synthetic lengths")
    names = {lane.variant for lane in lanes}
    plan = FixedPlan(cells) if isinstance(cells, Sequence) else cells
    if isinstance(cells, Sequence) and (
        missing := sorted({c.variant for c in cells} - names)
    ):
        raise ValueError(f"cells name variants without a served model: {missing}")
    runners, tallies = {}, {}
    for lane in lanes:
        if not lane.target.interface.returns_ids and lane.tokenizer is None:
            raise LoadTestError(
                f"model {lane.target.interface.name!r} returns text without token ids; "
                "give its tokenizer so the text can be re-tokenized"
            )
        tallies[lane.variant] = CellTally(lane.sink)
        runners[lane.variant] = TierRunner(
            lane.target,
            prompts,
            settings,
            lane.tokenizer,
            lane.progress,
            tallies[lane.variant],
        )
    switch = sys.getswitchinterval()
    sys.setswitchinterval(
        min(switch, GIL_SWITCH_S)
    )  # as run_load: samplers are threads
    try:
        asyncio.run(_drive(runners, lanes, plan, tallies, tiers, seed))
    finally:
        sys.setswitchinterval(switch)
    rank = {tier.label: i for i, tier in enumerate(tiers)}
    for runner in runners.values():
        merged = merge_passes(runner.result.tiers)
        runner.result.tiers = sorted(merged, key=lambda o: rank.get(o.tier, len(rank)))
    return {name: runner.result for name, runner in runners.items()}
