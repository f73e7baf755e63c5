"""Render a :class:`~trtbench.builders.trtllm.plan.VariantPlan` for humans.

Two equivalent forms, both derived from the plan's calls so they cannot drift apart:

- the TensorRT-LLM LLM-API program (``tensorrt_llm._tensorrt_engine.LLM`` …, ``llm.save``);
- the command line: ``examples/*/convert_checkpoint.py`` (or ``examples/quantization/quantize.py``
  for FP8) then ``trtllm-build``, with flags from ``tensorrt_llm/commands/build.py`` and
  ``add_plugin_argument`` (contract ``trtllm_build``). The ``examples/`` scripts are not in
  the pip wheel: the command lines are for a TensorRT-LLM 1.2.1 source checkout.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from trtbench.builders.trtllm.calls import (
    Call,
    EnumRef,
    names_used,
    render_call,
    render_imports,
)
from trtbench.builders.trtllm.contract import RUNTIME_SHAPES, Contract
from trtbench.builders.trtllm.plan import EngineStep, VariantPlan


def _flag_value(value: Any) -> str:
    """trtllm-build spelling: bools enable/disable, None disable (``commands/build.py``)."""
    if value is True:
        return "enable"
    if value is False or value is None:
        return "disable"
    return str(value)


def checkpoint_dir(step: EngineStep) -> str:
    """Where the command-line route writes this engine's TensorRT-LLM checkpoint."""
    if step.checkpoint_dir:
        return step.checkpoint_dir
    root = Path(step.engine_dir)
    base = root.parent if step.role == "draft" or root.name == "target" else root
    return str(base / f"checkpoint-{step.role}")


def convert_argv(step: EngineStep, plan: VariantPlan) -> list[str]:
    """The checkpoint-conversion command of ``step`` (Llama, Medusa or FP8 quantize)."""
    llm = step.llm
    common = [
        "--output_dir",
        checkpoint_dir(step),
        "--tp_size",
        str(llm.get("tensor_parallel_size", 1)),
        "--pp_size",
        str(llm.get("pipeline_parallel_size", 1)),
    ]
    if step.convert is not None:
        spec = step.convert.get("speculative_config")
        return [
            "python",
            "examples/medusa/convert_checkpoint.py",
            "--model_dir",
            str(step.convert.args[0]),
            "--medusa_model_dir",
            step.convert.get("speculative_model_dir").path,
            "--dtype",
            plan.checkpoint_dtype,
            *common,
            "--num_medusa_heads",
            str(spec.get("num_medusa_heads")),
            "--num_medusa_layers",
            str(step.expect.num_medusa_layers),
            "--max_medusa_token_len",
            str(step.convert.get("max_draft_len")),
        ]
    model = str(llm.get("model"))
    if llm.get("quant_config") is not None:
        return [
            "python",
            "examples/quantization/quantize.py",
            "--model_dir",
            model,
            "--dtype",
            plan.checkpoint_dtype,
            "--qformat",
            "fp8",
            "--kv_cache_dtype",
            "fp8",
            *common,
        ]
    return [
        "python",
        "examples/models/core/llama/convert_checkpoint.py",
        "--model_dir",
        model,
        "--dtype",
        str(llm.get("dtype", "auto")),
        *common,
    ]


def build_argv(step: EngineStep) -> list[str]:
    """The ``trtllm-build`` command equivalent to ``step``'s BuildConfig."""
    build: Call = step.llm.get("build_config")
    plugins: Call = build.get("plugin_config")
    argv = [
        "trtllm-build",
        "--checkpoint_dir",
        checkpoint_dir(step),
        "--output_dir",
        step.engine_dir,
    ]
    for key in RUNTIME_SHAPES:  # the BuildConfig shapes, same-named flags
        if build.get(key) is not None:
            argv += [f"--{key}", str(build.get(key))]
    if plugins.get("paged_kv_cache"):
        argv += ["--kv_cache_type", "paged"]
    for key, value in plugins.kwargs.items():
        if key != "paged_kv_cache":
            argv += [f"--{key}", _flag_value(value)]
    mode = build.get("speculative_decoding_mode")
    if isinstance(mode, EnumRef) and mode.member != "NONE":
        argv += ["--speculative_decoding_mode", mode.member.lower()]
        argv += ["--max_draft_len", str(build.get("max_draft_len"))]
    if build.get("gather_generation_logits"):
        argv.append("--gather_generation_logits")
    return argv


def _shell(argv: list[str]) -> str:
    """One command, a flag and its value per continuation line."""
    lines, current = [], shlex.join(argv[:2])
    for token in argv[2:]:
        if token.startswith("--"):
            lines.append(current)
            current = token
        else:
            current += " " + shlex.quote(token)
    lines.append(current)
    return " \\\n    ".join(lines)


def engine_commands(step: EngineStep, plan: VariantPlan) -> list[list[str]]:
    """Convert then build, for one engine."""
    return [convert_argv(step, plan), build_argv(step)]


def render_engine_python(step: EngineStep) -> str:
    """The LLM-API program for one engine."""
    lines = []
    if step.convert is not None:
        lines += [
            f"for rank in range({step.world_size}):",
            "    model = " + render_call(step.convert, 4),
            f"    model.save_checkpoint({step.checkpoint_dir!r}, save_config=(rank == 0))",
        ]
    lines += [
        "llm = " + render_call(step.llm),
        f"llm.save({step.engine_dir!r})",
        "llm.shutdown()",
    ]
    return "\n".join(lines)


def render_plan(plan: VariantPlan, contract: Contract) -> str:
    """The whole dry-run text of one variant: LLM-API program, then the command lines."""
    calls = [c for e in plan.engines for c in (e.llm, e.convert) if c is not None]
    header = (
        f"# variant {plan.name!r} ({plan.mode}) -> {plan.engine_root}\n"
        f"# TensorRT-LLM {contract.version} LLM API (inside {contract.image})"
    )
    imports = render_imports(names_used(calls), contract.imports)
    if any(e.convert is not None for e in plan.engines):
        imports = "from pathlib import Path\n" + imports
    body = [
        f"# --- engine {e.role}: {e.engine_dir}\n" + render_engine_python(e)
        for e in plan.engines
    ]
    cli = [
        f"# engine {e.role}\n"
        + "\n".join(_shell(argv) for argv in engine_commands(e, plan))
        for e in plan.engines
    ]
    return "\n".join(
        [
            header,
            imports,
            *body,
            "# --- equivalent command line (examples/ scripts of a TensorRT-LLM "
            f"{contract.version} source checkout)",
            *cli,
        ]
    )
