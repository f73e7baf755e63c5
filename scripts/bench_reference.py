#!/usr/bin/env python
"""Tokens/s of the PyTorch reference engine per decoding mode, batch 1, on the tiny models.

(Batch sizes 2..8 with in-flight batching: scripts/bench_batching.py.)

Usage: .venv/bin/python scripts/bench_reference.py [--max-tokens 64] [--prompts 8]
       [--prompt-len 32] [--threads 1] [--device auto]

First the cost of one forward of each shape (median ms). Then, per mode: decode tokens/s
(the first token, i.e. the prefill, excluded), the ratio to baseline, the mean acceptance
length (tokens per decode step), the draft acceptance rate (accepted / proposed draft
tokens), the ratio the forward costs predict, and whether the tokens equal baseline's.

Model of the prediction: a step costs ``K × t_draft(1) + t_target(K+1)`` (draft_target; for
eagle3 ``t_draft`` is the one-layer EAGLE-3 draft: a catch-up forward plus K - 1 chained ones) or
``t_heads(depth) + t_target(N+1)`` (Medusa, N tree nodes) and emits ``acceptance length``
tokens; baseline spends ``t_target(1)`` per token. So
``ratio = acceptance_length × t_target(1) / step cost`` (Leviathan et al. 2023, §3.4, with
measured costs instead of a cost coefficient). Speculation pays while the verification of
q tokens costs about as much as one token — true while the per-forward overhead dominates.

Last, the fixed mode that wins, and how close the adaptive config (draft K=4 with a batch-size
schedule; at batch 1 it is draft K=4) gets to it. n-gram drafts cost no forward (the lookup
is a scan of the request's tokens), so its predicted ratio counts only the K+1-token verify.

Threads default to 1: the tiny models' matrices are too small to gain from more, and on a
shared machine extra threads wait on each other (the figures then swing by 10x).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field

import torch
from transformers import AutoTokenizer

from trtbench.builders.reference.adaptive import DraftLenPolicy
from trtbench.builders.reference.eagle3 import load_eagle3
from trtbench.builders.reference.eagle_decoding import Eagle3Runner
from trtbench.builders.reference.loading import (
    load_causal_lm,
    make_engine,
    resolve_device,
    resolve_dtype,
)
from trtbench.builders.reference.medusa_heads import load_medusa_heads
from trtbench.builders.reference.runner import ModelRunner
from trtbench.builders.tiny.tiny_models import ensure_tiny_models
from trtbench.core.paths import tiny_models_dir

EXAMPLE_TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]  # examples/tiny-cpu.yaml
# Adaptive speculation (builders/reference/adaptive.py): K = 4 at batch 1, 2 at 2..4, no
# drafting beyond 4 (the smallest key >= the active batch size; none above the largest key).
# From bench_batching.py on 2 cores: K=4 pays most at B=1, K=2 at B=2..4, none at B=8.
ADAPTIVE_SCHEDULE = {1: 4, 4: 2}
ADAPTIVE = "draft K=4 adaptive"  # the one adaptive config; the others are fixed modes
CONFIGS = [
    ("baseline", "baseline", {}),
    ("draft K=1", "draft_target", {"draft_len": 1}),
    ("draft K=2", "draft_target", {"draft_len": 2}),
    ("draft K=4", "draft_target", {"draft_len": 4}),
    ("medusa [[0]]", "medusa", {"choices": [[0]]}),
    ("medusa chain 2", "medusa", {"choices": [[0], [0, 0]]}),
    ("medusa top2,1", "medusa", {"choices": [[0], [1], [0, 0]]}),
    ("medusa example 6", "medusa", {"choices": EXAMPLE_TREE}),
    # prompt lookup, window 1..2 (the default)
    ("ngram K=4", "ngram", {"draft_len": 4}),
    # EAGLE-3 chain (builders/reference/eagle3.py): the target's layer 1/2/3 states + tokens
    ("eagle3 K=4", "eagle3", {"draft_len": 4}),
    (
        ADAPTIVE,
        "draft_target",
        {"draft_len": 4, "draft_len_schedule": ADAPTIVE_SCHEDULE},
    ),
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="passes over the prompts (modes interleaved)",
    )
    return parser.parse_args()


def held_out_prompts(tokenizer, count: int, length: int) -> list[list[int]]:
    """Windows of held-out standard-library source (files the tiny models never saw)."""
    from trtbench.builders.tiny.tiny_corpus import select_corpus
    from trtbench.builders.tiny.tiny_recipe import Recipe

    _, held_out = select_corpus(Recipe())
    prompts: list[list[int]] = []
    for text in held_out:
        ids = tokenizer(text, verbose=False)["input_ids"]
        for start in range(0, len(ids) - length, 4 * length):
            prompts.append(ids[start : start + length])
            if len(prompts) == count:
                return prompts
    return prompts


@dataclass(frozen=True)
class TinyModels:
    """The tiny models on one device (shared by every engine of a benchmark)."""

    device: torch.device
    dtype: torch.dtype
    target: object
    draft: object
    heads: object
    tokenizer: object
    eagle3: object

    def engine(self, mode: str, kw: dict, **limits):
        """An engine of ``mode`` over these models (``kw``: draft_len or choices)."""
        extra = {"draft": self.draft} if mode == "draft_target" else {}
        extra |= {"heads": self.heads} if mode == "medusa" else {}
        extra |= {"eagle3": self.eagle3} if mode == "eagle3" else {}
        return make_engine(mode, self.target, self.tokenizer, **extra, **kw, **limits)


def load_tiny_models(device_name: str) -> TinyModels:
    """Make (once per machine) and load the tiny models; float32 on CPU."""
    dirs = ensure_tiny_models(tiny_models_dir())
    device = resolve_device(device_name)
    dtype = resolve_dtype("auto", device, dirs["target"])
    target = load_causal_lm(dirs["target"], dtype, device)
    return TinyModels(
        device,
        dtype,
        target,
        load_causal_lm(dirs["draft"], dtype, device),
        load_medusa_heads(dirs["medusa"], dtype, device),
        AutoTokenizer.from_pretrained(dirs["target"]),
        load_eagle3(dirs["eagle3"], target, dtype, device),
    )


@dataclass
class Tally:
    """Decode-phase totals of one config over all its generations."""

    decode_ns: int = 0
    tokens: int = 0
    steps: int = 0
    proposed: int = 0
    accepted: int = 0
    outputs: list = field(default_factory=list)

    def add(self, engine, prompt: list[int], max_tokens: int) -> None:
        """One generation; decode time runs from the first step (the prefill) to the last."""
        it = engine.generate(prompt, max_tokens, end_id=-1)
        first = next(it)
        t0 = time.perf_counter_ns()
        rest = list(it)
        self.decode_ns += time.perf_counter_ns() - t0
        self.outputs.append([t for s in [first, *rest] for t in s.token_ids])
        self.tokens += sum(len(s.token_ids) for s in rest)
        self.steps += len(rest)
        self.proposed += sum(s.draft_proposed for s in rest)
        self.accepted += sum(s.draft_accepted for s in rest)

    @property
    def tok_s(self) -> float:
        return self.tokens / (self.decode_ns / 1e9)

    @property
    def accept_len(self) -> float:
        return self.tokens / self.steps

    @property
    def accept_rate(self) -> float:
        return self.accepted / self.proposed if self.proposed else float("nan")


def forward_ms(runner: ModelRunner, prompt: list[int], q: int, reps: int = 30) -> float:
    """Median wall time of one q-token step at ~the prompt length (ms)."""
    times = []
    with torch.inference_mode():
        runner.prefill(0, prompt)
        for _ in range(reps + 3):
            t0 = time.perf_counter_ns()
            runner.forward([prompt[:q]])
            times.append(time.perf_counter_ns() - t0)
            runner.crop(0, len(prompt))
    return statistics.median(times[3:]) / 1e6


def heads_ms(
    heads, hidden_size: int, depth: int, device, dtype, reps: int = 30
) -> float:
    hidden = torch.randn(hidden_size, device=device, dtype=dtype)
    times = []
    with torch.inference_mode():
        for _ in range(reps + 3):
            t0 = time.perf_counter_ns()
            torch.stack([heads[d](hidden) for d in range(depth)]).topk(2, dim=-1)
            times.append(time.perf_counter_ns() - t0)
    return statistics.median(times[3:]) / 1e6


def eagle_ms(eagle, prompt: list[int], seq: int, reps: int = 30) -> float:
    """Median wall time of one 1-token EAGLE-3 draft step, LM head included (ms)."""
    runner = Eagle3Runner(eagle, seq + 8)
    hidden = torch.zeros(len(prompt), eagle.config.hidden_size, dtype=eagle.dtype)
    times = []
    with torch.inference_mode():
        runner.prefill_with(0, prompt, hidden)
        for _ in range(reps + 3):
            t0 = time.perf_counter_ns()
            eagle.logits(runner.forward_with([prompt[:1]], [hidden[:1]]))
            times.append(time.perf_counter_ns() - t0)
            runner.crop(0, len(prompt))
    return statistics.median(times[3:]) / 1e6


def measure_costs(models, prompt, seq: int) -> dict[str, float]:
    """Median ms of every forward shape the configs use (keys ``t1``, ``t5``, ``d1``,
    ``e1``, ``h2``)."""
    target, heads = models.target, models.heads
    t_run, d_run = ModelRunner(target, seq + 8), ModelRunner(models.draft, seq + 8)
    costs = {
        "d1": forward_ms(d_run, prompt, 1),
        "e1": eagle_ms(models.eagle3, prompt, seq),
    }
    for q in sorted({1} | {q for _, _, q, _ in _shapes()}):
        costs[f"t{q}"] = forward_ms(t_run, prompt, q)
    for depth in (1, 2, 3):
        costs[f"h{depth}"] = heads_ms(
            heads, target.config.hidden_size, depth, target.device, target.dtype
        )
    return costs


def _shapes() -> list[tuple[str, str, int, int]]:
    """(label, mode, verification width q, draft forwards or head depth) per config."""
    out = []
    for label, mode, kw in CONFIGS:
        if mode in ("draft_target", "ngram", "eagle3"):
            k = kw["draft_len"]
            if "draft_len_schedule" in kw:
                k = DraftLenPolicy.build(
                    k, schedule=kw["draft_len_schedule"]
                ).draft_len(1)
            out.append((label, mode, k + 1, 0 if mode == "ngram" else k))
        elif mode == "medusa":
            depth = max(len(c) for c in kw["choices"])
            out.append((label, mode, len(kw["choices"]) + 1, depth))
        else:
            out.append((label, mode, 1, 0))
    return out


def predicted_ratio(
    costs: dict[str, float], mode: str, q: int, n: int, accept_len: float
) -> float:
    """``accept_len × t_target(1) / step cost`` (see the module docstring; n-gram drafts
    cost no forward, and its step is costed at the full width K + 1)."""
    step = costs[f"t{q}"]
    if mode == "draft_target":
        step += n * costs["d1"]
    elif mode == "eagle3":
        step += n * costs["e1"]
    elif mode == "medusa":
        step += costs[f"h{n}"]
    return accept_len * costs["t1"] / step


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    models = load_tiny_models(args.device)
    prompts = held_out_prompts(models.tokenizer, args.prompts, args.prompt_len)
    seq = args.prompt_len + args.max_tokens
    print(
        f"device {models.device} ({models.dtype}), torch threads "
        f"{torch.get_num_threads()}, "
        f"{len(prompts)} prompts x {args.prompt_len} tokens, {args.max_tokens} new tokens"
    )
    costs = measure_costs(models, prompts[0], seq)
    print(
        "one forward, median ms: " + ", ".join(f"{k} {v:.3f}" for k, v in costs.items())
    )
    print(
        "  (tQ: target over Q tokens, d1: draft over 1, e1: EAGLE-3 draft over 1, "
        "hD: Medusa heads 1..D)"
    )
    engines = {}
    for label, mode, kw in CONFIGS:
        engines[label] = models.engine(
            mode, kw, max_seq_len=seq, max_input_len=args.prompt_len
        )
        engines[label].generate_ids(prompts[0], 8, end_id=-1)  # warm-up
    tallies = {label: Tally() for label in engines}
    # Interleaved (prompt by prompt, mode by mode) so that load from other processes on
    # the machine falls on every mode alike.
    for _ in range(args.repeats):
        for prompt in prompts:
            for label, engine in engines.items():
                tallies[label].add(engine, prompt, args.max_tokens)
    print(
        f"{'mode':18} {'tok/s':>8} {'vs base':>8} {'tok/step':>9} {'accept':>7} "
        f"{'predicted':>10}  lossless"
    )
    base = tallies["baseline"]
    for (label, mode, q, n), res in zip(_shapes(), tallies.values(), strict=True):
        pred = predicted_ratio(costs, mode, q, n, res.accept_len)
        same = "yes" if res.outputs == base.outputs else "NO"
        print(
            f"{label:18} {res.tok_s:8.1f} {res.tok_s / base.tok_s:7.2f}x "
            f"{res.accept_len:9.2f} {res.accept_rate:7.2f} {pred:9.2f}x  {same}"
        )
    print_winners({label: {1: t.tok_s} for label, t in tallies.items()})


def print_winners(rates: dict[str, dict[int, float]]) -> None:
    """Per batch size: the fixed mode with the most tok/s and how close :data:`ADAPTIVE`
    gets to it (``rates``: config label → batch size → tok/s)."""
    print(
        f"per batch size: best fixed mode, and {ADAPTIVE} (schedule {ADAPTIVE_SCHEDULE})"
    )
    for b in next(iter(rates.values())):
        fixed = {label: r[b] for label, r in rates.items() if label != ADAPTIVE}
        best = max(fixed, key=fixed.get)
        line = f"  B={b}: {best} {fixed[best]:.1f} tok/s"
        if ADAPTIVE in rates:
            got = rates[ADAPTIVE][b]
            line += f"; adaptive {got:.1f} tok/s = {got / fixed[best]:.2f} x the best"
        print(line)


if __name__ == "__main__":
    main()
