#!/usr/bin/env python3
"""Benchmark: trtbench's load generator vs a bare ``tritonclient.grpc.aio`` loop.

Both drive the same tritonserver and the same model, which streams one token per response
as fast as the Python backend can send (tests/data/scripted_model with no delays), in
alternating rounds. Printed per client: responses/s over the round (first send → last
response), client CPU time per response (``time.process_time``), and for trtbench the
post-tier cost of turning responses into records. The target is trtbench / bare ≥ 0.9.

    .venv/bin/python scripts/bench_loadgen.py [--concurrency 8] [--requests 32]
        [--tokens 256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc.aio as grpcaio
from tritonclient.grpc import InferInput

from trtbench.profiling.loadtest.grpc_client import probe_model
from trtbench.profiling.loadtest.prompts import Prompt
from trtbench.profiling.loadtest.runner import TierRunner
from trtbench.profiling.loadtest.schedule import Tier
from trtbench.profiling.loadtest.target import LoadSettings, LoadTarget
from trtbench.triton_repo.server import ServerConfig, TritonServer

ROOT = Path(__file__).resolve().parents[1]
MODEL = "fast"
PROMPT = "def bench(): return 1"


def write_repo(dest: Path) -> Path:
    path = ROOT / "tests" / "data" / "scripted_model" / "repo.py"
    spec = importlib.util.spec_from_file_location("scripted_repo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    params = {"first_delay_ms": 0, "step_ms": 0, "tokens_per_step": 1,
              "empty_final": "false"}  # fmt: skip
    return module.write_scripted_repo(dest, {MODEL: params})


async def bare_round(url: str, requests: int, concurrency: int, tokens: int) -> dict:
    """Closed loop with tritonclient.grpc.aio: one stream_infer per request."""
    client = grpcaio.InferenceServerClient(url)

    def inputs() -> list[InferInput]:
        spec = (("text_input", "BYTES", np.array([[PROMPT.encode()]], dtype=np.object_)),
                ("max_tokens", "INT32", np.array([[tokens]], dtype=np.int32)),
                ("stream", "BOOL", np.array([[True]])),
                ("exclude_input_in_output", "BOOL", np.array([[True]])))  # fmt: skip
        out = []
        for name, dtype, value in spec:
            tensor = InferInput(name, list(value.shape), dtype)
            tensor.set_data_from_numpy(value)
            out.append(tensor)
        return out

    async def one() -> tuple[int, int, int]:
        async def request():
            yield {"model_name": MODEL, "inputs": inputs()}

        sent, count = time.perf_counter_ns(), 0
        async for result, error in client.stream_infer(request()):
            if error is not None:
                raise RuntimeError(str(error))
            count += 1
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
        return sent, time.perf_counter_ns(), count

    issued = 0
    results: list[tuple[int, int, int]] = []

    async def worker() -> None:
        nonlocal issued
        while issued < requests:
            issued += 1
            results.append(await one())

    cpu = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu = time.process_time() - cpu
    await client.close()
    return _figures(results, cpu)


def _figures(
    results: list[tuple[int, int, int]], cpu_s: float, extra: dict | None = None
):
    responses = sum(n for _, _, n in results)
    span_s = (max(e for _, e, _ in results) - min(s for s, _, _ in results)) / 1e9
    return {"responses": responses, "responses_per_s": responses / span_s,
            "cpu_us_per_response": cpu_s / responses * 1e6, **(extra or {})}  # fmt: skip


class ListSink:
    """Keeps the request records (the benchmark's rounds are small)."""

    def __init__(self) -> None:
        self.requests: list = []

    def add(self, request, responses) -> None:
        self.requests.append(request)


def trtbench_round(target: LoadTarget, requests: int, concurrency: int, tokens: int):
    """The same closed loop through trtbench's runner (records made as requests end)."""
    prompts = [Prompt("bench", PROMPT, 8, tokens, "words")]
    settings = LoadSettings(requests_per_tier=requests, warmup_requests=0)
    sink = ListSink()
    runner = TierRunner(target, prompts, settings, None, None, sink)

    async def go() -> float:
        import grpc  # noqa: PLC0415
        from tritonclient.grpc import service_pb2_grpc  # noqa: PLC0415

        async with grpc.aio.insecure_channel(target.url) as channel:
            runner.stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            cpu = time.process_time()
            await runner.closed_loop("bench", Tier(concurrency=concurrency))
            return time.process_time() - cpu

    cpu = asyncio.run(go())
    reqs = sink.requests
    errors = [r.error for r in reqs if r.error]
    if errors:
        raise RuntimeError(errors[0])
    results = [
        (r.sent_ns, r.end_ns, r.token_responses + r.empty_responses) for r in reqs
    ]
    return _figures(results, cpu, {"requests": len(reqs)})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = write_repo(Path(tmp) / "repo")
        config = ServerConfig(repo, Path(tmp) / "server.log", models=(MODEL,))
        with TritonServer(config) as server:
            interface = asyncio.run(probe_model(server.grpc_url, MODEL))
            target = LoadTarget(server.grpc_url, interface, "stream")
            shape = (args.requests, args.concurrency, args.tokens)
            trtbench_round(target, args.concurrency, args.concurrency, 16)  # warm up
            asyncio.run(
                bare_round(server.grpc_url, args.concurrency, args.concurrency, 16)
            )
            ours, bare = [], []
            for i in range(args.rounds):
                ours.append(trtbench_round(target, *shape))
                bare.append(asyncio.run(bare_round(server.grpc_url, *shape)))
                print(f"round {i + 1}: trtbench {ours[-1]['responses_per_s']:.0f} resp/s, "
                      f"bare aio {bare[-1]['responses_per_s']:.0f} resp/s")  # fmt: skip
    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    ratio = med(ours, "responses_per_s") / med(bare, "responses_per_s")
    print(
        f"setup: {args.requests} requests x {args.tokens} tokens (one per response), "
        f"concurrency {args.concurrency}, {args.rounds} rounds, medians below"
    )
    print(
        f"trtbench generator : {med(ours, 'responses_per_s'):9.0f} responses/s, "
        f"{med(ours, 'cpu_us_per_response'):6.1f} us client CPU/response, records included"
    )
    print(
        f"bare tritonclient  : {med(bare, 'responses_per_s'):9.0f} responses/s, "
        f"{med(bare, 'cpu_us_per_response'):6.1f} us client CPU/response"
    )
    print(f"ratio trtbench / bare = {ratio:.3f} (target >= 0.9): "
          f"{'OK' if ratio >= 0.9 else 'BELOW TARGET'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
