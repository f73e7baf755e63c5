"""Serve every reference variant from a real tritonserver and stream through it.

The run directory is built with ``trtbench build``'s library from the small real models
(``tiny_models``) and deployed with :func:`trtbench.pipeline.deploy.deploy_run`. For each variant a
real tritonserver streams one request over gRPC ``ModelStreamInfer`` (with
``triton_enable_empty_final_response``), and the token ids, text and draft counts must equal
what the reference engine emits directly in this process: the server adds nothing and loses
nothing. Bad input goes through the CLI (exit 2, one line). After each test, no process of the
server's group is left.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.faults import wait_for
from tests.support.run_specs import deployed_reference_run
from tests.support.serving import Streamed, serve_cli, stop_cli, stream_infer
from trtbench.builders.reference.loading import load_engine
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.deploy import serve
from trtbench.spec.bench import VariantSpec

pytestmark = pytest.mark.integration

# Multi-byte characters make the incremental detokenizer hold pieces back.
PROMPT = "def greet(name):\n    return f'héllo, {name} → ünïcode'\n\ndef "
MAX_TOKENS = 24
TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]
VARIANTS = ("baseline", "draft_target", "medusa")


@pytest.fixture(scope="module")
def run_dir(tiny_models, tmp_path_factory) -> RunDir:
    """A built and deployed run: baseline, draft_target (K=4), medusa (6-node tree)."""
    return deployed_reference_run(
        tmp_path_factory.mktemp("deploy") / "run",
        "deploy-it",
        tiny_models,
        [
            VariantSpec(name="baseline", mode="baseline"),
            VariantSpec(name="draft_target", mode="draft_target", max_draft_len=4),
            VariantSpec(name="medusa", mode="medusa", medusa_choices=TREE),
        ],
    )


def infer_stream(
    url: str, prompt: str, max_tokens: int, stream: bool
) -> list[Streamed]:
    """One request over ModelStreamInfer; every response until the final flag."""
    values = {
        "text_input": prompt,
        "max_tokens": max_tokens,
        "stream": stream,
        "exclude_input_in_output": True,
        "return_perf_metrics": True,
    }
    return stream_infer(url, "ensemble", values)


SUCCESS_2 = 'nv_inference_request_success{model="ensemble",version="1"} 2'


def wait_for_metric(url: str, line: str, timeout_s: float = 10.0) -> str:
    """/metrics text once it holds ``line`` (counters update when a request is released,
    a moment after its final response), or the last text read."""
    deadline = time.monotonic() + timeout_s
    while True:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback
            text = resp.read().decode()
        if line in text or time.monotonic() > deadline:
            return text
        time.sleep(0.1)


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("variant", VARIANTS)
def test_stream_is_lossless_through_the_server(run_dir, variant):
    engine = load_engine(run_dir.engine_dir(variant), device="cpu")
    prompt_ids = engine.tokenizer.encode(PROMPT, add_special_tokens=True)
    steps = list(engine.generate(prompt_ids, MAX_TOKENS))
    all_ids = [t for s in steps for t in s.token_ids]
    text = engine.tokenizer.decode(
        all_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
    )
    with serve(run_dir, variant) as server:
        pgid = server.process.pid
        streamed = infer_stream(server.grpc_url, PROMPT, MAX_TOKENS, stream=True)
        whole = infer_stream(server.grpc_url, PROMPT, MAX_TOKENS, stream=False)
        metrics = wait_for_metric(server.metrics_url, SUCCESS_2)
    assert group_gone(pgid)
    # streaming: one response per engine step, same ids, same draft counts, final on last
    data = [r for r in streamed if r.ids]
    assert [tuple(r.ids) for r in data] == [s.token_ids for s in steps]
    assert [r.draft_counts for r in data] == [
        (s.draft_proposed, s.draft_accepted) for s in steps
    ]
    assert "".join(r.text for r in data) == text
    assert [r.final for r in streamed] == [False] * (len(streamed) - 1) + [True]
    last = streamed[-1]
    proposed = sum(s.draft_proposed for s in steps)
    accepted = sum(s.draft_accepted for s in steps)
    assert last.scalar("total_draft_tokens") == proposed
    assert last.scalar("total_accepted_draft_tokens") == accepted
    assert last.scalar("acceptance_rate") == pytest.approx(
        accepted / proposed if proposed else 0.0
    )
    assert last.scalar("first_token_time_ns") <= last.scalar("last_token_time_ns")
    # non-streaming: one final response with everything
    assert len(whole) == 1 and whole[0].final
    assert whole[0].ids == all_ids and whole[0].text == text
    assert whole[0].draft_counts == (proposed, accepted)
    # two requests answered, both counted by Triton's /metrics
    assert SUCCESS_2 in metrics
    if variant != "baseline":
        assert proposed > 0


CANDIDATES = [
    "import os\nimport sys\n\n\ndef _read(path):\n",
    "class Queue:\n    def __init__(self, maxsize=0):\n",
    "def main(argv=None):\n    parser = argparse.ArgumentParser(",
    "    for key, value in sorted(items):\n        if ",
    "try:\n    import _thread\nexcept ImportError:\n",
    "def greet(name):\n    return name\n",
]


def clear_prompts(engine, count: int) -> list[str]:
    """Prompts whose greedy run (no cache) never has a top-2 logit gap under 1e-3.

    A batched forward may round differently from a one-row forward (~1e-5 on these float32
    logits), which can flip only a near tie; prompts far from ties give the same tokens in
    any batch, on any machine.
    """
    import torch

    model, tok, clear = engine.decoder.target.model, engine.tokenizer, []
    for text in CANDIDATES:
        ids = tok.encode(text, add_special_tokens=True)
        with torch.inference_mode():
            for _ in range(MAX_TOKENS):
                top = model(torch.tensor([ids]), use_cache=False).logits[0, -1].topk(2)
                if float(top.values[0] - top.values[1]) < 1e-3:
                    break
                ids.append(int(top.indices[0]))
            else:
                clear.append(text)
    assert len(clear) >= count, "too few prompts clear of near ties"
    return clear[:count]


def test_concurrent_streams_are_batched_in_flight(run_dir):
    """4 concurrent streams on one draft-target server: each gets its own tokens, and
    generations overlap in time (a one-request-at-a-time server would serve them one after
    another: disjoint first..last token intervals). Only one overlapping pair is required:
    on a busy host a client thread can start after another's request already ended."""
    engine = load_engine(run_dir.engine_dir("draft_target"), device="cpu")
    prompts = clear_prompts(engine, 4)
    want = [
        engine.generate_ids(engine.tokenizer.encode(p), MAX_TOKENS) for p in prompts
    ]
    engine.close()
    results: dict[int, list[Streamed]] = {}
    with serve(run_dir, "draft_target") as server:

        def client(i: int) -> None:
            results[i] = infer_stream(server.grpc_url, prompts[i], MAX_TOKENS, True)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        log = run_dir.server_log("draft_target").read_text()
    assert [[t for r in results[i] if r.ids for t in r.ids] for i in range(4)] == want
    spans = [
        (r[-1].scalar("first_token_time_ns"), r[-1].scalar("last_token_time_ns"))
        for r in results.values()
    ]
    overlapping = [
        (a, b)
        for a, b in itertools.combinations(sorted(spans), 2)
        if b[0] < a[1]  # b's first token before a's last
    ]
    assert overlapping, spans
    assert "in-flight batching, max_batch_size 8, torch threads 1" in log


def one_line(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_model_that_fails_to_load_reports_why(run_dir, capsys):
    """A built engine whose model files are gone: the model raises on init."""
    broken = json.loads(run_dir.build_json("baseline").read_text())
    broken["variant"]["name"] = "broken"
    broken["models"]["target"]["path"] = str(run_dir.root / "gone")
    run_dir.engine_dir("broken").mkdir()
    run_dir.build_json("broken").write_text(json.dumps(broken))
    code, _, err = run_cli(
        ["deploy", run_dir.root, "--variant", "broken", "--serve"], capsys
    )
    line = one_line(code, err)
    assert "failed to load 'ensemble'" in line
    assert f"{run_dir.root / 'gone'}" in line and "is gone" in line
    assert str(run_dir.server_log("broken")) in line


def test_port_in_use_is_named(run_dir, capsys):
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        port = sock.getsockname()[1]
        args = ["deploy", run_dir.root, "--variant", "baseline", "--serve"]
        code, _, err = run_cli([*args, "--grpc-port", port], capsys)
    line = one_line(code, err)
    assert f"grpc_port {port} is already in use" in line and "--grpc-port" in line


def test_missing_tritonserver_is_named(run_dir, tmp_path, capsys):
    missing = tmp_path / "tritonserver"
    args = ["deploy", run_dir.root, "--variant", "baseline", "--serve"]
    code, _, err = run_cli([*args, "--tritonserver", missing], capsys)
    line = one_line(code, err)
    assert f"tritonserver {missing} is not an executable file" in line


def metrics_status(url: str) -> int | None:
    """The HTTP status of ``url``; None while nothing listens on its port yet."""
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback
            return resp.status
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            return None
        raise


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # field 4 of /proc/<pid>/stat: the parent pid
            out.append(int(stat.parent.name))
    return out


def test_cli_serve_prints_endpoints_and_stops_on_ctrl_c(run_dir):
    proc, line = serve_cli(run_dir.root, "baseline")
    try:
        assert line.startswith("baseline: grpc 127.0.0.1:"), line
        metrics_url = line.split("metrics ")[1].split()[0]
        # ready means HTTP ready; tritonserver opens its metrics port after its HTTP one
        status = wait_for(lambda: metrics_status(metrics_url), 60, metrics_url)
        assert status == 200
        servers = _children(proc.pid)
        assert servers, "tritonserver is not a child of trtbench deploy --serve"
    finally:
        err = stop_cli(proc)  # 130: stopped by SIGINT
    lines = err.strip().splitlines()
    assert lines[-2:] == [
        "stopped every server",
        "trtbench: stopped by SIGINT",
    ], err
    assert "Traceback" not in err and "Aborted" not in err
    assert all(group_gone(pid) for pid in servers)


def test_serve_from_a_folder_holding_a_trtbench_checkout(run_dir, tmp_path):
    """Python models get the server's working directory on their import path: started from
    the folder a user cloned trtbench into (``./trtbench/`` there), the served model must
    still import the installed package, not the checkout's bare folder."""
    shadow = tmp_path / "trtbench"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("")  # no __version__: importing it would fail
    proc, line = serve_cli(run_dir.root, "baseline", cwd=tmp_path)
    err = stop_cli(proc)
    assert line.startswith("baseline: grpc 127.0.0.1:"), err
