"""The GPU example specs (``examples/gpu-*.yaml``) pass every check ``trtbench run`` makes
before its first build, on this machine, with their model variables pointing at the small
real models (Hugging Face layout: a Llama target, a draft with its tokenizer, 3 Medusa heads,
an EAGLE-3 draft in vLLM's layout).

What this machine lacks for a real run (a GPU, tensorrt_llm, trtllm-serve on an empty
``$PATH``, an interpreter with vLLM) is named by the plan, not an error. Each example measures
its three variants at concurrency 1, 4, 16 and 64 in 3 rounds of 64 requests per cell: 12
cells per round, 36 in all, 9 server starts (one variant on the GPU at a time).
"""

from __future__ import annotations

import sys

import pytest

from tests.support.cli import run_cli
from tests.support.data import REPO_ROOT

EXAMPLES = {
    "gpu-engine": (
        [
            ("baseline", "baseline"),
            ("draft-k4", "draft_target,"),
            ("medusa", "medusa,"),
        ],
        "trtllm",
        "triton",
        "tensorrt_llm importable for variants baseline, draft-k4, medusa",
    ),
    "gpu-llmapi": (
        [
            ("baseline", "baseline"),
            ("eagle3-k3", "eagle3,"),
            ("draft-k4", "draft_target,"),
        ],
        "trtllm-pytorch",
        "trtllm-serve",
        "deploy.trtllm_serve 'trtllm-serve' was not found on $PATH",
    ),
    "gpu-vllm": (
        [("baseline", "baseline"), ("eagle3-k3", "eagle3,"), ("ngram-k4", "ngram,")],
        "reference",
        "vllm",
        f"deploy.vllm_python {sys.executable} has no vllm package",
    ),
}


@pytest.fixture
def model_vars(monkeypatch, tmp_path, tiny_models):
    """The examples' variables at the small models; an empty ``$PATH``; this interpreter
    (no vllm) as vLLM's."""
    monkeypatch.setenv("MODEL_DIR", str(tiny_models["target"]))
    monkeypatch.setenv("DRAFT_DIR", str(tiny_models["draft"]))
    monkeypatch.setenv("MEDUSA_DIR", str(tiny_models["medusa"]))
    monkeypatch.setenv("EAGLE_DIR", str(tiny_models["eagle3"]))
    monkeypatch.setenv("VLLM_PYTHON", sys.executable)
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_gpu_example_passes_a_dry_run(capsys, tmp_path, model_vars, name):
    variants, backend, server, missing = EXAMPLES[name]
    out = tmp_path / "run"
    spec = REPO_ROOT / "examples" / f"{name}.yaml"
    code, stdout, err = run_cli(["run", spec, "--dry-run", "--out", out], capsys)
    assert code == 0, err
    lines = stdout.splitlines()
    assert f"variants ({len(variants)}):" in lines
    rows = [x.split() for x in lines if x.startswith("  ") and not x.startswith("  - ")]
    assert [(r[0], r[1]) for r in rows] == variants
    assert all(r[-4:] == ["backend", f"{backend},", "server", server] for r in rows)
    assert "tiers (4): c1, c4, c16, c64" in lines
    assert any(
        x.startswith("design rounds: 3 round(s), 9 server start(s)") for x in lines
    )
    assert "cells: 12 per round (3 variants x 4 tiers), 36 in 3 round(s)" in lines
    needs = lines[lines.index("a real run needs what this machine lacks:") + 1 :]
    assert any(missing in x for x in needs), needs
    assert not out.exists()


def test_each_gpu_example_says_what_it_needs_and_how_to_run_it():
    for name in EXAMPLES:
        text = (REPO_ROOT / "examples" / f"{name}.yaml").read_text()
        header = text.split("\nname:")[0]
        assert "GPU" in header and "disk" in header and "image" in header, name
        assert f"trtbench run examples/{name}.yaml --dry-run" in header
        assert f"trtbench run examples/{name}.yaml --out runs/{name}" in header
