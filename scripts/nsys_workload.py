"""A CUDA workload with a known launch pattern, to record under Nsight Systems and check
``trtbench analyze nsys`` against (scripts/gpu_nsys_check.sh runs both).

Per step, inside an NVTX range ``decode_step#N`` opened by the main thread:

- eager steps (the first ``--steps``): the main thread launches ``--kernels`` elementwise
  kernels (``add_`` on a 1024-element tensor, one kernel each) while a second thread of the same
  process launches ``--side`` kernels on its own stream, both inside the window;
- graph steps (the next ``--steps``): one replay of a CUDA graph captured from the same
  ``--kernels`` launches (one ``cudaGraphLaunch``; with ``--cuda-graph-trace=node``, one GPU
  row per node).

So the expected ``steps.csv`` rows: eager ``launch_calls`` = kernels + side, ``owner_launch_calls``
= kernels, ``launch_threads`` = 2; graph ``launch_calls`` = 1, ``graph_launches`` = 1,
``kernels`` = ``graph_kernels`` = kernels. The numbers are written to ``--expect`` as JSON.

Usage: nsys profile --trace=cuda,nvtx --cuda-graph-trace=node -o OUT python
       scripts/nsys_workload.py --expect expect.json [--steps 20] [--kernels 40] [--side 7]
"""

from __future__ import annotations

import argparse
import json
import threading
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--kernels", type=int, default=40)
    parser.add_argument("--side", type=int, default=7)
    args = parser.parse_args()
    dev = torch.device("cuda")
    x = torch.zeros(1024, device=dev)
    y = torch.zeros(1024, device=dev)
    side_stream = torch.cuda.Stream()
    go, done = threading.Event(), threading.Event()
    stop = False

    def side() -> None:
        with torch.cuda.stream(side_stream):
            while True:
                go.wait()
                go.clear()
                if stop:
                    return
                for _ in range(args.side):
                    y.add_(1.0)
                done.set()

    for _ in range(3):  # warm-up outside any range: first-call kernels and allocations
        x.add_(1.0)
        y.add_(1.0)
    torch.cuda.synchronize()
    worker = threading.Thread(target=side, name="side-launcher")
    worker.start()
    for step in range(args.steps):
        torch.cuda.nvtx.range_push(f"decode_step#{step}")
        go.set()
        for _ in range(args.kernels):
            x.add_(1.0)
        done.wait()
        done.clear()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    stop = True
    go.set()
    worker.join()

    capture_stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(capture_stream):
        x.add_(1.0)  # warm-up on the capture stream, as torch's docs do before capture
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=capture_stream):
            for _ in range(args.kernels):
                x.add_(1.0)
    torch.cuda.synchronize()
    for step in range(args.steps, 2 * args.steps):
        torch.cuda.nvtx.range_push(f"decode_step#{step}")
        graph.replay()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    expected = {
        "eager_steps": args.steps,
        "graph_steps": args.steps,
        "eager": {
            "launch_calls": args.kernels + args.side,
            "owner_launch_calls": args.kernels,
            "launch_threads": 2,
            "kernels": args.kernels + args.side,
        },
        "graph": {
            "launch_calls": 1,
            "graph_launches": 1,
            "kernels": args.kernels,
            "graph_kernels": args.kernels,
        },
        "x_final": float(x[0].item()),
    }
    args.expect.write_text(json.dumps(expected, indent=1))


if __name__ == "__main__":
    main()
