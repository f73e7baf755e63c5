#!/usr/bin/env python
"""Output tokens/s of the reference engine per mode and batch size (in-flight batching).

Usage: .venv/bin/python scripts/bench_batching.py [--batch-sizes 1,2,4,8] [--rounds 4]
       [--max-tokens 48] [--prompt-len 32] [--threads 1] [--repeats 2] [--device auto]

For each batch size B, each mode's engine gets the same ``largest B x rounds`` requests at
once (fixed ``max_tokens``, no early end); the in-flight batcher keeps B rows busy, rows
that finish are replaced by waiting requests. Speculative rows finish at different steps,
so the last steps run fewer rows (the "rows" column); more rounds shrink that tail. Output tok/s = generated tokens / wall time from submission
to the last token (prefills included), run in this thread (no loop-thread hand-off). Modes
are interleaved (mode by mode within each repeat) so that load from other processes falls
on all alike. Then the speedup of each mode over baseline at the same batch size, and the
batch size from which speculation no longer pays (the crossover).

Why a crossover: a decode step costs about ``overhead + B x q x c`` (per-forward framework
overhead, and ``c`` per token-row of compute). Baseline feeds q = 1 token per row, a
speculative step q = K+1 or N+1 and emits ``acceptance length`` tokens per row. At small B
the overhead dominates and verifying q tokens costs little more than one; as B grows the
compute term dominates and the speculative step's extra q-1 token-rows are paid for in
full, while they yield only ``acceptance length - 1`` tokens. The forward costs per shape
are printed first (median ms) to show it.

Last, per batch size, the fixed mode that wins and how close the adaptive config gets to it
(draft K=4 with ``draft_len_schedule`` {1: 4, 4: 2}: 4 drafts at batch 1, 2 at 2..4, none
beyond; the draft length a step uses follows the rows active at its start, so it shrinks as
the batch fills).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import torch
from bench_reference import (
    ADAPTIVE,
    ADAPTIVE_SCHEDULE,
    EXAMPLE_TREE,
    TinyModels,
    held_out_prompts,
    load_tiny_models,
    print_winners,
)

from trtbench.builders.reference.runner import ModelRunner

CONFIGS = [
    ("baseline", "baseline", {}),
    ("draft K=4", "draft_target", {"draft_len": 4}),
    ("draft K=2", "draft_target", {"draft_len": 2}),
    ("medusa example 6", "medusa", {"choices": EXAMPLE_TREE}),
    ("medusa chain 2", "medusa", {"choices": [[0], [0, 0]]}),
    # prompt lookup, window 1..2 (the default)
    ("ngram K=4", "ngram", {"draft_len": 4}),
    # EAGLE-3 chain: one-layer draft on the target's layer 1/2/3 states
    ("eagle3 K=4", "eagle3", {"draft_len": 4}),
    (
        ADAPTIVE,
        "draft_target",
        {"draft_len": 4, "draft_len_schedule": ADAPTIVE_SCHEDULE},
    ),
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="1,2,4,8")
    parser.add_argument(
        "--rounds", type=int, default=4, help="requests = largest B x rounds"
    )
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--configs",
        default="",
        help="comma-separated labels to run (baseline always); default: all",
    )
    parser.add_argument(
        "--no-costs", action="store_true", help="skip the per-shape forward costs"
    )
    return parser.parse_args()


def forward_ms(runner: ModelRunner, prompt: list[int], b: int, q: int) -> float:
    """Median ms of one step of ``b`` rows x ``q`` tokens at ~the prompt length."""
    times = []
    with torch.inference_mode():
        for row in range(b):
            runner.prefill(row, prompt)
        for _ in range(23):
            t0 = time.perf_counter_ns()
            runner.forward([prompt[:q]] * b)
            times.append(time.perf_counter_ns() - t0)
            for row in range(b):
                runner.crop(row, len(prompt))
    return statistics.median(times[3:]) / 1e6


def print_costs(models: TinyModels, prompt, sizes, seq) -> None:
    t_run = ModelRunner(models.target, seq + 8, slots=max(sizes))
    d_run = ModelRunner(models.draft, seq + 8, slots=max(sizes))
    print("one forward, median ms (rows B x tokens q; per token-row in brackets):")
    for name, runner, q in (
        ("target", t_run, 1),
        ("target", t_run, 5),
        ("target", t_run, 7),
        ("draft", d_run, 1),
    ):
        cells = []
        for b in sizes:
            ms = forward_ms(runner, prompt, b, q)
            cells.append(f"B={b} {ms:6.3f} [{ms / (b * q):.3f}]")
        print(f"  {name} q={q}: " + "  ".join(cells))


@dataclass
class Tally:
    """Totals of one (mode, batch size) over its repeats."""

    tokens: int = 0
    ns: int = 0
    steps: int = 0  # batched decode steps
    row_steps: int = 0  # decode steps summed over requests
    decode_tokens: int = 0  # tokens from decode steps (not the prefill's first token)

    @property
    def tok_s(self) -> float:
        return self.tokens / (self.ns / 1e9)


def run_batch(engine, prompts: list[list[int]], max_tokens: int, tally: Tally) -> None:
    """Submit all prompts at once and run them to completion in this thread."""
    first_step = engine.batcher.steps_run
    t0 = time.perf_counter_ns()
    handles = [engine.submit(p, max_tokens, end_id=-1, start=False) for p in prompts]
    engine.batcher.run_until_idle()
    tally.ns += time.perf_counter_ns() - t0
    tally.steps += engine.batcher.steps_run - first_step
    for steps in (list(h) for h in handles):
        tally.tokens += sum(len(s.token_ids) for s in steps)
        tally.row_steps += len(steps) - 1
        tally.decode_tokens += sum(len(s.token_ids) for s in steps[1:])


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    models = load_tiny_models(args.device)
    prompts = held_out_prompts(
        models.tokenizer, max(sizes) * args.rounds, args.prompt_len
    )
    seq = args.prompt_len + args.max_tokens
    print(
        f"device {models.device} ({models.dtype}), torch threads "
        f"{torch.get_num_threads()}, {len(prompts)} requests of {args.prompt_len} "
        f"prompt + {args.max_tokens} new tokens per batch size, {args.repeats} repeats"
    )
    if not args.no_costs:
        print_costs(models, prompts[0], sizes, seq)
    wanted = {w.strip() for w in args.configs.split(",") if w.strip()}
    configs = [c for c in CONFIGS if not wanted or c[0] in wanted | {"baseline"}]
    tally = {(label, b): Tally() for label, _, _ in configs for b in sizes}
    for b in sizes:
        engines = {}
        for label, mode, kw in configs:
            engines[label] = models.engine(
                mode,
                kw,
                max_seq_len=seq,
                max_input_len=args.prompt_len,
                max_batch_size=b,
            )
            run_batch(engines[label], prompts[:b], 8, Tally())  # warm-up
        for _ in range(args.repeats):
            for label, engine in engines.items():
                run_batch(engine, prompts, args.max_tokens, tally[(label, b)])
    print_table(tally, sizes)


def print_table(tally: dict[tuple[str, int], Tally], sizes: list[int]) -> None:
    labels = list(dict.fromkeys(label for label, _ in tally))
    head = "".join(f" {'B=' + str(b) + ' tok/s':>12} {'vs base':>7}" for b in sizes)
    print(f"{'mode':18}{head}  speculation stops paying at")
    for label in labels:
        cells, crossover = "", "-"
        for b in sizes:
            rate = tally[(label, b)].tok_s
            ratio = rate / tally[("baseline", b)].tok_s
            cells += f" {rate:12.1f} {ratio:6.2f}x"
            if label != "baseline" and ratio < 1 and crossover == "-":
                crossover = f"B={b}"
        print(f"{label:18}{cells}  {crossover if label != 'baseline' else ''}")
    print(
        "per batched decode step: tokens per row (acceptance length) / rows (mean) / "
        "ms (wall time / steps, prefills included):"
    )
    for label in labels:
        cells = ""
        for b in sizes:
            t = tally[(label, b)]
            accept, rows = t.decode_tokens / t.row_steps, t.row_steps / t.steps
            cells += f"  B={b} {accept:4.2f} /{rows:4.1f} /{t.ns / 1e6 / t.steps:5.2f}"
        print(f"  {label:18}{cells}")
    print_winners(
        {label: {b: tally[(label, b)].tok_s for b in sizes} for label in labels}
    )


if __name__ == "__main__":
    main()
