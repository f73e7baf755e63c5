"""``trtbench calibrate``: measure the target's step time T(B, q) and the launch costs on this
device (torch only), for ``trtbench plan --calibration``."""

from __future__ import annotations

from pathlib import Path

import click

from trtbench.commands.plan import parse_int_list
from trtbench.plan.calibrate_run import CalibrateSettings, run_calibration
from trtbench.plan.model_shapes import model_preset_names


@click.command("calibrate")
@click.option(
    "--model",
    required=True,
    help=f"Dense Llama-shaped target: a preset ({model_preset_names()}) or a HF "
    "config.json / model dir. Random weights: no checkpoint is read.",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Calibration file to write (JSON; docs/planner.md).",
)
@click.option(
    "--batch",
    "batches",
    default="1,2,4,8,16,32,64",
    show_default=True,
    callback=parse_int_list,
    help="Batch sizes B, ascending from 1.",
)
@click.option(
    "--query",
    "queries",
    default="1,2,4,8,16",
    show_default=True,
    callback=parse_int_list,
    help="New tokens per sequence q (1: a decode step; K+1: a verify), ascending from 1.",
)
@click.option(
    "--context",
    default=1024,
    show_default=True,
    type=int,
    help="KV tokens cached per sequence before the new ones.",
)
@click.option(
    "--device",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "cuda", "cpu"]),
    help="Where to measure (auto: CUDA when torch sees a GPU; CPU runs float32, eager).",
)
@click.option(
    "--warmup", default=3, show_default=True, type=int, help="Untimed passes per shape."
)
@click.option(
    "--repeats", default=5, show_default=True, type=int, help="Timed repeats per shape."
)
@click.option(
    "--min-repeat-ms",
    default=20.0,
    show_default=True,
    type=float,
    help="Passes per repeat are chosen so one repeat lasts about this long.",
)
def calibrate(**params: object) -> None:
    """Time one forward pass of a random-init model of --model's shape over B x q.

    bf16, a static KV cache, CUDA graphs and CUDA events on a GPU (float32 and perf_counter on
    CPU), warm-up at every shape, the median of --repeats with min..max; plus the eager
    launch, graph launch and per-node costs, no profiler attached.

    \b
    Example:
      trtbench calibrate --model llama-3-8b --out cal-8b.json
      trtbench plan --model llama-3-8b --gpu h200 --eagle3 default --calibration cal-8b.json
    """
    cal, path = run_calibration(CalibrateSettings(**params))  # type: ignore[arg-type]
    b, q = cal.batches, cal.queries
    click.echo(
        f"calibration of {len(b)} x {len(q)} shapes on {cal.device} written to {path}; "
        f"T(1,1) = {cal.step_ms[0][0]:.3f} ms, T({b[-1]},{q[-1]}) = "
        f"{cal.step_ms[-1][-1]:.3f} ms"
    )
