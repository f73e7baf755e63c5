#!/usr/bin/env python
"""Record a PyTorch profiler (Kineto) trace of the reference engine, one range per step.

Usage: .venv/bin/python scripts/trace_reference.py OUT.json [--engine-dir RUN/engines/V]
       [--mode baseline|draft_target|medusa] [--prompts 4] [--max-tokens 32] [--device auto]

Without --engine-dir the tiny models are used (``--mode``; draft K=4, the example's Medusa
tree). The prompts are batched together (max_batch_size = --prompts); each prefill is a
range ``prefill``, each batched decode step ``decode_step#N`` (+ NVTX ranges on CUDA). On a
GPU, analyze the trace with ``trtbench analyze kineto OUT.json``; a CPU trace has no CUDA
activity, which that analyzer (launch overhead) refuses.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from trtbench.builders.reference.loading import load_engine
from trtbench.builders.reference.tracing import record_kineto_trace

TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]  # examples/tiny-cpu.yaml


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--engine-dir", type=Path, default=None)
    parser.add_argument(
        "--mode", default="medusa", choices=["baseline", "draft_target", "medusa"]
    )
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    return parser.parse_args()


def tiny_engine(mode: str, slots: int, device: str):
    from transformers import AutoTokenizer

    from trtbench.builders.reference.loading import (
        load_causal_lm,
        make_engine,
        resolve_device,
    )
    from trtbench.builders.reference.medusa_heads import load_medusa_heads
    from trtbench.builders.tiny.tiny_models import ensure_tiny_models
    from trtbench.core.paths import tiny_models_dir

    dirs = ensure_tiny_models(tiny_models_dir())
    dev = resolve_device(device)
    extra: dict = {}
    if mode == "draft_target":
        extra = {
            "draft": load_causal_lm(dirs["draft"], torch.float32, dev),
            "draft_len": 4,
        }
    elif mode == "medusa":
        heads = load_medusa_heads(dirs["medusa"], torch.float32, dev)
        extra = {"heads": heads, "choices": TREE}
    return make_engine(
        mode,
        load_causal_lm(dirs["target"], torch.float32, dev),
        AutoTokenizer.from_pretrained(dirs["target"]),
        max_seq_len=256,
        max_input_len=128,
        max_batch_size=slots,
        **extra,
    )


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.engine_dir is not None:
        engine = load_engine(args.engine_dir, device=args.device)
    else:
        engine = tiny_engine(args.mode, args.prompts, args.device)
    starts = ["def ", "class ", "import ", "for ", "if ", "return ", "with ", "try:"]
    prompts = [
        engine.tokenizer.encode(starts[i % len(starts)] + "x" * (i // len(starts)))
        for i in range(args.prompts)
    ]
    outputs = record_kineto_trace(engine, prompts, args.out, args.max_tokens)
    events = json.loads(args.out.read_text())["traceEvents"]
    names = [e["name"] for e in events if e.get("cat") == "user_annotation"]
    steps = sum(n.startswith("decode_step#") for n in names)
    print(
        f"{args.out}: {engine.mode} on {engine.device}, {len(prompts)} prompts x "
        f"{args.max_tokens} tokens ({sum(map(len, outputs))} generated), "
        f"{names.count('prefill')} prefill ranges, {steps} decode_step ranges"
    )


if __name__ == "__main__":
    main()
