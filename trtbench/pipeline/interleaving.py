"""The interleaved design's servers: every variant's server up at once while the cells run,
one set for the whole run or (``loadtest.restart_every``) a fresh set per block of rounds
(docs/measurement.md, "Server instances").

A block's servers start side by side — all at once, a thread each; when no prompts were
given, the first block's first server alone (it makes them), then the others; one after
another under nsys — and stop side by side. A block's servers are signalled to stop as its
last cell ends and the next block's start at once: the old ones unload (about 2 s each of
waiting, little CPU) while the new ones load, and are waited for once the new ones are up,
before the next cell runs, so no cell is measured beside a server that is not its own. The
records of every block stream into the same files (the first block starts them afresh) and
the results of the blocks are merged per variant. A race (``rounds: auto``) decides before a
block's servers start and starts only the variants it still measures
(:class:`~trtbench.profiling.loadtest.driver.round_plans.InstanceBlocks`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trtbench.pipeline.context import RunContext
from trtbench.pipeline.loadtest import record_files, settings_of, tiers_of
from trtbench.pipeline.serving import Served, served
from trtbench.pipeline.stages import DEPLOY
from trtbench.profiling.loadtest.driver.interleave import Lane, run_interleaved
from trtbench.profiling.loadtest.driver.round_plans import (
    InstanceBlocks,
    RacePlan,
    RoundByRound,
    RoundPlan,
)
from trtbench.profiling.loadtest.records.record_sink import CsvRecordSink
from trtbench.profiling.loadtest.workload.design import Cell
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.repeats import combine_results
from trtbench.spec.bench import VariantSpec

log = logging.getLogger(__name__)


def serve_interleaved(
    ctx: RunContext,
    cells: Sequence[Cell] | RacePlan,
    prompts: list[Prompt] | None,
    stage: tuple[str, int, str, bool],
) -> None:
    """Measure ``cells`` (or a race) of ``ctx.variants`` in the interleaved design (module
    docstring); results, samples and timings go to ``ctx.got``.

    Args:
        ctx: the run (:class:`~trtbench.pipeline.context.RunContext`); ``ctx.nsys``: the
            first block's servers only.
        cells: the fixed design's cells, or the race.
        prompts: the preflight's prompts (None: made from the first variant's tokenizer).
        stage: the load test's progress stage (started once the first block is up).

    Raises:
        DeployError, ServerStartError, LoadTestError, ConfigError: a server could not be
            deployed, started or measured (what finished is kept in ``ctx.got``).
    """
    every = ctx.spec.loadtest.restart_every
    if every is None:  # one set of servers for the whole run
        _serve_block(ctx, ctx.variants, cells, prompts, ctx.nsys, stage)[1].close()
        return
    blocks = InstanceBlocks(
        cells if isinstance(cells, RacePlan) else RoundByRound(cells), every
    )
    first = True
    got = ctx.got
    # The last block's servers, signalled but not yet waited for (module docstring).
    retiring = contextlib.ExitStack()
    with retiring:
        while blocks.start_block():
            names = set(blocks.variants)
            mine = [v for v in ctx.variants if v.name in names]
            if not first:
                log.info(
                    "fresh servers for rounds from %d: %s",
                    blocks.first_round,
                    ", ".join(blocks.variants),
                )
            prompts, retiring = _serve_block(
                ctx,
                mine,
                blocks,
                prompts,
                ctx.nsys if first else None,
                stage if first else None,
                retiring,
            )
            if any(
                got.results[v.name].interrupted for v in mine if v.name in got.results
            ):
                break
            first = False
        retiring.close()


def _start_at_once(
    stack: contextlib.ExitStack,
    ctx: RunContext,
    variants: Sequence[VariantSpec],
    prompts: list[Prompt] | None,
) -> list[Served]:
    """Start ``variants``' servers at once (a thread each; their prompts are known) and
    register each started one on ``stack``, so that a failed start, or a signal while
    waiting, stops those that did start.

    Returns:
        The served variants, in ``variants`` order.

    Raises:
        The first start's error (DeployError, ServerStartError, …), after every start
        has ended.
    """
    entered: dict[str, tuple[Any, Served]] = {}

    def start(v: VariantSpec) -> None:
        cm = served(ctx, v, prompts)
        entered[v.name] = (cm, cm.__enter__())

    errors: list[BaseException | None] = []
    try:
        with ThreadPoolExecutor(max_workers=len(variants) or 1) as pool:
            errors = [f.exception() for f in [pool.submit(start, v) for v in variants]]
    finally:
        for v in variants:
            if v.name in entered:
                stack.push(entered[v.name][0])
    for error in errors:
        if error is not None:
            raise error
    return [entered[v.name][1] for v in variants]


def _start_block(
    stack: contextlib.ExitStack,
    ctx: RunContext,
    variants: Sequence[VariantSpec],
    prompts: list[Prompt] | None,
    nsys: Path | None,
    stage: tuple[str, int, str, bool] | None,
) -> list[Served]:
    """The block's servers, started and registered on ``stack``: all at once; when no
    prompts were given, the first server alone (it makes them), then the others; one after
    another under nsys. The deploy stage counts each (the first block)."""
    progress = ctx.progress
    first: list[Served] = []
    if variants and (prompts is None or nsys is not None):
        first = [stack.enter_context(served(ctx, variants[0], prompts, nsys))]
        prompts = first[0].prompts
        if progress is not None and stage is not None:
            progress.advance(variants[0].name)
    rest = variants[len(first) :]
    if nsys is not None:
        others = [stack.enter_context(served(ctx, v, prompts, nsys)) for v in rest]
    else:
        others = _start_at_once(stack, ctx, rest, prompts)
    if progress is not None and stage is not None:
        for v in rest:
            progress.advance(v.name)
    return first + others


def _serve_block(
    ctx: RunContext,
    variants: Sequence[VariantSpec],
    cells: Sequence[Cell] | RoundPlan,
    prompts: list[Prompt] | None,
    nsys: Path | None,
    stage: tuple[str, int, str, bool] | None,
    retiring: contextlib.ExitStack | None = None,
) -> tuple[list[Prompt] | None, contextlib.ExitStack]:
    """Start ``variants``' servers side by side (under ``nsys``, if given), wait for the
    ``retiring`` servers of the last block to exit, run ``cells``, signal the servers to
    stop; results merged into ``ctx.got``. ``stage``: the load test's progress stage,
    started here (the first block; None: a later block, which appends to the records and
    the stage).

    Returns:
        The prompts, and this block's servers (signalled to stop; closing the stack waits
        for them). On an error every server of both blocks is stopped before it propagates.
    """
    spec, progress, got = ctx.spec, ctx.progress, ctx.got
    with contextlib.ExitStack() as servers:
        if retiring is not None:
            servers.enter_context(retiring)
        with contextlib.ExitStack() as stack:
            lanes, stops = [], []
            if progress is not None and stage is not None:
                progress.start(DEPLOY, len(variants), "server")
            up = _start_block(servers, ctx, variants, prompts, nsys, stage)
            if retiring is not None:
                retiring.close()  # the last block's servers: exited while these loaded
            for v, s in zip(variants, up, strict=True):
                stops.append(s.stop_soon)
                prompts = s.prompts
                files = record_files(ctx.rd, v.name)
                if stage is not None:
                    for path in (files.requests, files.responses, files.outputs):
                        path.unlink(missing_ok=True)
                sink = stack.enter_context(CsvRecordSink(files))
                lanes.append(
                    Lane(v.name, s.target, sink, s.tokenizer, s.marking, s.health)
                )
            # First when the stack unwinds: every server is signalled before any is
            # waited for, so they shut down side by side.
            for stop in stops:
                stack.callback(stop)
            if progress is not None and stage is not None:
                progress.start(*stage)
            results = run_interleaved(
                lanes,
                prompts or [],
                tiers_of(spec.loadtest),
                settings_of(spec.loadtest),
                cells,
                spec.loadtest.seed,
            )
        for name, result in results.items():
            earlier = got.results.get(name)
            got.results[name] = (
                result if earlier is None else combine_results(earlier, result)
            )
        return prompts, servers.pop_all()
