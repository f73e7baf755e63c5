#!/usr/bin/env python3
"""Benchmark: does trtbench's load generator keep up, at a bare client's cost? (issues 16, 48)

One tritonserver serves a model that streams one token per response as fast as the Python
backend can send (tests/data/scripted_model with no delays). At each concurrency (default
8 and 256), in rounds, the same closed loop is driven by:

- ``trtbench w1``: :func:`~trtbench.profiling.loadtest.driver.runner.run_load` in this process
  (health watcher, loop-lag sampler, signal handlers and record making included; records kept
  in a list);
- ``bare aio``: a bare ``tritonclient.grpc.aio`` loop (one ``stream_infer`` per request, read
  to its end; nothing recorded);
- ``trtbench w2``: :func:`~trtbench.profiling.loadtest.driver.workers.run_workers` with two client
  processes writing their CSV part files.

The headline is the client's CPU time per response (user + system, every thread): the figure a
shared host disturbs least (wall-clock rates move with whatever else runs; CPU seconds per
response much less), and the one that matters where client and server share cores: every
client microsecond is taken from the server being measured. For trtbench it is the tier's
own (``TierOutcome.client_cpu_s``: first send to last end, summed over client processes;
process start-up, imports, the channel's set-up and the warmup not included, as the bare
loop's excludes its client's creation); the whole call's (``getrusage``, set-up or the worker
processes' start-up included) is printed beside it. Each round runs the three clients back to
back (their order reversed every other round), so each round pairs trtbench with the bare loop
under the same host load; the headline is the median over rounds of trtbench w1 / bare and
its range. Also printed: responses/s (responses / (last response − first send)) and its
paired ratio, dispatch lag p99 (sent − ready, ms, from the records). Target (issue 48): w1's
CPU per response at most 1.10 times the bare loop's at every concurrency.

    .venv/bin/python scripts/bench_loadgen.py [--concurrency 8,256] [--tokens 128]
        [--responses 16384] [--rounds 3]
    .venv/bin/python scripts/bench_loadgen.py --records   # records' CPU alone, no server
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import tritonclient.grpc.aio as grpcaio
from tritonclient.grpc import InferInput, service_pb2

from trtbench.profiling.loadtest.clients.grpc_client import probe_model
from trtbench.profiling.loadtest.clients.lean_stream import LeanStreamResponse
from trtbench.profiling.loadtest.clients.response_parse import Exchange
from trtbench.profiling.loadtest.clients.target import LoadSettings, LoadTarget
from trtbench.profiling.loadtest.driver.runner import run_load
from trtbench.profiling.loadtest.driver.workers import run_workers
from trtbench.profiling.loadtest.files.responses import (
    RequestSlot,
    exchange_to_all_records,
)
from trtbench.profiling.loadtest.records.record_sink import RecordFiles
from trtbench.profiling.loadtest.workload.prompts import Prompt
from trtbench.profiling.loadtest.workload.schedule import Tier
from trtbench.triton_repo.server import ServerConfig, TritonServer

ROOT = Path(__file__).resolve().parents[1]
MODEL = "fast"
PROMPT = "def bench(): return 1"
TARGET_CPU_RATIO = 1.10  # trtbench w1 / bare, client CPU per response


def write_repo(dest: Path) -> Path:
    path = ROOT / "tests" / "data" / "scripted_model" / "repo.py"
    spec = importlib.util.spec_from_file_location("scripted_repo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    params = {
        "first_delay_ms": 0,
        "step_ms": 0,
        "tokens_per_step": 1,
        "empty_final": "false",
        "max_batch_size": 256,
    }
    return module.write_scripted_repo(dest, {MODEL: params})


def cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def figures(sent, end, responses, lag_ns, cpu: float, cpu_run: float) -> dict:
    """responses/s over first send → last end, lag p99 (ms), CPU µs per response (the
    load's; ``cpu_run``: the whole call's)."""
    n = int(np.sum(responses))
    span = (np.max(end) - np.min(sent)) / 1e9
    lag = float(np.percentile(lag_ns, 99)) / 1e6 if len(lag_ns) else float("nan")
    return {
        "responses_per_s": n / span,
        "lag_p99_ms": lag,
        "cpu_us_per_response": cpu / n * 1e6,
        "run_cpu_us_per_response": cpu_run / n * 1e6,
        "responses": n,
    }


async def bare_round(url: str, requests: int, concurrency: int, tokens: int) -> dict:
    """Closed loop with tritonclient.grpc.aio: one stream_infer per request."""
    client = grpcaio.InferenceServerClient(url)

    def inputs() -> list[InferInput]:
        spec = (
            ("text_input", "BYTES", np.array([[PROMPT.encode()]], dtype=np.object_)),
            ("max_tokens", "INT32", np.array([[tokens]], dtype=np.int32)),
            ("stream", "BOOL", np.array([[True]])),
            ("exclude_input_in_output", "BOOL", np.array([[True]])),
        )
        out = []
        for name, dtype, value in spec:
            tensor = InferInput(name, list(value.shape), dtype)
            tensor.set_data_from_numpy(value)
            out.append(tensor)
        return out

    async def one() -> tuple[int, int, int]:
        async def request():
            yield {"model_name": MODEL, "inputs": inputs()}

        sent, count, end = time.perf_counter_ns(), 0, 0
        # read to the stream's end (it ends after the final response), so no call is
        # left for the channel's close to cancel
        async for result, error in client.stream_infer(request()):
            if error is not None:
                raise RuntimeError(str(error))
            count += 1
            if result.get_response().parameters["triton_final_response"].bool_param:
                end = time.perf_counter_ns()
        return sent, end, count

    issued = 0
    results: list[tuple[int, int, int]] = []

    async def worker() -> None:
        nonlocal issued
        while issued < requests:
            issued += 1
            results.append(await one())

    cpu = cpu_s(resource.RUSAGE_SELF)
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu = cpu_s(resource.RUSAGE_SELF) - cpu
    await client.close()
    sent, end, count = (np.array(x) for x in zip(*results, strict=True))
    return figures(sent, end, count, [], cpu, cpu)


class ListSink:
    """Keeps every record as it comes (a round is a few thousand requests at most)."""

    def __init__(self) -> None:
        self.requests: list = []
        self.responses: list = []
        self.outputs: list = []

    def add(self, request, responses, output=None) -> None:
        self.requests.append(request)
        self.responses.append(responses)
        self.outputs.append(output)


def prompts_for(tokens: int) -> list[Prompt]:
    return [Prompt("bench", PROMPT, 8, tokens, "words")]


def settings_for(requests: int) -> LoadSettings:
    return LoadSettings(requests_per_tier=requests, warmup_requests=0)


def _check(reqs: pd.DataFrame) -> None:
    errors = reqs["error"].dropna()
    if len(errors):
        raise RuntimeError(str(errors.iloc[0]))


def _frame_figures(reqs: pd.DataFrame, cpu: float, cpu_run: float) -> dict:
    _check(reqs)
    ready = reqs["ready_ns"] if "ready_ns" in reqs else reqs["scheduled_ns"]
    ready = ready.fillna(reqs["scheduled_ns"])
    responses = reqs["token_responses"] + reqs["empty_responses"]
    return figures(
        reqs["sent_ns"].to_numpy(),
        reqs["end_ns"].to_numpy(),
        responses.to_numpy(),
        (reqs["sent_ns"] - ready).to_numpy(),
        cpu,
        cpu_run,
    )


def trtbench_round(target: LoadTarget, requests: int, c: int, tokens: int) -> dict:
    """run_load in this process, one tier at concurrency ``c``."""
    sink = ListSink()
    cpu = cpu_s(resource.RUSAGE_SELF)
    result = run_load(
        target,
        prompts_for(tokens),
        [Tier(concurrency=c)],
        settings_for(requests),
        "bench",
        sink=sink,
    )
    cpu = cpu_s(resource.RUSAGE_SELF) - cpu
    frame = pd.DataFrame([vars(r) for r in sink.requests])
    return _frame_figures(frame, _tier_cpu(result, cpu), cpu)


def workers_round(
    target: LoadTarget, requests: int, c: int, tokens: int, tmp: Path, n: int = 2
) -> dict:
    """run_workers with ``n`` client processes; figures from their part files."""
    files = [
        RecordFiles(tmp / f"w{k}.requests.csv", tmp / f"w{k}.responses.csv")
        for k in range(n)
    ]
    for f in files:
        for path in (f.requests, f.responses):
            path.unlink(missing_ok=True)
    cpu = cpu_s(resource.RUSAGE_CHILDREN)
    result = run_workers(
        target,
        prompts_for(tokens),
        [Tier(concurrency=c)],
        settings_for(requests),
        "bench",
        files=files,
    )
    cpu = cpu_s(resource.RUSAGE_CHILDREN) - cpu
    reqs = pd.concat([pd.read_csv(f.requests) for f in files], ignore_index=True)
    return _frame_figures(reqs, _tier_cpu(result, cpu), cpu)


def _tier_cpu(result, whole: float) -> float:
    """The tier's client CPU seconds; ``whole`` where it is not measured (trtbench before
    issue 48, for before/after runs of this script)."""
    measured = getattr(result.tiers[0], "client_cpu_s", None)
    return whole if measured is None else measured


CLIENTS = ("trtbench w1", "bare aio", "trtbench w2")


def records_cost(tokens: int, repeats: int = 7, number: int = 200) -> None:
    """CPU µs per response of making one request's records from ``tokens`` lean responses
    shaped as the scripted model's (text, one id, two INT32 counts; the last one final),
    best of ``repeats`` (no server: the part of the client's cost trtbench adds)."""
    messages = []
    for i in range(tokens):
        msg = service_pb2.ModelInferResponse(model_name=MODEL, id="r")
        text = f"t{i} ".encode()
        for name, dtype, raw in (
            ("text_output", "BYTES", len(text).to_bytes(4, "little") + text),
            ("output_ids", "INT32", np.int32(100 + i).tobytes()),
            ("draft_tokens_proposed", "INT32", np.int32(4).tobytes()),
            ("draft_tokens_accepted", "INT32", np.int32(i % 3).tobytes()),
        ):
            msg.outputs.add(name=name, datatype=dtype, shape=[1, 1])
            msg.raw_output_contents.append(raw)
        msg.parameters["triton_final_response"].bool_param = i == tokens - 1
        wire = service_pb2.ModelStreamInferResponse(infer_response=msg)
        messages.append(LeanStreamResponse.FromString(wire.SerializeToString()))
    exchange = Exchange(
        0, tokens, [(i, m.infer_response) for i, m in enumerate(messages)]
    )
    prompt, slot = (
        prompts_for(tokens)[0],
        RequestSlot("bench", Tier(concurrency=8), 0, 0),
    )
    best = float("inf")
    for _ in range(repeats):
        cpu = time.process_time()
        for _ in range(number):
            exchange_to_all_records(exchange, prompt, slot)
        best = min(best, time.process_time() - cpu)
    print(
        f"records of a {tokens}-response request: {best / number / tokens * 1e6:.2f} us "
        f"of CPU per response (best of {repeats} x {number}; load average "
        f"{os.getloadavg()[0]:.1f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="8,256")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument(
        "--responses",
        type=int,
        default=16384,
        help="responses per round (at least 2 requests per slot)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--records",
        action="store_true",
        help="only the CPU of making a request's records (no server)",
    )
    args = parser.parse_args()
    if args.records:
        records_cost(args.tokens)
        return 0
    levels = [int(c) for c in args.concurrency.split(",")]
    rows: dict[tuple[int, str], list[dict]] = {}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        repo = write_repo(tmp / "repo")
        config = ServerConfig(repo, tmp / "server.log", models=(MODEL,))
        with TritonServer(config) as server:
            interface = asyncio.run(probe_model(server.grpc_url, MODEL))
            target = LoadTarget(server.grpc_url, interface, "stream")
            trtbench_round(target, 8, 8, 16)  # warm up both paths
            asyncio.run(bare_round(server.grpc_url, 8, 8, 16))
            for c in levels:
                requests = max(2 * c, args.responses // args.tokens)
                shape = (requests, c, args.tokens)
                run = {
                    "trtbench w1": lambda s=shape: trtbench_round(target, *s),
                    "bare aio": lambda s=shape: asyncio.run(
                        bare_round(server.grpc_url, *s)
                    ),
                    "trtbench w2": lambda s=shape: workers_round(target, *s, tmp),
                }
                for i in range(args.rounds):
                    order = CLIENTS if i % 2 == 0 else CLIENTS[::-1]
                    got = {who: run[who]() for who in order}
                    for who, fig in got.items():
                        rows.setdefault((c, who), []).append(fig)
                    print(
                        f"c{c} round {i + 1}: "
                        + ", ".join(
                            f"{who} {got[who]['responses_per_s']:.0f}/s "
                            f"{got[who]['cpu_us_per_response']:.1f} us"
                            for who in CLIENTS
                        ),
                        flush=True,
                    )
                    load.append(os.getloadavg()[0])
    return report(rows, levels, args, load)


def _ratios(rows: dict, c: int, figure: str) -> list[float]:
    """Per round, trtbench w1's ``figure`` over the bare loop's (the same round)."""
    w1, bare = rows[(c, "trtbench w1")], rows[(c, "bare aio")]
    return [a[figure] / b[figure] for a, b in zip(w1, bare, strict=True)]


def report(rows: dict, levels: list[int], args: argparse.Namespace, load) -> int:
    med = {
        k: {f: statistics.median(r[f] for r in v) for f in v[0]}
        for k, v in rows.items()
    }
    print(
        f"\n{args.tokens} tokens/request, one per response; >= {args.responses} "
        f"responses per round; medians of {args.rounds} rounds; {os.cpu_count()} CPUs, "
        f"load average {min(load):.1f}-{max(load):.1f} (client and server share them)"
    )
    print(
        f"{'conc':>5} {'client':<12} {'CPU us/resp':>12} {'(whole call)':>13} "
        f"{'resp/s':>9} {'lag p99 ms':>11}"
    )
    for c in levels:
        for who in CLIENTS:
            m = med[(c, who)]
            lag = "-" if np.isnan(m["lag_p99_ms"]) else f"{m['lag_p99_ms']:.3f}"
            print(
                f"{c:>5} {who:<12} {m['cpu_us_per_response']:>12.1f} "
                f"{m['run_cpu_us_per_response']:>13.1f} {m['responses_per_s']:>9.0f} "
                f"{lag:>11}"
            )
    for c in levels:
        cpu = _ratios(rows, c, "cpu_us_per_response")
        rate = _ratios(rows, c, "responses_per_s")
        ratio = statistics.median(cpu)
        verdict = "met" if ratio <= TARGET_CPU_RATIO else "NOT met"
        w2 = med[(c, "trtbench w2")]["cpu_us_per_response"]
        print(
            f"c{c}: client CPU per response, trtbench w1 / bare = {ratio:.3f} (range "
            f"{min(cpu):.3f}-{max(cpu):.3f} over {len(cpu)} paired rounds; target <= "
            f"{TARGET_CPU_RATIO}: {verdict}); responses/s w1 / bare = "
            f"{statistics.median(rate):.3f} ({min(rate):.3f}-{max(rate):.3f}); w2 "
            f"{w2:.1f} us per response ({w2 / med[(c, 'bare aio')]['cpu_us_per_response']:.2f}"
            " x bare)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
