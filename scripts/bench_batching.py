#!/usr/bin/env python
"""Output tokens/s of the reference engine per mode and batch size (in-flight batching).

Usage: .venv/bin/python scripts/bench_batching.py [--batch-sizes 1,2,4,8] [--rounds 2]
       [--max-tokens 48] [--prompt-len 32] [--threads 1] [--repeats 2] [--device auto]

For each batch size B, each mode's engine gets ``B x rounds`` requests at once (fixed
``max_tokens``, no early end); the in-flight batcher keeps B rows busy, rows that finish are
replaced by waiting requests. Output tok/s = generated tokens / wall time from submission
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
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from bench_reference import (
    EXAMPLE_TREE,
    TinyModels,
    held_out_prompts,
    load_tiny_models,
)

from trtbench.builders.reference.runner import ModelRunner

CONFIGS = [
    ("baseline", "baseline", {}),
    ("draft K=4", "draft_target", {"draft_len": 4}),
    ("draft K=2", "draft_target", {"draft_len": 2}),
    ("medusa example 6", "medusa", {"choices": EXAMPLE_TREE}),
    ("medusa chain 2", "medusa", {"choices": [[0], [0, 0]]}),
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="1,2,4,8")
    parser.add_argument("--rounds", type=int, default=2, help="requests = B x rounds")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="auto")
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
    for name, runner, q in (("target", t_run, 1), ("target", t_run, 5),
                            ("target", t_run, 7), ("draft", d_run, 1)):  # fmt: skip
        cells = []
        for b in sizes:
            ms = forward_ms(runner, prompt, b, q)
            cells.append(f"B={b} {ms:6.3f} [{ms / (b * q):.3f}]")
        print(f"  {name} q={q}: " + "  ".join(cells))


def run_batch(engine, prompts: list[list[int]], max_tokens: int) -> tuple[int, int]:
    """Submit all prompts at once, run to completion here; (tokens, wall ns)."""
    t0 = time.perf_counter_ns()
    handles = [engine.submit(p, max_tokens, end_id=-1, start=False) for p in prompts]
    engine.batcher.run_until_idle()
    elapsed = time.perf_counter_ns() - t0
    return sum(len(s.token_ids) for h in handles for s in h), elapsed


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
        f"{torch.get_num_threads()}, {args.rounds} x B requests of {args.prompt_len} "
        f"prompt + {args.max_tokens} new tokens per batch size, {args.repeats} repeats"
    )
    print_costs(models, prompts[0], sizes, seq)
    tally = {(label, b): [0, 0] for label, _, _ in CONFIGS for b in sizes}
    for b in sizes:
        engines = {}
        for label, mode, kw in CONFIGS:
            engines[label] = models.engine(
                mode, kw, max_seq_len=seq, max_input_len=args.prompt_len,
                max_batch_size=b,
            )  # fmt: skip
            run_batch(engines[label], prompts[:b], 8)  # warm-up
        for _ in range(args.repeats):
            for label, engine in engines.items():
                tokens, ns = run_batch(
                    engine, prompts[: b * args.rounds], args.max_tokens
                )
                tally[(label, b)][0] += tokens
                tally[(label, b)][1] += ns
    print_table(tally, sizes)


def print_table(tally: dict, sizes: list[int]) -> None:
    rate = {key: tokens / (ns / 1e9) for key, (tokens, ns) in tally.items()}
    labels = list(dict.fromkeys(label for label, _ in tally))
    head = "".join(f" {'B=' + str(b) + ' tok/s':>12} {'vs base':>7}" for b in sizes)
    print(f"{'mode':18}{head}  speculation stops paying at")
    for label in labels:
        cells, crossover = "", "-"
        for b in sizes:
            ratio = rate[(label, b)] / rate[("baseline", b)]
            cells += f" {rate[(label, b)]:12.1f} {ratio:6.2f}x"
            if label != "baseline" and ratio < 1 and crossover == "-":
                crossover = f"B={b}"
        print(f"{label:18}{cells}  {crossover if label != 'baseline' else ''}")


if __name__ == "__main__":
    main()
