"""Starting, checking and stopping ``server: trtllm-serve`` variants against a stand-in
``trtllm-serve`` executable (``tests/support/trtllm_serve_fake.py``): a contract test of the
command line, the readiness rule and the process-group stop, not a run of TensorRT-LLM
(TensorRT-LLM cannot be installed on this machine).

The variant is built for real (``trtbench build``, backend trtllm-pytorch, TensorRT-LLM
1.2.1: its contract lists both counter options, so its llm_api.yaml sets them) from Hugging
Face config.json directories; the stand-in serves what the YAML asks for.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.faults import still_running, wait_for
from tests.support.hf_dirs import make_models
from tests.support.trtllm_serve_fake import MODE_ENV, install
from trtbench.core.errors import ServerStartError
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.deploy import load_deploy_spec, serve_variants
from trtbench.pipeline.trtllm_deploy import trtllm_serve_config
from trtbench.pipeline.vllm_deploy import recorded_spec
from trtbench.trtllm_server.server import TrtllmServer, last_error


@pytest.fixture
def built(tmp_path: Path, capsys) -> tuple[RunDir, Path]:
    """A run dir with variant ``ts`` (ngram, server: trtllm-serve, 1.2.1) built, and the
    folder holding the stand-in ``trtllm-serve`` (named in deploy.trtllm_serve)."""
    models = make_models(tmp_path / "m")
    exe = install(tmp_path / "bin")
    spec = {
        "backend": "trtllm-pytorch",
        "trtllm_version": "1.2.1",
        "models": {"target": str(models["target"])},
        "deploy": {"trtllm_serve": str(exe), "ready_timeout_s": 60},
        "variants": [
            {"name": "ts", "mode": "ngram", "max_draft_len": 3},
        ],
    }
    spec["variants"][0]["server"] = "trtllm-serve"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    run = tmp_path / "run"
    code, _, err = run_cli(["build", path, "--out", run], capsys)
    assert code == 0, err
    return RunDir(run), models["target"]


def test_served_started_ready_logged_and_stopped_as_a_group(built):
    rd, target = built
    deploy = load_deploy_spec(rd)
    with serve_variants(rd.root, ("ts",), deploy) as servers:
        [(name, server)] = servers
        assert name == "ts" and isinstance(server, TrtllmServer)
        assert server.model_name == "target"  # the directory's name, as trtllm-serve
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server.argv == [
            str(rd.root.parent / "bin" / "trtllm-serve"),
            str(target),
            "--backend",
            "pytorch",
            "--host",
            "127.0.0.1",
            "--port",
            str(server.port),
            "--extra_llm_api_options",
            str(rd.engine_dir("ts").resolve() / "llm_api.yaml"),
        ]
        models = httpx.get(f"{server.base_url}/models").json()
        assert [m["id"] for m in models["data"]] == ["target"]
        assert server.health() is None
        # the options reached the server: the iteration stats are kept
        # (enable_iter_perf_stats) and /prometheus/metrics is not mounted (return_perf_
        # metrics stays off: its collector would drain GET /metrics)
        assert httpx.get(server.metrics_url).status_code == 404
        with httpx.stream(
            "POST",
            f"{server.base_url}/completions",
            json={"model": "target", "prompt": "hi", "max_tokens": 4, "stream": True},
        ) as reply:
            assert reply.status_code == 200
            reply.read()
        stats = httpx.get(f"http://127.0.0.1:{server.port}/metrics").json()
        assert [s["specDecodingStats"]["numAcceptedTokens"] for s in stats] == [2]
        leader = psutil.Process(server.process.pid)
        procs = [leader, *leader.children(recursive=True)]
        assert len(procs) == 2  # the stand-in and its "worker"
        assert os.getpgid(procs[1].pid) == server.process.pid  # one group
    wait_for(lambda: still_running(procs) == [], 10, "the stopped group to end")
    log = rd.server_log("ts").read_text()
    assert log.startswith("==== trtbench: trtllm-serve start ")
    options = json.loads(log.split("options: ", 1)[1].splitlines()[0])
    assert options["enable_iter_perf_stats"] is True
    assert "return_perf_metrics" not in options


def test_a_server_that_dies_says_why_in_one_line(built, monkeypatch):
    rd, _ = built
    monkeypatch.setenv(MODE_ENV, "die")
    spec = recorded_spec(rd)
    server = TrtllmServer(trtllm_serve_config(rd, "ts", spec))
    with pytest.raises(ServerStartError) as info:
        server.start()
    assert str(info.value) == (
        "trtllm-serve for variant ts exited with code 1 before it was ready: "
        "ValueError: no CUDA device: a stand-in cannot load a model "
        f"(log: {rd.server_log('ts')})"
    )


def test_last_error_reads_tensorrt_llm_log_lines():
    text = (
        "[12/04/2026-12:00:00] [TRT-LLM] [I] Loading model\n"
        "[12/04/2026-12:00:01] [TRT-LLM] [E] Failed to initialize executor\n"
        "[TensorRT-LLM][ERROR] CUDA runtime error in cudaMalloc: out of memory\n"
    )
    assert last_error(text) == "CUDA runtime error in cudaMalloc: out of memory"
    with_exception = text + "torch.OutOfMemoryError: CUDA out of memory.\n"
    assert last_error(with_exception) == "torch.OutOfMemoryError: CUDA out of memory."
    assert last_error("[TRT-LLM] [I] fine\n") == (
        "no error lines in the log since its start"
    )


def test_a_fixed_port_in_use_is_refused(built):
    rd, _ = built
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = trtllm_serve_config(rd, "ts", recorded_spec(rd), port)
        with pytest.raises(ServerStartError) as info:
            TrtllmServer(config).start()
    assert str(info.value) == (
        f"trtllm-serve port {port} is already in use on 127.0.0.1; stop what listens "
        "there or leave the port out to pick a free one"
    )
    assert not rd.server_log("ts").exists()  # refused before anything started
