"""What every stage of one ``trtbench run`` (or follow-up stage) needs, as one value.

:func:`~trtbench.pipeline.run.run_bench` builds a :class:`RunContext` once the variants are
built and hands it to the measuring stage (:mod:`trtbench.pipeline.measuring`), which hands
it on to the designs (:mod:`trtbench.pipeline.interleaving`) and to each server
(:func:`~trtbench.pipeline.serving.served`). Nothing in it changes while the run lasts; what
the run measures goes into ``got``, the one mutable store it points to. Values that do change
stay arguments: the prompts (made by the first server when the preflight gave none), the
variants of one block of servers, and nsys (the first block's or round's servers only).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trtbench.core.run_dir import RunDir
from trtbench.pipeline.stages import RunProgress
from trtbench.profiling.loadtest.workload.design import Cell
from trtbench.spec.bench import BenchSpec, VariantSpec
from trtbench.spec.design import ResolvedDesign

if TYPE_CHECKING:  # serving builds on this module
    from trtbench.pipeline.serving import Collected


@dataclass(frozen=True)
class RunContext:
    """One run as its stages see it (module docstring).

    Attributes:
        rd: the run directory.
        spec: the validated bench spec (every variant, in spec order).
        variants: the variants measured, in spec order (``spec.select``).
        design: the run's design (:func:`~trtbench.pipeline.measuring.plan_design`).
        cells: the design's cells, in run order (a race hands out its own as it goes).
        progress: where the stages are reported (None: nowhere).
        got: what the run produced so far (results, samples, cell timings); kept when a
            later variant fails.
        nsys: the nsys executable (``profile.nsys``), None without it.
    """

    rd: RunDir
    spec: BenchSpec
    variants: tuple[VariantSpec, ...]
    design: ResolvedDesign
    cells: tuple[Cell, ...]
    progress: RunProgress | None
    got: Collected
    nsys: Path | None = None
