"""Every user input checked before work starts: the single checks, and ``trtbench run`` /
``build`` / ``deploy`` stopping with exit code 2 and one line before anything is built.

The bad inputs are real: a dataset file with Latin-1 bytes, token ids past the tiny target
tokenizer's 2048, a port held by a listening socket, an --out under a regular file.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.run_factory import write_repo_metadata
from trtbench.core.errors import ConfigError, ServerStartError
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.loadtest import tiers_of
from trtbench.pipeline.preflight import (
    PROBE_PREFIX,
    check_ports,
    check_run_dir,
    check_served_prompts,
    check_tritonserver,
    check_writable,
)
from trtbench.profiling.loadtest.workload.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.workload.schedule import plan_tiers
from trtbench.spec.bench import DeploySpec, LoadtestSpec, parse_spec
from trtbench.triton_repo.interface import read_repo_metadata

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
root_ignores_modes = pytest.mark.skipif(AS_ROOT, reason="root writes into 0555 folders")


@pytest.fixture
def listening() -> int:
    """A port taken by a real listening socket on the default bind address."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_check_writable_creates_probes_and_leaves_nothing(tmp_path):
    target = tmp_path / "a" / "b"
    check_writable(target)
    assert not (tmp_path / "a").exists()  # made for the probe, removed again
    existing = tmp_path / "run"
    existing.mkdir()
    check_writable(existing)
    assert list(existing.iterdir()) == []


def test_check_writable_under_a_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError) as info:
        check_writable(blocker / "run", "--out")
    assert str(info.value) == (
        f"cannot write to {blocker / 'run'} (Not a directory); choose another --out or "
        "fix its permissions"
    )
    with pytest.raises(ConfigError, match=r"\(it is a file, not a folder\); choose"):
        check_writable(blocker)


@root_ignores_modes
def test_check_writable_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    try:
        with pytest.raises(ConfigError, match=r"\(Permission denied\); choose another"):
            check_writable(ro / "run")
        run = tmp_path / "run"
        (run / "loadtest").mkdir(parents=True)
        (run / "loadtest").chmod(0o555)
        with pytest.raises(ConfigError, match=f"cannot write to {run / 'loadtest'}"):
            check_run_dir(RunDir(run))
    finally:
        ro.chmod(0o755)
        (tmp_path / "run" / "loadtest").chmod(0o755)


def test_check_tritonserver_names_the_field(tmp_path):
    with pytest.raises(ConfigError) as info:
        check_tritonserver(tmp_path / "nope", "deploy.tritonserver")
    assert str(info.value).startswith(
        f"deploy.tritonserver {tmp_path / 'nope'} is not an executable file; point "
        "deploy.tritonserver at a Triton server binary"
    )
    plain = tmp_path / "tritonserver"
    plain.write_text("#!/bin/sh\n")  # not executable
    with pytest.raises(ConfigError, match="--tritonserver .* is not an executable"):
        check_tritonserver(plain)
    plain.chmod(0o755)
    assert check_tritonserver(plain) == plain


def test_check_ports_refuses_a_taken_port(listening):
    check_ports(DeploySpec())  # nothing fixed: nothing to check
    with pytest.raises(ServerStartError) as info:
        check_ports(DeploySpec(grpc_port=listening))
    assert f"grpc_port {listening} is already in use" in str(info.value)
    assert "deploy.grpc_port" in str(info.value)


@pytest.mark.parametrize(
    ("concurrency", "rates", "needle"),
    [
        ([2, 2], None, "concurrency 2 is listed twice"),
        ([1], [2.5, 1, 2.5], "request rate 2.5 is listed twice"),
        ([1], [2.5, 2.5000001], "request rate 2.5 is listed twice"),
    ],
)
def test_tiers_must_differ(concurrency, rates, needle):
    with pytest.raises(ValueError, match=needle):
        plan_tiers(concurrency, rates)


def test_spec_tiers_must_differ():
    base = "models: {target: /m}\nvariants: [{name: b, mode: baseline}]\n"
    with pytest.raises(ConfigError) as info:
        parse_spec(base + "loadtest: {concurrency: [1, 2, 2]}\n", "s.yaml")
    assert str(info.value) == (
        "s.yaml: loadtest.concurrency: 2 is listed twice; give each tier once"
    )
    with pytest.raises(ConfigError, match="loadtest.request_rate: 0.5 is listed twice"):
        parse_spec(base + "loadtest: {request_rate: [0.5, 0.5]}\n", "s.yaml")
    spec = LoadtestSpec(concurrency=[1, 2])
    assert [t.label for t in tiers_of(spec)] == ["c1", "c2"]


def test_served_limits_come_from_trtbench_json(tmp_path, tiny_models):
    path = write_repo_metadata(tmp_path, "base", "baseline", streaming=True)
    meta = read_repo_metadata(path.parent)  # max_input_len 64, max_seq_len 256
    tok = TextTokenizer.load(tiny_models["target"])
    ok = Prompt("a", "x", 63, 192, "tokenizer", (5,) * 63)
    check_served_prompts([ok], meta, tok)
    long = Prompt("b", "x", 64, 8, "tokenizer", (5,) * 64)
    with pytest.raises(
        ConfigError,
        match=r"prompt b: 64 input tokens \(\+1 the server "
        r"adds\) exceed max_input_len 64 of variant base",
    ):
        check_served_prompts([ok, long], meta, tok)


# --- the commands ------------------------------------------------------------------


@pytest.fixture
def fake_server(tmp_path) -> Path:
    """An executable file where deploy.tritonserver points (never started here)."""
    path = tmp_path / "bin" / "tritonserver"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\nexit 1\n")
    path.chmod(0o755)
    return path


def write_spec(tmp_path, tiny_models, fake_server, loadtest=None, deploy=None, **v):
    spec = {
        "name": "pre",
        "models": {"target": str(tiny_models["target"])},
        "variants": [{"name": "base", "mode": "baseline", **v}],
        "deploy": {"tritonserver": str(fake_server), **(deploy or {})},
        "loadtest": {"concurrency": [1], "requests_per_tier": 4, **(loadtest or {})},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def run_fails(capsys, *args) -> str:
    code, out, err = run_cli(list(args), capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trtbench: error: "), err
    return lines[0]


def dataset(tmp_path, *lines: bytes) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


GOOD = json.dumps({"task_id": 1, "prompt": "import os", "output_tokens": 8}).encode()


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b'{"prompt": "na\xefve", "output_tokens": 3}', ":2: byte 0xef at column 29"),
        (
            b'{"prompt": "x\\ud800", "output_tokens": 3}',
            ":2: prompt holds a lone surrogate",
        ),
        (
            b'{"prompt": "x", "output_tokens": 1e11}',
            ":2: output_tokens must be a positive",
        ),
        (
            b'{"input_ids": [1, 4096], "output_tokens": 3}',
            ":2: input_ids[1] = 4096 is outside",
        ),
        (
            b'{"prompt": "x", "output_tokens": 500}',
            ":2 (task 2): 1 input tokens (+1 the server adds) + 500 output tokens "
            "exceed max_seq_len 256 of variant base (variants[0])",
        ),
    ],
)
def test_run_checks_the_dataset_before_building(
    tmp_path, capsys, tiny_models, fake_server, line, needle
):
    data = dataset(tmp_path, GOOD, line.replace(b'{"', b'{"task_id": 2, "', 1))
    spec = write_spec(
        tmp_path,
        tiny_models,
        fake_server,
        {"dataset": str(data)},
        max_input_len=64,
        max_seq_len=256,
    )
    out = tmp_path / "out"
    err = run_fails(capsys, "run", spec, "--out", out)
    assert f"{data}{needle}" in err
    assert not out.exists()  # nothing built, nothing measured, no empty run dir


def test_run_checks_synthetic_lengths_against_each_variant(
    tmp_path, capsys, tiny_models, fake_server
):
    spec = write_spec(
        tmp_path,
        tiny_models,
        fake_server,
        {"input_len_mean": 100},
        max_input_len=64,
        max_seq_len=256,
    )
    out = tmp_path / "out"
    err = run_fails(capsys, "run", spec, "--out", out)
    assert "prompt synthetic-0: " in err
    assert "exceed max_input_len 64 of variant base (variants[0])" in err
    assert "loadtest.input_len_mean" in err
    assert not (out / "engines").exists()


@pytest.mark.parametrize(
    ("loadtest", "deploy", "needle"),
    [
        ({"concurrency": [2, 2]}, {}, "loadtest.concurrency: 2 is listed twice"),
        (
            {},
            {"tritonserver": "/nonexistent/tritonserver"},
            "deploy.tritonserver /nonexistent/tritonserver is not an executable file",
        ),
    ],
)
def test_run_checks_spec_inputs_before_building(
    tmp_path, capsys, tiny_models, fake_server, loadtest, deploy, needle
):
    spec = write_spec(tmp_path, tiny_models, fake_server, loadtest, deploy)
    out = tmp_path / "out"
    assert needle in run_fails(capsys, "run", spec, "--out", out)
    assert not out.exists()


def test_run_with_a_taken_port(tmp_path, capsys, tiny_models, fake_server, listening):
    spec = write_spec(
        tmp_path, tiny_models, fake_server, deploy={"grpc_port": listening}
    )
    out = tmp_path / "out"
    err = run_fails(capsys, "run", spec, "--out", out)
    assert f"grpc_port {listening} is already in use" in err
    assert not out.exists()


def test_run_and_build_with_an_unwritable_out(
    tmp_path, capsys, tiny_models, fake_server
):
    spec = write_spec(tmp_path, tiny_models, fake_server)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for command in ("run", "build"):
        err = run_fails(capsys, command, spec, "--out", blocker / "out")
        assert f"cannot write to {blocker / 'out'} (Not a directory)" in err
        assert "choose another --out" in err


@root_ignores_modes
def test_run_with_a_read_only_out(tmp_path, capsys, tiny_models, fake_server):
    spec = write_spec(tmp_path, tiny_models, fake_server)
    out = tmp_path / "out"
    out.mkdir(mode=0o555)
    try:
        err = run_fails(capsys, "run", spec, "--out", out)
    finally:
        out.chmod(0o755)
    assert f"cannot write to {out} (Permission denied)" in err
    assert list(out.iterdir()) == []


def test_deploy_serve_with_a_missing_tritonserver(tmp_path, capsys):
    run_dir = tmp_path / "run"
    err = run_fails(
        capsys, "deploy", run_dir, "--serve", "--tritonserver", tmp_path / "no"
    )
    assert f"--tritonserver {tmp_path / 'no'} is not an executable file" in err
    assert not run_dir.exists()


def test_deploy_serve_with_a_taken_port(tmp_path, capsys, fake_server, listening):
    err = run_fails(
        capsys,
        "deploy",
        tmp_path / "run",
        "--serve",
        "--tritonserver",
        fake_server,
        "--http-port",
        listening,
    )
    assert f"http_port {listening} is already in use" in err and "--http-port" in err


def test_probe_files_never_stay(tmp_path):
    check_run_dir(RunDir(tmp_path))
    assert not [p for p in tmp_path.rglob(f"{PROBE_PREFIX}*")]
