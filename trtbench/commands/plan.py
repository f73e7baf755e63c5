"""``trtbench plan``: predict draft-target vs Medusa vs baseline before building anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import click
from click_option_group import optgroup
from pydantic import ValidationError

from trtbench.plan.settings import DType, KvDType, PlanSettings, run_plan
from trtbench.plan.text import render_plan


def parse_int_list(
    ctx: click.Context, param: click.Parameter, value: str
) -> tuple[int, ...]:
    """``"1,8,16"`` → ``(1, 8, 16)``; each value must be an integer >= 1."""
    try:
        values = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a comma-separated list of integers"
        ) from None
    if not values or min(values) < 1:
        raise click.BadParameter(f"{value!r}: every value must be an integer >= 1")
    return values


def _default(name: str) -> Any:
    """``PlanSettings``' default of ``name``: what the CLI shows and passes is that value."""
    return PlanSettings.model_fields[name].default


def validation_error(exc: ValidationError) -> click.BadParameter:
    """The first pydantic error as a BadParameter naming the option."""
    err = exc.errors()[0]
    option = "--" + str(err["loc"][0]).replace("_", "-") if err["loc"] else "option"
    return click.BadParameter(err["msg"], param_hint=f"'{option}'")


@click.command("plan")
@optgroup.group("Model and hardware")
@optgroup.option(
    "--model",
    help="Target: a preset (llama-3-8b, llama-3.1-70b, llama-3.2-1b, llama-3.2-3b, vicuna-7b), a HF config.json / model dir, or sizes as key=value pairs (params, layers, hidden, kv_heads, head_dim, vocab), e.g. params=8e9,layers=32,….",
)
@optgroup.option(
    "--gpu",
    default=_default("gpu"),
    show_default=True,
    help="h100-sxm, h200, a100-sxm-80gb or l40s.",
)
@optgroup.option(
    "--dtype",
    type=click.Choice(get_args(DType)),
    default=_default("dtype"),
    show_default=True,
    help="Weights and math (fp8: FP8 weights on FP8 tensor cores).",
)
@optgroup.option(
    "--kv-dtype",
    type=click.Choice(get_args(KvDType)),
    default=_default("kv_dtype"),
    show_default=True,
    help="KV-cache element type (auto: as --dtype).",
)
@optgroup.group("Draft model")
@optgroup.option(
    "--draft", help="Draft model, same forms as --model (omit: no draft-target)."
)
@optgroup.option(
    "--draft-len",
    type=int,
    default=_default("draft_len"),
    show_default=True,
    help="Draft tokens per step γ.",
)
@optgroup.option(
    "--alpha",
    type=float,
    default=_default("alpha"),
    show_default=True,
    help="Per-token acceptance α of the draft.",
)
@optgroup.group("Medusa")
@optgroup.option(
    "--medusa-accuracies",
    help="Per-head per-rank accuracies 'a1,a2;b1,b2' (heads split by ';') or a preset: vicuna-7b, vicuna-13b, vicuna-33b (omit: no Medusa).",
)
@optgroup.option(
    "--medusa-cumulative",
    is_flag=True,
    help="The accuracies are cumulative top-k values.",
)
@optgroup.option(
    "--medusa-tree",
    default=_default("medusa_tree"),
    show_default=True,
    help="greedy (best-first from the accuracies), a named tree (mc_sim_7b_63…) or a list of paths.",
)
@optgroup.option(
    "--medusa-nodes",
    type=int,
    default=_default("medusa_nodes"),
    show_default=True,
    help="Nodes of the greedy tree.",
)
@optgroup.option(
    "--medusa-heads", type=int, help="Heads (default: the number of accuracy rows)."
)
@optgroup.option(
    "--medusa-layers",
    type=int,
    default=_default("medusa_layers"),
    show_default=True,
    help="Residual blocks per head.",
)
@optgroup.group("Workload")
@optgroup.option(
    "--concurrency",
    default=",".join(map(str, _default("concurrency"))),
    show_default=True,
    callback=parse_int_list,
    help="Concurrent sequences to predict.",
)
@optgroup.option(
    "--input-len",
    type=int,
    default=_default("input_len"),
    show_default=True,
    help="Prompt tokens.",
)
@optgroup.option(
    "--output-len",
    type=int,
    default=_default("output_len"),
    show_default=True,
    help="Generated tokens.",
)
@optgroup.option(
    "--memory-fraction",
    type=float,
    default=_default("memory_fraction"),
    show_default=True,
    help="Share of GPU memory weights + KV may use.",
)
@optgroup.option(
    "--step-overhead-ms",
    type=float,
    default=_default("step_overhead_ms"),
    show_default=True,
    help="Fixed host/launch time added to every forward pass.",
)
@optgroup.group("Output")
@optgroup.option(
    "--from-run",
    type=click.Path(path_type=Path, file_okay=False),
    help="Fit α and the draft cost to this run directory and report the prediction error.",
)
@optgroup.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the plan as CSV here.",
)
def plan(**params: object) -> None:
    """Predict step time, tokens per step, speedup and memory per concurrency (roofline).

    Formulas: expected tokens per step (Leviathan et al. 2023, arXiv 2211.17192), the Medusa
    tree expectation (Cai et al. 2024, arXiv 2401.10774), and a roofline of the weights + KV
    cache read per decode step.

    \b
    Example (add --from-run RUN_DIR to fit alpha to a measured run):
      trtbench plan --model llama-3-8b --draft llama-3.2-1b \\
          --medusa-accuracies vicuna-7b --gpu h200
    """
    try:
        settings = PlanSettings(**params)
    except ValidationError as exc:
        raise validation_error(exc) from None
    click.echo(render_plan(run_plan(settings)))
