"""``server:`` on a variant, ``deploy.vllm_python`` and the interpreter check (bad input)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trtbench.core.errors import ConfigError
from trtbench.spec.bench import parse_spec
from trtbench.spec.serving import default_vllm_python, resolve_vllm_python


def test_server_defaults_to_triton_and_accepts_vllm(tmp_path):
    spec = parse_spec(
        "models: {target: t}\n"
        "variants: [{name: a, mode: baseline}, {name: b, mode: baseline, server: vllm}]\n"
        "deploy: {vllm_python: venv/bin/python}\n",
        base_dir=tmp_path,
    )
    assert [v.server for v in spec.variants] == ["triton", "vllm"]
    assert (
        spec.deploy.vllm_python == tmp_path / "venv/bin/python"
    )  # resolved like models
    assert spec.deploy.vllm_kv_cache_gib == 1.0


def test_unknown_server_is_refused():
    with pytest.raises(ConfigError, match="server"):
        parse_spec(
            "models: {target: t}\nvariants: [{name: a, mode: baseline, server: sglang}]\n"
        )


def test_a_vllm_variant_skips_the_trtbench_backend_checks():
    """ngram does not run on trtbench's TensorRT engine path, but vLLM serves it."""
    text = (
        "backend: trtllm\nmodels: {target: t}\nvariants: [{name: n, mode: ngram%s}]\n"
    )
    with pytest.raises(ConfigError, match="backend: trtllm-pytorch"):
        parse_spec(text % "")
    assert parse_spec(text % ", server: vllm").variants[0].mode == "ngram"


def test_default_interpreter_is_beside_the_running_venv(tmp_path):
    venv = tmp_path / ".venv"
    assert default_vllm_python(str(venv)) is None
    python = tmp_path / ".venv-vllm" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert default_vllm_python(str(venv)) == python


def test_a_missing_interpreter_says_how_to_make_one(tmp_path):
    with pytest.raises(ConfigError) as info:
        resolve_vllm_python(tmp_path / "nope" / "python")
    message = str(info.value)
    assert (
        "deploy.vllm_python" in message and "bash scripts/bootstrap_vllm.sh" in message
    )
    assert "\n" not in message


def test_an_interpreter_without_vllm_says_so():
    with pytest.raises(ConfigError, match="has no vllm package.*bootstrap_vllm.sh"):
        resolve_vllm_python(Path(sys.executable))  # the main venv: no vllm in it


def test_a_vllm_variant_built_for_triton_is_refused_before_anything_is_built(
    tmp_path, capsys
):
    """`server: vllm` serves the checked Hugging Face dirs: a variant whose backend is an
    engine path (trtllm) is exit 2, one line naming the field, and nothing is built."""
    from tests.support.cli import run_cli
    from tests.support.hf_dirs import make_models

    dirs = make_models(tmp_path / "m")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: v\nbackend: trtllm\n"
        f"models: {{target: {dirs['target']}}}\n"
        "variants:\n  - {name: vb, mode: baseline, server: vllm}\n"
    )
    code, _, err = run_cli(["build", spec, "--out", tmp_path / "run"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "variants[0].server: vllm" in lines[0]
    assert "variants[0].backend: reference" in lines[0]
    assert not (tmp_path / "run" / "engines").exists()
