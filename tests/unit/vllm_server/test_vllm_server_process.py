"""VllmServer's process handling against a stand-in interpreter (no vLLM needed).

The stand-in takes vLLM's argv, then, as FAKE_MODE says: serves ``/health`` and
``/v1/models`` (after starting a child that would outlive a leader-only kill), or writes a
vLLM-style failure and exits 1. The real server is in tests/integration/test_vllm_server.py.
"""

from __future__ import annotations

import os
import socket
import sys
import textwrap
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.faults import still_running, wait_for
from trtbench.core.errors import ConfigError, ServerStartError
from trtbench.spec.bench import ModelsSpec, VariantSpec
from trtbench.vllm_server.args import check_vllm_variants
from trtbench.vllm_server.server import VllmServer, VllmServerConfig, last_error

FAKE = textwrap.dedent(
    """
    import http.server, json, os, subprocess, sys, time
    args = sys.argv[3:]  # after "-m MODULE"
    port = int(args[args.index("--port") + 1])
    name = args[args.index("--served-model-name") + 1]
    if os.environ["FAKE_MODE"] == "die":
        print("(EngineCore pid=7) ERROR 12-02 07:36:45 [cpu_worker.py:87] ValueError: "
              "Available memory on node 0 is less than desired", flush=True)
        print("RuntimeError: Engine core initialization failed. See root cause above.")
        sys.exit(1)
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = {"/health": b"", "/v1/models": json.dumps(
                {"data": [{"id": name}]}).encode()}.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")
        def log_message(self, *a):
            pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    script = tmp_path / "fake_vllm.py"
    script.write_text(FAKE)
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    python.chmod(0o755)
    return python


def server(fake_python: Path, tmp_path: Path, mode: str, port: int | None = None):
    config = VllmServerConfig(
        python=fake_python,
        variant=VariantSpec(name="base", mode="baseline"),
        models=ModelsSpec(target=tmp_path / "target"),
        log_path=tmp_path / "server" / "base.log",
        port=port,
        ready_timeout_s=30,
    )
    return VllmServer(config, environ={**os.environ, "FAKE_MODE": mode})


def test_ready_urls_health_and_stop_leave_no_process(fake_python, tmp_path):
    srv = server(fake_python, tmp_path, "serve")
    with srv:
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
        assert srv.model_name == "base"
        models = httpx.get(f"{srv.base_url}/models").json()
        assert models == {"data": [{"id": "base"}]}
        assert srv.health() is None
        leader = psutil.Process(srv.process.pid)
        procs = [leader, *leader.children(recursive=True)]
        assert len(procs) == 2  # the stand-in and its child
        assert os.getpgid(procs[1].pid) == srv.process.pid  # one group
        with pytest.raises(RuntimeError, match="already started"):
            srv.start()
    # SIGKILL lands within moments (2 busy cores); then none of the group runs
    wait_for(lambda: still_running(procs) == [], 10, "the stopped group to end")
    assert "exited with code -15 (signal SIGTERM)" in srv.health()
    log = (tmp_path / "server" / "base.log").read_text()
    assert log.startswith("==== trtbench: vllm start ") and "--port" in log


def test_a_server_that_dies_says_why_in_one_line(fake_python, tmp_path):
    with pytest.raises(ServerStartError) as info:
        server(fake_python, tmp_path, "die").start()
    message = str(info.value)
    assert message == (
        "vLLM server for variant base exited with code 1 before it was ready: "
        "ValueError: Available memory on node 0 is less than desired "
        f"(log: {tmp_path / 'server' / 'base.log'})"
    )


def test_a_fixed_port_in_use_is_refused(fake_python, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServerStartError, match=f"port {port} is already in use"):
            server(fake_python, tmp_path, "serve", port).start()


def test_last_error_prefers_the_root_cause():
    text = (
        "(APIServer pid=1) INFO 12-02 07:36:10 [x.py:1] starting\n"
        "(VllmWorker-0 pid=9) ERROR 12-02 07:36:45 [m.py:953] Traceback (most recent call last):\n"
        "(VllmWorker-0 pid=9) ERROR 12-02 07:36:45 [m.py:953] ValueError: bad memory\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed\n"
    )
    assert last_error(text) == "ValueError: bad memory"
    assert last_error("only info\n") == "no error lines in the log since its start"
    generic = "RuntimeError: Engine core initialization failed. See root cause above."
    assert last_error(generic) == generic


def test_preflight_check_names_the_missing_interpreter(tmp_path):
    models = ModelsSpec(target=tmp_path / "t")
    triton = VariantSpec(name="t", mode="baseline")
    assert check_vllm_variants(tmp_path / "none", [triton], models) is None
    served = VariantSpec(name="v", mode="baseline", server="vllm")
    with pytest.raises(ConfigError, match="deploy.vllm_python .*bootstrap_vllm.sh"):
        check_vllm_variants(tmp_path / "none", [triton, served], models)
