"""TensorRT-LLM engine builds of the small real models in every mode, read back and served.

Runs only inside the NGC image (tensorrt_llm 1.0–1.2.x importable) on a machine with an NVIDIA
GPU; elsewhere every test skips with the reason. One module-scoped build of three variants
(float16): baseline with CUDA graphs, draft_target K=4 with logits acceptance, Medusa with a
6-node tree on the 3 heads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtbench.builders.trtllm.contract import load_contract
from trtbench.builders.trtllm.run import gpu_capabilities, require_trtllm
from trtbench.core.errors import NotAvailableError

TREE6 = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]
SHAPES = "dtype: float16, max_batch_size: 4, max_input_len: 256, max_seq_len: 512"


def _why_skip() -> str | None:
    if not gpu_capabilities():
        return "needs an NVIDIA GPU (NVML sees none)"
    try:
        require_trtllm(load_contract())
    except NotAvailableError as exc:
        return str(exc)
    return None


REASON = _why_skip()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(REASON is not None, reason=REASON or ""),
]


@pytest.fixture(scope="module")
def built(tiny_models, tmp_path_factory):
    from trtbench.builders.build import build_variants
    from trtbench.core.run_dir import RunDir
    from trtbench.spec.bench import parse_spec

    spec = parse_spec(
        "name: gpu\nbackend: trtllm\n"
        f"models: {{target: {tiny_models['target']}, draft: {tiny_models['draft']}, "
        f"medusa: {tiny_models['medusa']}}}\n"
        "variants:\n"
        f"  - {{name: baseline, mode: baseline, cuda_graphs: true, {SHAPES}}}\n"
        f"  - {{name: dt, mode: draft_target, max_draft_len: 4, draft_acceptance: logits, {SHAPES}}}\n"
        f"  - {{name: medusa, mode: medusa, medusa_choices: {TREE6}, {SHAPES}}}\n"
    )
    out = RunDir(tmp_path_factory.mktemp("run"))
    manifests = {m.name: m for m in build_variants(spec, backend="trtllm", out=out)}
    return out, manifests


@pytest.mark.parametrize(
    ("variant", "roles", "mode"),
    [
        ("baseline", {"target": "."}, "NONE"),
        ("dt", {"target": "target", "draft": "draft"}, "DRAFT_TOKENS_EXTERNAL"),
        ("medusa", {"target": "."}, "MEDUSA"),
    ],
)
def test_engines_are_built_as_planned(built, variant, roles, mode):
    out, manifests = built
    manifest = manifests[variant]
    root = out.engine_dir(variant)
    assert manifest.engines == roles
    assert json.loads((root / "build.json").read_text())["backend"] == "trtllm"
    assert (root / "build.log").stat().st_size > 0
    trt = manifest.model_extra["trtllm"]
    assert trt["speculative_decoding_mode"]["target"] == mode
    for role, rel in roles.items():
        engine = root / rel
        assert (engine / "config.json").is_file() and (
            engine / "rank0.engine"
        ).is_file()
        assert trt["engines"][role]["build_seconds"] > 0
        assert trt["engines"][role]["peak_gpu_used_bytes"] > 0
    assert not list(root.glob("checkpoint-*"))  # the Medusa checkpoint is removed


def test_medusa_engine_reads_back_heads_and_draft_len(built):
    from trtbench.builders.trtllm.inspection import summarize_engine

    out, manifests = built
    summary = summarize_engine(out.engine_dir("medusa"))
    heads = manifests["medusa"].medusa
    assert (summary.num_medusa_heads, summary.num_medusa_layers) == (
        heads.num_heads,
        heads.num_layers,
    )
    assert summary.max_draft_len == len(TREE6) == manifests["medusa"].max_draft_len


def test_inspect_cli_on_a_built_variant(built):
    from click.testing import CliRunner

    from trtbench.cli import cli

    out, _ = built
    result = CliRunner().invoke(cli, ["inspect", str(out.engine_dir("dt"))])
    assert result.exit_code == 0, result.output
    assert "mode draft_target (DRAFT_TOKENS_EXTERNAL), max_draft_len=4" in result.output


@pytest.mark.parametrize("variant", ["baseline", "dt", "medusa"])
def test_served_variant_streams_a_load_test_tier(built, tiny_models, variant):
    from trtbench.cli import main
    from trtbench.pipeline.deploy import serve
    from trtbench.triton_repo.interface import read_repo_metadata

    out, _ = built
    with serve(out, variant, render=True) as server:
        meta = read_repo_metadata(out.model_repo(variant))
        results = Path(out.root) / f"lt-{variant}"
        with pytest.raises(SystemExit) as exc:
            main(
                [
                    "loadtest",
                    "--url",
                    server.grpc_url,
                    "--model",
                    meta.model_name,
                    "--concurrency",
                    "2",
                    "--requests-per-tier",
                    "8",
                    "--input-len-mean",
                    "32",
                    "--output-len-mean",
                    "32",
                    "--tokenizer",
                    str(tiny_models["target"]),
                    "--out",
                    str(results),
                ]
            )
        assert exc.value.code in (0, None)
    assert (results / "loadtest" / "summary.csv").is_file()
