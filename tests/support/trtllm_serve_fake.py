"""A stand-in ``trtllm-serve`` executable: a contract test of how trtbench starts, reads and
stops trtllm-serve, not a run of TensorRT-LLM (TensorRT-LLM cannot be installed here: no GPU).

:func:`install` writes an executable called ``trtllm-serve`` into a folder (put it on
``$PATH``, or name it in ``deploy.trtllm_serve``). It takes the options trtbench passes, as
``tensorrt_llm/commands/serve.py`` declares them (``MODEL``, ``--backend`` choices
pytorch / tensorrt / _autodeploy, ``--host`` default localhost, ``--port`` default 8000,
``--extra_llm_api_options`` and its alias ``--config``, ``--log_level``, ``--tp_size``), reads
the LLM-API YAML, starts a child that would outlive a leader-only kill (trtllm-serve's MPI
workers), and serves the endpoints of :mod:`tests.support.trtllm_serve_standin` on
``HOST:PORT`` the way the options ask: ``GET /metrics`` (iteration stats only with
``enable_iter_perf_stats``), ``GET /prometheus/metrics`` only with ``return_perf_metrics``
(``openai_server.py`` mounts it only then), ``GET /health``, ``GET /v1/models`` listing the
model directory's name (``model_dir.name``), ``POST /v1/completions``.

With ``FAKE_TRTLLM_MODE=die`` in its environment it writes a TensorRT-LLM-style failure to
its log and exits 1 instead. Each start writes one line ``fake trtllm-serve: ARGV`` and one
``options: {...}`` (the YAML as read) first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

MODE_ENV = "FAKE_TRTLLM_MODE"
REPO_ROOT = Path(__file__).resolve().parents[2]


def install(folder: Path) -> Path:
    """Write the executable ``folder/trtllm-serve`` (this module run by the test's
    interpreter); returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "trtllm-serve"
    exe.write_text(
        f'#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} "$@"\n'
    )
    exe.chmod(0o755)
    return exe


def parse(argv: list[str]) -> argparse.Namespace:
    """trtllm-serve's options that trtbench uses (``serve.py``'s click options)."""
    p = argparse.ArgumentParser(prog="trtllm-serve")
    p.add_argument("model")
    p.add_argument(
        "--backend", choices=["pytorch", "tensorrt", "_autodeploy"], default="pytorch"
    )
    p.add_argument("--host", default="localhost")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--extra_llm_api_options", "--config", dest="options")
    p.add_argument("--log_level", default="info")
    p.add_argument("--tp_size", "--tensor_parallel_size", type=int, default=1)
    return p.parse_args(argv)


def main(argv: list[str]) -> None:
    sys.path.insert(0, str(REPO_ROOT))  # tests.support, run as a script
    import yaml
    from aiohttp import web

    from tests.support.trtllm_serve_standin import StandIn

    args = parse(argv)
    print(f"fake trtllm-serve: {json.dumps(argv)}", flush=True)
    options = yaml.safe_load(Path(args.options).read_text()) if args.options else {}
    print(f"options: {json.dumps(options, sort_keys=True)}", flush=True)
    if os.environ.get(MODE_ENV) == "die":
        print("[12/04/2026-12:00:00] [TRT-LLM] [I] Loading model", flush=True)
        print("[12/04/2026-12:00:01] [TRT-LLM] [E] Failed to initialize executor")
        print("RuntimeError: Executor worker returned error", flush=True)
        print("ValueError: no CUDA device: a stand-in cannot load a model", flush=True)
        sys.exit(1)
    # A child in the server's process group, as trtllm-serve's MPI workers are.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    perf = bool(options.get("return_perf_metrics"))
    model = Path(args.model)
    standin = StandIn(
        per_position=perf,
        iteration=bool(options.get("enable_iter_perf_stats")),
        model=model.name if model.is_dir() else args.model,
    )
    app = web.Application()
    app.router.add_post("/v1/completions", standin.completions)
    app.router.add_get("/metrics", standin.iteration_stats)
    if perf:
        app.router.add_get("/prometheus/metrics", standin.prometheus)

    async def health(_: web.Request) -> web.Response:
        return web.Response(status=200)

    async def models(_: web.Request) -> web.Response:
        card = {"id": standin.model, "object": "model", "owned_by": "tensorrt_llm"}
        return web.json_response({"object": "list", "data": [card]})

    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    time.sleep(0.2)  # "loading the model": connections are refused meanwhile
    web.run_app(app, host=args.host, port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main(sys.argv[1:])
