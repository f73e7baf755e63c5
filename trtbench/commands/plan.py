"""``trtbench plan``: predict draft-target, Medusa, EAGLE-3, MTP, n-gram, suffix decoding vs
baseline before building."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import click
from click_option_group import optgroup
from pydantic import ValidationError

from trtbench.plan.chain_kinds import chain_methods
from trtbench.plan.chain_modes import option_flag
from trtbench.plan.engines import ENGINES
from trtbench.plan.gpus import gpu_preset_names
from trtbench.plan.model_shapes import model_preset_names
from trtbench.plan.plan_run import run_plan
from trtbench.plan.settings import (
    MEDUSA_ACCURACY_PRESETS,
    DType,
    KvDType,
    PlanSettings,
)
from trtbench.plan.text import render_plan


def _positive_numbers(text: str, kind: type, plural: str, one: str) -> tuple:
    """``"1,8,16"`` → ``(1, 8, 16)`` of ``kind``; each value must be > 0.

    Raises:
        click.BadParameter: not numbers, or one of them not > 0.
    """
    try:
        values = tuple(kind(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a comma-separated list of {plural}"
        ) from None
    if not values or min(values) <= 0:
        raise click.BadParameter(f"{text!r}: every value must be {one} > 0")
    return values


def parse_int_list(
    ctx: click.Context, param: click.Parameter, value: str
) -> tuple[int, ...]:
    """``"1,8,16"`` → ``(1, 8, 16)``; each value must be an integer >= 1."""
    return _positive_numbers(value, int, "integers", "an integer")


def parse_float_list(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[float, ...]:
    """``"0.5,2"`` → ``(0.5, 2.0)``; each value must be a number > 0 (None: empty)."""
    return _positive_numbers(value, float, "numbers", "a number") if value else ()


def _default(name: str) -> Any:
    """``PlanSettings``' default of ``name``: what the CLI shows and passes is that value."""
    return PlanSettings.model_fields[name].default


def _defaulted(flag: str, help: str, **kwargs: Any) -> Any:
    """An option whose default, shown in ``--help``, is :func:`_default` of the setting named
    like ``flag`` (``--draft-len``: ``draft_len``); ``kwargs`` go to ``optgroup.option``."""
    name = flag.removeprefix("--").replace("-", "_")
    return optgroup.option(
        flag, default=_default(name), show_default=True, help=help, **kwargs
    )


def _chain_options(command: Any) -> Any:
    """Each chain method's options, in the methods' order (``chain_kinds``): ``--MODE``, its
    rates, then its kind's own (``--eagle3-layers``, …, ``--ngram-lookup-us``), so a new chain
    method of a known kind has them with no code here."""
    decorators = []
    for method, kind in chain_methods():
        decorators.append(
            optgroup.option(option_flag(method.name), help=kind.help(method))
        )
        for option in kind.options:
            flag = option.flag(method.name)
            text = option.help.format(label=method.label)
            if option.default is None:
                decorators.append(optgroup.option(flag, type=option.type, help=text))
            else:
                decorators.append(_defaulted(flag, text, type=option.type))
    for decorator in reversed(decorators):  # as if stacked above the function
        command = decorator(command)
    return command


def validation_error(exc: ValidationError) -> click.BadParameter:
    """The first pydantic error as a BadParameter naming the option."""
    err = exc.errors()[0]
    option = "--" + str(err["loc"][0]).replace("_", "-") if err["loc"] else "option"
    return click.BadParameter(err["msg"], param_hint=f"'{option}'")


@click.command("plan")
@optgroup.group("Model and hardware")
@optgroup.option(
    "--model",
    help=f"Target: a preset ({model_preset_names()}), a HF config.json / model dir, or sizes as key=value pairs (params, layers, hidden, kv_heads, head_dim, vocab), e.g. params=8e9,layers=32,….",
)
@_defaulted("--gpu", f"GPU preset (per GPU): {gpu_preset_names()}.")
@_defaulted(
    "--engine",
    "Serving stack whose launch mode and fitted terms the plan uses (docs/planner.md; "
    "default: every stack's rows together).",
    type=click.Choice(list(ENGINES)),
)
@optgroup.option(
    "--tp",
    type=int,
    help="Tensor-parallel GPUs: weights and KV split over them, 2 all-reduces per layer (default: --gpus / --pp, else 1).",
)
@_defaulted(
    "--pp", "Pipeline stages (layers split; stages run one after another).", type=int
)
@optgroup.option(
    "--gpus", type=int, help="GPUs in all (= tp x pp); alone it sets --tp."
)
@optgroup.option(
    "--link-gbs",
    type=float,
    help="GPU-to-GPU bandwidth per direction, GB/s (default: the preset's: NVLink 4 450, NVLink 3 300, PCIe Gen4 32).",
)
@_defaulted(
    "--allreduce-latency-us",
    "Fixed latency of one all-reduce or stage send (assumed).",
    type=float,
)
@_defaulted(
    "--overhead-gib",
    "Per-GPU memory held for the runtime (CUDA context, NCCL).",
    type=float,
)
@_defaulted(
    "--dtype",
    "Weights and math (fp8: FP8 weights on FP8 tensor cores; fp4: NVFP4 on Blackwell; "
    "int4: AWQ/GPTQ 4-bit weights, 16-bit math).",
    type=click.Choice(get_args(DType)),
)
@_defaulted(
    "--kv-dtype",
    "KV-cache element type (auto: as --dtype).",
    type=click.Choice(get_args(KvDType)),
)
@optgroup.group("Draft model")
@optgroup.option(
    "--draft", help="Draft model, same forms as --model (omit: no draft-target)."
)
@_defaulted("--draft-len", "Draft tokens per step γ.", type=int)
@_defaulted("--alpha", "Per-token acceptance α of the draft.", type=float)
@optgroup.group("Medusa")
@optgroup.option(
    "--medusa-accuracies",
    help="Per-head per-rank accuracies 'a1,a2;b1,b2' (heads split by ';') or a preset: "
    f"{', '.join(MEDUSA_ACCURACY_PRESETS)} (omit: no Medusa).",
)
@optgroup.option(
    "--medusa-cumulative",
    is_flag=True,
    help="The accuracies are cumulative top-k values.",
)
@_defaulted(
    "--medusa-tree",
    "greedy (best-first from the accuracies), a named tree (mc_sim_7b_63…) or a list of paths.",
)
@_defaulted("--medusa-nodes", "Nodes of the greedy tree.", type=int)
@optgroup.option(
    "--medusa-heads", type=int, help="Heads (default: the number of accuracy rows)."
)
@_defaulted("--medusa-layers", "Residual blocks per head.", type=int)
@optgroup.group(
    "EAGLE-3, MTP, n-gram (per-position acceptance: 'a1,a2,a3', 'ALPHAxK' or 'default')"
)
@_chain_options
@optgroup.group("Workload")
@optgroup.option(
    "--concurrency",
    default=",".join(map(str, _default("concurrency"))),
    show_default=True,
    callback=parse_int_list,
    help="Concurrent sequences to predict.",
)
@_defaulted("--input-len", "Prompt tokens.", type=int)
@_defaulted("--output-len", "Generated tokens.", type=int)
@optgroup.option(
    "--qps",
    callback=parse_float_list,
    help="Request rates (requests/s) to plan for: each mode's concurrency by Little's law.",
)
@_defaulted(
    "--memory-fraction", "Share of GPU memory weights + KV may use.", type=float
)
@_defaulted(
    "--step-overhead-ms",
    "Extra fixed time added to every forward pass, on top of the launch cost.",
    type=float,
)
@optgroup.group("Overheads beyond the roofline (docs/planner.md)")
@optgroup.option(
    "--cuda-graphs/--eager",
    default=None,
    help="Decode passes as CUDA graphs (graph launch + per-node cost) or eager launches "
    "(default: the --engine's).",
)
@optgroup.option(
    "--kernels-per-layer",
    type=float,
    help="Kernels one decoder layer runs, 8 more per pass (default: the --engine's, 14; "
    "hf-eager 40).",
)
@_defaulted(
    "--bandwidth-efficiency",
    "Share of HBM bandwidth a decode pass achieves (MBU; gpt-fast's 0.72).",
    type=float,
)
@_defaulted("--launch-us", "Host time of one eager kernel launch (µs).", type=float)
@_defaulted("--graph-launch-us", "Time of one CUDA graph launch (µs).", type=float)
@_defaulted(
    "--graph-node-us",
    "GPU-side cost of one graph node beyond its kernel (µs).",
    type=float,
)
@optgroup.option(
    "--machinery-pass-us",
    type=float,
    help="Speculation machinery per forward pass of a speculative step (µs; default: the "
    "--engine's fitted value).",
)
@optgroup.option(
    "--machinery-token-us",
    type=float,
    help="Speculation machinery per verified token per sequence (µs; default: fitted).",
)
@optgroup.option(
    "--sequence-us",
    type=float,
    help="Cost per sequence per step, any mode (µs; default: fitted).",
)
@optgroup.option(
    "--compute-efficiency",
    type=float,
    help="Share of the dense peak a compute-bound pass achieves (default: fitted).",
)
@optgroup.option(
    "--kernel-us",
    type=float,
    help="Shortest GPU time of one kernel (µs; default: fitted).",
)
@optgroup.option(
    "--draft-tp",
    type=int,
    help="Tensor-parallel GPUs of the draft model (default: the target's --tp).",
)
@optgroup.option(
    "--from-trace",
    type=click.Path(path_type=Path),
    help="steps.csv (or its folder) from `trtbench analyze nsys|kineto` of one decode "
    "step of the target: its kernels per step and launch costs replace the defaults.",
)
@optgroup.option(
    "--calibration",
    type=click.Path(path_type=Path, dir_okay=False),
    help="A file from `trtbench calibrate` of this --model: its measured step times "
    "T(B, q) replace the roofline of the target's passes, its launch costs the constants.",
)
@optgroup.option(
    "--no-overheads",
    is_flag=True,
    help="The pure roofline: full bandwidth, no launch cost, no speculation machinery.",
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
    tree expectation (Cai et al. 2024, arXiv 2401.10774), chains 1 + Σ_j Π_{i<=j} a_i, and a
    roofline of the weights + KV cache read per decode step on one GPU of the tp x pp group,
    plus 2 ring all-reduces per layer (latency + 2(N-1)/N x bytes / link bandwidth).

    \b
    Example (add --from-run RUN_DIR to fit alpha to a measured run):
      trtbench plan --model llama-3-8b --draft llama-3.2-1b \\
          --medusa-accuracies vicuna-7b --gpu h200

    \b
    A 70B target on 8 H100s:
      trtbench plan --model llama-3.1-70b --gpu h100-sxm --tp 8 \\
          --draft llama-3.2-1b --medusa-accuracies vicuna-33b --eagle3 default

    \b
    DeepSeek-R1 (MoE) on 8 B200s, MTP and an EAGLE-3 tree, on SGLang:
      trtbench plan --model deepseek-r1 --gpu b200 --tp 8 --dtype fp4 \\
          --engine sglang --mtp 2.82@3 --eagle3 0.8x5 --eagle3-topk 4 --eagle3-tokens 16
    """
    try:
        settings = PlanSettings(**params)
    except ValidationError as exc:
        raise validation_error(exc) from None
    click.echo(render_plan(run_plan(settings)))
