#!/usr/bin/env python3
"""GPU proof: decode-step time, speedups, CUDA-graph launch overhead, NVML and lossless, in process.

Usage: scripts/gpu_proof.py --device cuda [--out DIR] [--models DIR] [--modes a,b]
       [--dtypes float32,bfloat16] [--batch-sizes 1,8,32,64] [--max-tokens 96]
       [--prompt-len 32] [--trace-steps 32] [--trace-dtypes bfloat16] [--keep-traces]
       [--threads N] [--memory-interval-ms 100] [--repeats 3]

Runs the PyTorch reference engine on the tiny models (made on first use, or the carried
folder given by --models) for every mode, dtype, batch size and eager / CUDA graphs (each
configuration warmed up at its own shape, then timed --repeats times: CUDA events on a GPU,
host perf_counter on CPU, the clock column says which); traces
--trace-steps decode steps per configuration of the --trace-dtypes with torch.profiler and
analyses them with trtbench's own Kineto analysis; samples NVML throughout. Writes CSVs,
launch summaries and summary.json under --out and prints a table (docs/gpu_proof.md).

Exit status: 0 done; 1 a speculative mode was not lossless, or a configuration failed (the
others are still measured and everything is written);
2 bad input (one line on stderr: unknown device, mode or dtype, CUDA asked for without
CUDA, an output directory that cannot be written, incomplete carried models).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from trtbench.core.errors import ConfigError, TrtbenchError

# The harness lives beside the GPU tests (tests/gpu/proof/), not in the package.
sys.path.append(str(Path(__file__).resolve().parents[1]))


def _words(text: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in text.split(",") if w.strip())


def _ints(name: str, text: str) -> tuple[int, ...]:
    try:
        return tuple(int(w) for w in _words(text))
    except ValueError:
        raise ConfigError(
            f"{name} {text!r}: not a comma-separated list of integers"
        ) from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cpu, cuda or cuda:N")
    parser.add_argument("--out", type=Path, default=Path("runs/gpu-proof"))
    parser.add_argument("--models", type=Path, default=None, help="carried tiny models")
    parser.add_argument(
        "--modes",
        default=None,
        help="modes measured (default: every mode, baseline,draft_target,ngram,medusa,eagle3)",
    )
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--batch-sizes", default="1,8,32,64")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--trace-steps", type=int, default=32)
    parser.add_argument(
        "--trace-dtypes",
        default=None,
        help="dtypes traced (default: bfloat16 if measured, else the first dtype)",
    )
    parser.add_argument("--keep-traces", action="store_true", help="gzip raw traces")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads")
    parser.add_argument(
        "--memory-interval-ms",
        type=float,
        default=100.0,
        help="in-process NVML sampler period; 0: off (another process samples NVML)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs per configuration"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace):
    """The validated-later settings (list options parsed here).

    Raises:
        ConfigError: a list option that is not integers.
    """
    from tests.gpu.proof.engines import MODES
    from tests.gpu.proof.harness import ProofSettings

    dtypes = _words(args.dtypes)
    if args.trace_dtypes is None:
        trace = ("bfloat16",) if "bfloat16" in dtypes else dtypes[:1]
    else:
        trace = _words(args.trace_dtypes)
    return ProofSettings(
        device=args.device,
        out=args.out,
        models=args.models,
        modes=MODES if args.modes is None else _words(args.modes),
        dtypes=dtypes,
        batch_sizes=_ints("--batch-sizes", args.batch_sizes),
        max_tokens=args.max_tokens,
        prompt_len=args.prompt_len,
        trace_steps=args.trace_steps,
        trace_dtypes=trace,
        keep_traces=args.keep_traces,
        memory_interval_ms=args.memory_interval_ms,
        repeats=args.repeats,
    )


def configure_logging(quiet: bool) -> None:
    """Progress lines on stderr (INFO), or warnings only."""
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="[gpu-proof] %(message)s",
    )
    for noisy in ("httpx", "transformers", "trtbench.profiling", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str] | None = None, log: bool = True) -> int:
    """Run the proof; return the exit status (see the module docstring)."""
    args = parse_args(argv)
    if log:
        configure_logging(args.quiet)
    try:
        import torch
        from transformers.utils import logging as hf_logging

        from tests.gpu.proof.harness import run_gpu_proof

        hf_logging.disable_progress_bar()
        if args.threads > 0:
            torch.set_num_threads(args.threads)
        summary = run_gpu_proof(settings_from(args))
    except TrtbenchError as exc:
        print(f"gpu_proof: {str(exc).splitlines()[0]}", file=sys.stderr)
        return exc.exit_code
    print(summary["table"])
    lossless = summary["lossless"]
    print(
        f"\nlossless: {'all' if lossless['all'] else 'FAILED'} ({lossless['compared']} "
        f"comparisons); {summary['elapsed_s']:.1f} s; written to {args.out}"
    )
    for name, item in summary["cuda_only"].items():
        if item["status"] != "ok":
            print(f"{name}: n/a ({item['reason']})")
    for error in summary["errors"]:
        print(f"FAILED: {error}")
    return 0 if lossless["all"] and not summary["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
