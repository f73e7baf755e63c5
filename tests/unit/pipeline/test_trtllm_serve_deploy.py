"""``server: trtllm-serve`` variants through the commands: ``trtbench run`` stops with exit 2
and one line before anything is built when no ``trtllm-serve`` is found, ``trtbench deploy``
prints the exact command line that serves each (no TensorRT-LLM needed to print it), and
``deploy --serve`` checks the executable first.

The expected lines are written out by hand from trtllm-serve's options
(``tensorrt_llm/commands/serve.py``: ``MODEL --backend pytorch --host --port`` and the YAML
flag, ``--extra_llm_api_options`` in the 1.2.1 contract, ``--config`` in 1.4.0rc4's).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.hf_dirs import make_models
from trtbench.core.errors import ConfigError
from trtbench.pipeline.preflight import check_llmapi_variants
from trtbench.spec.bench import parse_spec

NOT_FOUND = (
    "trtbench: error: deploy.trtllm_serve 'trtllm-serve' was not found on $PATH and "
    "variant ts (server: trtllm-serve) needs it; run inside "
    "nvcr.io/nvidia/tensorrt-llm/release or pip install tensorrt-llm (TensorRT-LLM ships "
    "trtllm-serve), or point deploy.trtllm_serve at the executable"
)


@pytest.fixture
def no_trtllm_serve(tmp_path: Path, monkeypatch) -> None:
    """$PATH without any trtllm-serve (an empty folder)."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def write_spec(tmp_path: Path, version: str, **deploy) -> Path:
    models = make_models(tmp_path / "m")
    doc = {
        "backend": "trtllm-pytorch",
        "trtllm_version": version,
        "models": {"target": str(models["target"])},
        "deploy": deploy,
        "variants": [
            {"name": "ts", "mode": "baseline", "server": "trtllm-serve"},
            {"name": "tri", "mode": "baseline"},
        ],
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def one_line_error(capsys, *args) -> str:
    code, _, err = run_cli(list(args), capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_run_without_trtllm_serve_is_exit_2_before_anything_is_built(
    tmp_path, capsys, no_trtllm_serve
):
    spec = write_spec(tmp_path, "1.2.1")
    run = tmp_path / "run"
    line = one_line_error(capsys, "run", spec, "--out", run, "--variant", "ts")
    assert line == NOT_FOUND
    assert not (run / "engines").exists()


@pytest.mark.parametrize(
    ("version", "flag"),
    [("1.2.1", "--extra_llm_api_options"), ("1.4.0rc4", "--config")],
)
def test_deploy_prints_the_exact_command_line(
    tmp_path, capsys, no_trtllm_serve, version, flag
):
    spec = write_spec(tmp_path, version)
    run = tmp_path / "run"
    assert run_cli(["build", spec, "--out", run, "--variant", "ts"], capsys)[0] == 0
    code, out, err = run_cli(["deploy", run, "--variant", "ts"], capsys)
    assert code == 0, err
    target = tmp_path / "m" / "target"
    options = (run / "engines" / "ts").resolve() / "llm_api.yaml"
    assert out.splitlines() == [
        f"ts: served by trtllm-serve, model target (log {run}/server/ts.log): "
        f"trtllm-serve {target} --backend pytorch --host 127.0.0.1 --port PORT "
        f"{flag} {options}",
        "all repositories valid",
    ]
    code, out, err = run_cli(
        ["deploy", run, "--variant", "ts", "--http-port", "8123", "--check"], capsys
    )
    assert code == 0, err
    assert f"--host 127.0.0.1 --port 8123 {flag} {options}" in out.splitlines()[0]


def test_deploy_serve_without_trtllm_serve_is_exit_2(tmp_path, capsys, no_trtllm_serve):
    spec = write_spec(tmp_path, "1.2.1")
    run = tmp_path / "run"
    assert run_cli(["build", spec, "--out", run, "--variant", "ts"], capsys)[0] == 0
    line = one_line_error(capsys, "deploy", run, "--serve")
    assert line == NOT_FOUND


def test_a_path_that_is_not_executable_is_named(tmp_path, capsys):
    fake = tmp_path / "bin" / "trtllm-serve"
    fake.parent.mkdir()
    fake.write_text("not executable")
    spec = write_spec(tmp_path, "1.2.1", trtllm_serve=str(fake))
    line = one_line_error(
        capsys, "run", spec, "--out", tmp_path / "run", "--variant", "ts"
    )
    assert line.startswith(
        f"trtbench: error: deploy.trtllm_serve '{fake}' is not an executable file and "
        "variant ts (server: trtllm-serve) needs it; run inside "
        "nvcr.io/nvidia/tensorrt-llm/release or pip install tensorrt-llm"
    )


def test_llmapi_runtime_is_triton_s_and_does_not_bind_trtllm_serve(tmp_path):
    """``deploy.llmapi_runtime: reference`` cannot run MTP in Triton's llmapi model; a
    trtllm-serve variant runs TensorRT-LLM itself, so the same mode passes there."""
    target = make_models(tmp_path / "m")["target"]
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(
        json.dumps({**config, "num_nextn_predict_layers": 1})
    )
    text = (
        f"backend: trtllm-pytorch\ntrtllm_version: 1.2.1\nmodels: {{target: {target}}}\n"
        "deploy: {llmapi_runtime: reference}\n"
        "variants: [{name: ts, mode: mtp, server: trtllm-serve}, {name: tri, mode: mtp}]\n"
    )
    spec = parse_spec(text)
    check_llmapi_variants(spec, spec.select(["ts"]))
    with pytest.raises(ConfigError, match=r"variants\[1\]\.mode: the reference engine"):
        check_llmapi_variants(spec, spec.select(["tri"]))
