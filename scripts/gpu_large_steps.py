#!/usr/bin/env python3
"""Each speculative method's decode-step time on a Llama shape where speculation can pay.

Usage: scripts/gpu_large_steps.py --device cuda --out DIR [--models llama-3.2-1b,llama-3-8b]
       [--batch-sizes 1,8,32,64] [--modes baseline,draft_target,ngram,medusa,eagle3]
       [--context 256] [--steps 10] [--repeats 3] [--warmup 3] [--dtype bfloat16]
       [--accept decode_timing.csv] [--no-graphs] [--threads N]

The targets are random-initialised Llamas built on the device from a config (a
``trtbench calibrate`` preset or a HF config.json: no weights are read or shipped); the
extra models are scaled to them: Medusa 3 heads of 1 ResBlock at the target's width, an
EAGLE-3 draft (one layer, the target's width and intermediate size, its aux layers), a
draft model of the target's width with ``layers // 8`` layers (at least 1), n-gram no model.
Every mode runs the reference engine's own decoder (``builders/reference``) at K = 4 and
the tiny models' Medusa tree. A step's shapes depend on (mode, K, rows) only, never on what
was accepted (issue 47: static shapes), so random weights give the real step time of each
method: what they cannot give is acceptance. The tokens per step come instead from the
trained tiny models (``--accept``: the GPU proof's ``decode_timing.csv``, bfloat16 rows
preferred, same graphs setting and batch size), and the speedup
``tokens_per_row_step x T_baseline / T_mode`` is written as "at the tiny models'
acceptance": acceptance from the tiny models, cost from the large shape.

Timing: per (model, mode, batch) one engine; on CUDA its steps are captured as CUDA graphs
for that batch size only (``ModelRunner.capture(batches=...)``) unless ``--no-graphs``;
``--warmup`` untimed steps at that shape, then ``--repeats`` runs of ``--steps`` steps,
each step timed by CUDA events (host ``perf_counter_ns`` on CPU: the ``clock`` column says
which). Statistic: the median step of each repeat, then the median over repeats with the
min..max of the repeats' medians as the interval. Memory: ``torch.cuda`` peak allocated
bytes per configuration after ``reset_peak_memory_stats`` (n/a on CPU).

Writes ``large_steps.csv`` (rewritten after each configuration, so a run stopped at its
budget keeps what it measured) and ``large_steps.txt`` (the table) under ``--out``. Exit 0,
or 2 on bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import csv
import gc
import statistics
import sys
import time
from pathlib import Path

import torch

from trtbench.core.errors import ConfigError, TrtbenchError

TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]  # the tiny models' (gpu proof)
K = 4
MODES = ("baseline", "draft_target", "ngram", "medusa", "eagle3")
DTYPES = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
}
COLUMNS = [
    "model",
    "params_b",
    "mode",
    "batch",
    "graphs",
    "clock",
    "statistic",
    "step_ms",
    "step_ms_low",
    "step_ms_high",
    "repeats",
    "steps",
    "peak_allocated_bytes",
    "tiny_tokens_per_row_step",
    "speedup_at_tiny_acceptance",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default="llama-3.2-1b,llama-3-8b")
    parser.add_argument("--batch-sizes", default="1,8,32,64")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--context", type=int, default=256, help="prompt per row")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    parser.add_argument("--accept", type=Path, default=None)
    parser.add_argument("--no-graphs", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads")
    return parser.parse_args(argv)


def build_models(spec: str, dtype: torch.dtype, device: torch.device) -> dict:
    """Random target, draft, Medusa heads and EAGLE-3 draft of ``spec``'s shape.

    Raises:
        ConfigError: ``spec`` is neither a calibrate preset nor a config.json.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    from trtbench.builders.reference.medusa_heads import MedusaHeads
    from trtbench.builders.tiny.tiny_eagle import make_draft
    from trtbench.builders.tiny.tiny_recipe import EagleRecipe
    from trtbench.plan.calibrate_run import calibration_config

    shape = calibration_config(spec)
    config = LlamaConfig(**shape, max_position_embeddings=8192)
    small = LlamaConfig(
        **(shape | {"num_hidden_layers": max(1, config.num_hidden_layers // 8)})
    )
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device), torch.no_grad():
            target = LlamaForCausalLM(config).eval()
            draft = LlamaForCausalLM(small).eval()
            heads = MedusaHeads(3, 1, config.hidden_size, config.vocab_size).eval()
            recipe = EagleRecipe(intermediate=config.intermediate_size)
            eagle3 = make_draft(target, recipe).eval()
    finally:
        torch.set_default_dtype(before)
    params = sum(p.numel() for p in target.parameters())
    return {
        "target": target,
        "draft": draft,
        "heads": heads,
        "eagle3": eagle3,
        "params_b": params / 1e9,
    }


def engine_for(models: dict, mode: str, batch: int, max_seq_len: int, context: int):
    """A reference engine of ``mode`` over the models (eager; the caller captures)."""
    from trtbench.builders.reference.loading import make_engine

    extra = {
        "draft_target": {"draft": models["draft"], "draft_len": K},
        "ngram": {"draft_len": K},
        "medusa": {"heads": models["heads"], "choices": TREE},
        "eagle3": {"eagle3": models["eagle3"], "draft_len": K},
    }.get(mode, {})
    return make_engine(
        mode,
        models["target"],
        None,
        max_seq_len=max_seq_len,
        max_input_len=context,
        max_batch_size=batch,
        **extra,
    )


def capture(engine, batch: int) -> None:
    """CUDA graphs of the decode step at ``batch`` rows only (as the engine's loader
    captures all of 1..slots)."""
    decoder = engine.decoder
    runners = dict(zip(("target", "draft"), decoder.runners(), strict=False))
    for role, lengths in decoder.step_lengths().items():
        runners[role].capture(lengths, batches=[batch])


def time_steps(
    engine, prompts, warmup: int, steps: int, repeats: int
) -> list[list[float]]:
    """Per repeat, each step's time in ms (CUDA events on CUDA, else perf_counter)."""
    from trtbench.builders.reference.decoding import Greedy

    decoder, device = engine.decoder, engine.device
    cuda = device.type == "cuda"
    decoder.clear()
    for i, prompt in enumerate(prompts):
        decoder.admit(i, prompt, Greedy())
    for _ in range(warmup):
        decoder.step()
    runs = []
    for _ in range(repeats):
        if cuda:
            events = [
                (
                    torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True),
                )
                for _ in range(steps)
            ]
            for start, end in events:
                start.record()
                decoder.step()
                end.record()
            torch.cuda.synchronize(device)
            runs.append([s.elapsed_time(e) for s, e in events])
        else:
            times = []
            for _ in range(steps):
                t0 = time.perf_counter_ns()
                decoder.step()
                times.append((time.perf_counter_ns() - t0) / 1e6)
            runs.append(times)
    decoder.clear()
    return runs


def tiny_acceptance(path: Path | None) -> dict[tuple[str, int, str], float]:
    """(mode, batch, graphs) → tokens per row and full-batch step of the tiny models, from
    the GPU proof's decode_timing.csv (bfloat16 rows win over others)."""
    if path is None or not path.is_file():
        return {}
    found: dict[tuple[str, int, str], tuple[bool, float]] = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            try:
                per_row = float(row["tokens_per_step"]) / int(row["batch_size"])
            except (KeyError, ValueError):
                continue
            key = (row["mode"], int(row["batch_size"]), row["graphs"])
            bf16 = row.get("dtype") == "bfloat16"
            if per_row == per_row and (key not in found or bf16):
                found[key] = (bf16, per_row)
    return {k: v for k, (_, v) in found.items()}


def run(args: argparse.Namespace) -> list[dict]:
    """Measure every (model, mode, batch); return the CSV rows.

    Raises:
        ConfigError: bad device, dtype, mode or model.
    """
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"--device {args.device}: torch sees no CUDA GPU; use --device cpu"
        )
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if bad := [m for m in modes if m not in MODES]:
        raise ConfigError(f"--modes: {bad[0]} unknown; choose from {', '.join(MODES)}")
    batches = [int(b) for b in args.batch_sizes.split(",")]
    graphs = device.type == "cuda" and not args.no_graphs
    setting = "graphs" if graphs else "eager"
    accept = tiny_acceptance(args.accept)
    max_seq_len = args.context + (args.warmup + args.steps * args.repeats + 2) * (K + 1)
    rows = []
    for spec in [m.strip() for m in args.models.split(",") if m.strip()]:
        models = build_models(spec, DTYPES[args.dtype], device)
        gen = torch.Generator().manual_seed(0)
        vocab = models["target"].config.vocab_size
        prompts = torch.randint(
            2, vocab, (max(batches), args.context), generator=gen
        ).tolist()
        for batch in batches:
            base = None
            for mode in modes:
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                engine = engine_for(models, mode, batch, max_seq_len, args.context)
                if graphs:
                    capture(engine, batch)
                runs = time_steps(
                    engine, prompts[:batch], args.warmup, args.steps, args.repeats
                )
                medians = [statistics.median(r) for r in runs]
                step = statistics.median(medians)
                base = step if mode == "baseline" else base
                tokens = (
                    1.0 if mode == "baseline" else accept.get((mode, batch, setting))
                )
                speedup = tokens * base / step if tokens and base else None
                peak = (
                    torch.cuda.max_memory_allocated(device)
                    if device.type == "cuda"
                    else None
                )
                rows.append(
                    {
                        "model": spec,
                        "params_b": round(models["params_b"], 3),
                        "mode": mode,
                        "batch": batch,
                        "graphs": setting,
                        "clock": "cuda_events"
                        if device.type == "cuda"
                        else "host_perf_counter",
                        "statistic": "median of per-repeat medians",
                        "step_ms": step,
                        "step_ms_low": min(medians),
                        "step_ms_high": max(medians),
                        "repeats": args.repeats,
                        "steps": args.steps,
                        "peak_allocated_bytes": peak,
                        "tiny_tokens_per_row_step": tokens,
                        "speedup_at_tiny_acceptance": speedup,
                    }
                )
                write_rows(args.out, rows)  # a run stopped at its budget keeps these
                del engine
                gc.collect()
        del models
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def write_rows(out: Path, rows: list[dict]) -> None:
    """(Re)write ``large_steps.csv`` with the rows so far."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "large_steps.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def render(rows: list[dict], device: str) -> str:
    """The table: step ms (median of repeat medians, [min..max]) and the speedup at the
    tiny models' acceptance."""
    clock = rows[0]["clock"] if rows else "none"
    lines = [
        f"decode step per mode on random-init Llama shapes ({device}; clock: {clock}; "
        "statistic: median of per-repeat medians [min..max of them])",
        "speedup = tiny models' tokens per row-step x T_baseline / T_mode "
        "(acceptance from the trained tiny models, cost from this shape)",
        f"{'model':14} {'mode':13} {'B':>3} {'step ms':>9} {'interval':>19} {'tok/step':>8} {'speedup':>7}",
    ]
    for r in rows:
        tok, sp = r["tiny_tokens_per_row_step"], r["speedup_at_tiny_acceptance"]
        interval = f"[{r['step_ms_low']:.3f}..{r['step_ms_high']:.3f}]"
        lines.append(
            f"{r['model'][:14]:14} {r['mode']:13} {r['batch']:>3} {r['step_ms']:9.3f} "
            f"{interval:>19} {tok if tok is None else round(tok, 2)!s:>8} "
            f"{'n/a' if sp is None else f'{sp:.2f}x':>7}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run and write the files; the exit status (module docstring)."""
    args = parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    try:
        rows = run(args)
    except TrtbenchError as exc:
        print(f"gpu_large_steps: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    write_rows(args.out, rows)
    table = render(rows, args.device)
    (args.out / "large_steps.txt").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
