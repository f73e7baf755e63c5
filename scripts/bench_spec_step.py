#!/usr/bin/env python
"""Median time of one batched decode step per mode and batch size, on the tiny models.

Usage: .venv/bin/python scripts/bench_spec_step.py [--batch-sizes 1,4] [--steps 40]
       [--modes baseline,medusa,eagle3] [--threads 1] [--device auto] [--json]

Unlike scripts/bench_batching.py (tok/s of whole runs, prefills and the batch's tail
included), this times ``decoder.step()`` alone with every row active: B prompts are
admitted, then ``--steps`` steps are timed one by one, rows being re-admitted before they
outgrow the cache. Two clocks: wall time (host ``perf_counter_ns``; on CUDA after a
``synchronize``) and this thread's CPU time (``thread_time_ns``: with one torch thread the
whole step's host work, and unlike wall time not stretched while a busy machine runs other
processes; on CUDA it leaves the GPU's time out). It prints the median step time of each
(ms) and the tokens per row and step (the acceptance length), so that two
versions of the step algorithms can be compared step for step: run it alternately under
each version (e.g. ``PYTHONPATH`` pointing at another checkout) and compare the medians of
the runs, since a shared machine's load moves single runs by 2x.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from bench_reference import load_tiny_models

from trtbench.builders.reference.decoding import Greedy

MODES = {
    "baseline": ("baseline", {}),
    "medusa": ("medusa", {"choices": [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]}),
    "eagle3": ("eagle3", {"draft_len": 4}),
    "draft_target": ("draft_target", {"draft_len": 4}),
}


def step_times(
    engine, prompts, steps: int, room: int
) -> tuple[list[int], list[int], float]:
    """Time ``steps`` decode steps of ``len(prompts)`` rows; (wall ns per step, thread CPU
    ns per step, tokens per row and step)."""
    decoder, device = engine.decoder, engine.device
    decoder.clear()
    for i, p in enumerate(prompts):
        decoder.admit(i, p, Greedy())
    times, cpu, tokens, row_steps = [], [], 0, 0
    for _ in range(steps):
        if max(len(r.seq) for r in decoder.rows) > room:
            decoder.clear()
            for i, p in enumerate(prompts):
                decoder.admit(i, p, Greedy())
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        out = decoder.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter_ns() - t0)
        cpu.append(time.thread_time_ns() - c0)
        tokens += sum(len(p.tokens) for p in out)
        row_steps += len(out)
    decoder.clear()
    return times, cpu, tokens / row_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="1,4")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--modes", default="baseline,medusa,eagle3")
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--json", action="store_true", help="one JSON line per figure")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    models = load_tiny_models(args.device)
    ids = models.tokenizer(
        "def main():\n    return sorted(items, key=lambda item: item.name)\n" * 8
    )["input_ids"]
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    prompts = [ids[i : i + args.prompt_len] for i in range(max(sizes))]
    seq = args.prompt_len + 48
    for name in args.modes.split(","):
        mode, kw = MODES[name]
        for b in sizes:
            engine = models.engine(
                mode,
                kw,
                max_seq_len=seq,
                max_input_len=args.prompt_len,
                max_batch_size=b,
            )
            step_times(engine, prompts[:b], 5, seq - 12)  # warm-up at this shape
            times, cpu, accept = step_times(engine, prompts[:b], args.steps, seq - 12)
            ms, cpu_ms = statistics.median(times) / 1e6, statistics.median(cpu) / 1e6
            if args.json:
                print(
                    json.dumps(
                        {
                            "mode": name,
                            "batch": b,
                            "median_ms": ms,
                            "median_cpu_ms": cpu_ms,
                            "tokens_per_row_step": accept,
                        }
                    )
                )
            else:
                print(
                    f"{name:12} B={b}: median step {ms:7.3f} ms wall, {cpu_ms:7.3f} ms "
                    f"thread CPU, {accept:4.2f} tokens/row"
                )


if __name__ == "__main__":
    main()
