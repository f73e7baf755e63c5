#!/usr/bin/env python3
"""Benchmark: the timing figures the test suite measures but does not hold.

The tests assert what holds on any host (counts, orderings, causality, bounds with a
saturated core's margin); the figures a quiet host reaches are recorded by
``tests/support/timing.py``. This script runs those tests once, collects the figures and
prints each beside its target::

    .venv/bin/python scripts/bench_timing.py [--vllm] [--json OUT]

``--vllm`` adds ``tests/integration/test_vllm_bench_serve_agreement.py`` (a vLLM server
start and ~1 min more; needs ``.venv-vllm``). Run it on a quiet host: a figure over its
target there is a regression; on a busy host it is the host. Exit status: pytest's (the
tests' own assertions), never the figures'.

Where each figure comes from (what the test holds instead):

==============================================  ============  ===============================
figure                                          target        the test holds
==============================================  ============  ===============================
loopback: health() of a stopped server          ≤ 1 s         returns (timeout + 10 s)
loopback: SIGKILLed server named as exited      ≤ 1 s         named within 10 s
faults: killed server's tier ended after        ≤ 1 s         ≤ 10 s (request timeout 120 s)
load generator: TTFT/E2E p50 − server's stamps  ≤ 2 ms        ≥ 0 and < 50 ms
load generator: TPOT mean, ICL p50 − server's   ≤ 2 ms        within 40 % (a factor 2 fails)
open loop: client lag max / delay max           ≤ 10 / 20 ms  < half the slot wait / causal
watcher: exit / verify() reported after         ≤ 0.45/0.15 s one check made
run lock: second writer refused after           ≤ 2 s         raises (a wait would hang)
run lock: second CLI writer refused after       ≤ 5 s         exits 2 while the first runs
tiny models: cached set found in                ≤ 0.5 s       torch never imported
event-loop lag sampler: p50 of unblocked wakes  ≤ 30 ms       < half the blocked wake
vllm bench serve agreement: relative gaps       ≤ 1.0 / 2.0   exact counts and definitions
==============================================  ============  ===============================
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = [
    "tests/integration/test_loopback.py",
    "tests/integration/test_faults.py::"
    "test_killed_server_stops_its_tier_long_before_a_request_timeout",
    "tests/integration/test_faults.py::"
    "test_second_writer_is_refused_at_once_naming_the_holder",
    "tests/integration/test_loadgen_ground_truth.py::"
    "test_ttft_and_itl_match_the_script_at_concurrency_1_and_16",
    "tests/integration/test_loadgen_ground_truth.py::"
    "test_non_streaming_endpoint_gives_one_response",
    "tests/integration/test_open_loop_cap_live.py",
    "tests/unit/profiling/loadtest/test_health.py",
    "tests/unit/core/test_run_lock.py",
    "tests/unit/builders/tiny/test_tiny_models.py::"
    "test_complete_cache_is_reused_quickly_without_torch",
    "tests/unit/profiling/loadtest/test_client_timing.py",
]
VLLM_TESTS = ["tests/integration/test_vllm_bench_serve_agreement.py"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--vllm", action="store_true", help="add the vLLM agreement test"
    )
    parser.add_argument(
        "--json", type=Path, help="also write the figures as JSON lines"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "timing.jsonl"
        env = {**os.environ, "TRTBENCH_TIMING_LOG": str(log)}
        tests = TESTS + (VLLM_TESTS if args.vllm else [])
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests]
        code = subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode
        lines = log.read_text().splitlines() if log.is_file() else []
    figures = [json.loads(line) for line in lines]
    if args.json:
        args.json.write_text("".join(line + "\n" for line in lines))
    width = max([len(f["figure"]) for f in figures] + [6])
    print(f"\n{'figure':<{width}}  {'measured':>10}  {'target':>8}  on target")
    for f in figures:
        ok = "yes" if f["value"] <= f["target"] else "NO"
        value, target = f"{f['value']:.4g} {f['unit']}", f"{f['target']:g}"
        print(f"{f['figure']:<{width}}  {value:>10}  {target:>8}  {ok}")
    over = sum(f["value"] > f["target"] for f in figures)
    print(f"{len(figures)} figures, {over} over target; pytest exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
