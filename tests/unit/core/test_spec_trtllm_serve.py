"""``server: trtllm-serve`` in the bench spec: only for ``backend: trtllm-pytorch`` (the
LLM-API options trtllm-serve reads), refused elsewhere with one line naming the field and
the fix; ``deploy.trtllm_serve`` and the executable check."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.hf_dirs import make_models
from trtbench.core.errors import ConfigError
from trtbench.spec.bench import parse_spec
from trtbench.spec.serving import resolve_trtllm_serve


def spec_text(backend: str, server_on_variant: str = "") -> str:
    return (
        f"backend: {backend}\nmodels: {{target: t}}\n"
        f"variants: [{{name: a, mode: baseline, server: trtllm-serve{server_on_variant}}}]\n"
    )


def test_accepted_on_trtllm_pytorch_with_the_default_command():
    spec = parse_spec(spec_text("trtllm-pytorch"))
    assert spec.variants[0].server == "trtllm-serve"
    assert spec.deploy.trtllm_serve == "trtllm-serve"
    # the variant's own backend counts too
    spec = parse_spec(spec_text("reference", ", backend: trtllm-pytorch"))
    assert spec.backend_of(spec.variants[0]) == "trtllm-pytorch"


@pytest.mark.parametrize("backend", ["reference", "trtllm"])
def test_refused_on_other_backends_in_one_line(backend):
    with pytest.raises(ConfigError) as info:
        parse_spec(spec_text(backend))
    assert str(info.value) == (
        f"<spec>: variants[0].server: trtllm-serve serves the LLM-API options of backend "
        f"trtllm-pytorch, not backend {backend}; set variants[0].backend: trtllm-pytorch "
        "or drop server: trtllm-serve"
    )


def test_trtllm_pytorch_checks_still_apply():
    """Medusa has no LLM-API path, whoever serves it."""
    text = (
        "backend: trtllm-pytorch\nmodels: {target: t, medusa: h}\n"
        "variants: [{name: a, mode: medusa, server: trtllm-serve}]\n"
    )
    with pytest.raises(ConfigError, match=r"variants\[0\]\.mode: Medusa runs only"):
        parse_spec(text)


def test_build_backend_override_is_refused_exit_2(tmp_path, capsys):
    models = make_models(tmp_path / "m")
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text("trtllm-pytorch").replace("t}", f"{models['target']}}}"))
    code, _, err = run_cli(
        ["build", spec, "--out", tmp_path / "run", "--backend", "reference"], capsys
    )
    assert code == 2
    assert err.strip().splitlines() == [
        f"trtbench: error: {spec}: variants[0].server: trtllm-serve serves the LLM-API "
        "options of backend trtllm-pytorch, not backend reference; set "
        "variants[0].backend: trtllm-pytorch or drop server: trtllm-serve "
        "(--backend reference)"
    ]
    assert not (tmp_path / "run" / "engines").exists()


def test_resolve_finds_a_name_on_path_or_a_path(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "trtllm-serve"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(exe.parent))
    assert resolve_trtllm_serve("trtllm-serve") == exe
    assert resolve_trtllm_serve(str(exe)) == exe


def test_resolve_names_what_is_missing_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError) as info:
        resolve_trtllm_serve("trtllm-serve")
    assert str(info.value) == (
        "deploy.trtllm_serve 'trtllm-serve' was not found on $PATH; run inside "
        "nvcr.io/nvidia/tensorrt-llm/release or pip install tensorrt-llm (TensorRT-LLM "
        "ships trtllm-serve), or point deploy.trtllm_serve at the executable"
    )
    missing = Path("/nonexistent/trtllm-serve")
    with pytest.raises(ConfigError, match="is not an executable file; run inside"):
        resolve_trtllm_serve(str(missing))
