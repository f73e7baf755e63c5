"""``trtbench inspect`` and the post-build readback, on engine config.json files written to the
documented 1.2 schema (tests/data/engine_configs/README.md)."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from tests.support.data import get_test_data_dir
from tests.support.hf_dirs import TREE6, plan_all
from trtbench.builders.trtllm.inspection import (
    decode_spec_mode,
    inspect_engines,
    render_engine_inspection,
    summarize_engine,
)
from trtbench.builders.trtllm.run import engine_mismatches, run_plan
from trtbench.cli import cli, main
from trtbench.core.errors import BuildError

CONFIGS = get_test_data_dir("engine_configs")


def engine_copy(tmp_path, name: str, sizes: dict[int, int]):
    """Copy a fixture engine dir and add rank files of the given sizes (bytes)."""
    dest = tmp_path / name
    shutil.copytree(CONFIGS / name, dest)
    for rank, size in sizes.items():
        (dest / f"rank{rank}.engine").write_bytes(b"\0" * size)
    return dest


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (1, "NONE"),
        (2, "DRAFT_TOKENS_EXTERNAL"),
        (4, "MEDUSA"),
        (32, "EAGLE"),
        (None, "NONE"),
        ("SpeculativeDecodingMode.MEDUSA", "MEDUSA"),
        ("medusa", "MEDUSA"),
    ],
)
def test_decode_spec_mode(value, name):
    assert decode_spec_mode(value) == name


@pytest.mark.parametrize("value", [6, 0, True, "tree"])
def test_decode_spec_mode_refuses_non_members(value):
    # 6 = MEDUSA|DRAFT_TOKENS_EXTERNAL is not one mode
    with pytest.raises(BuildError, match="not a TensorRT-LLM SpeculativeDecodingMode"):
        decode_spec_mode(value)


def test_medusa_engine_summary(tmp_path):
    s = summarize_engine(engine_copy(tmp_path, "medusa", {0: 1234}))
    assert (s.mode, s.speculative_decoding_mode, s.max_draft_len) == (
        "medusa",
        "MEDUSA",
        6,
    )
    assert (s.num_medusa_heads, s.num_medusa_layers, s.medusa_max_draft_len) == (
        3,
        1,
        6,
    )
    assert (s.architecture, s.dtype, s.tensorrt_llm_version) == (
        "MedusaForCausalLM",
        "float16",
        "1.2.1",
    )
    assert (s.max_batch_size, s.max_input_len, s.max_seq_len) == (8, 256, 518)
    assert s.kv_cache_type == "PAGED" and s.bytes_per_rank == {0: 1234}
    assert s.plugins["use_paged_context_fmha"] is True and s.missing_ranks == []


def test_tp2_engine_reports_bytes_per_rank_and_missing_ranks(tmp_path):
    s = summarize_engine(engine_copy(tmp_path, "baseline_tp2", {0: 1000, 1: 1500}))
    assert (s.tp_size, s.pp_size, s.world_size) == (2, 1, 2)
    assert s.bytes_per_rank == {0: 1000, 1: 1500}
    s = summarize_engine(engine_copy(tmp_path / "b", "baseline_tp2", {1: 7}))
    assert s.missing_ranks == [0]


def test_fp8_engine_with_lowercase_kv_cache_type(tmp_path):
    s = summarize_engine(engine_copy(tmp_path, "fp8", {}))
    assert (s.quant_algo, s.kv_cache_quant_algo, s.kv_cache_type) == (
        "FP8",
        "FP8",
        "PAGED",
    )
    assert (
        s.plugins["gemm_plugin"] is None and s.plugins["use_fp8_context_fmha"] is True
    )


def test_variant_dir_uses_build_json_roles(tmp_path):
    root = tmp_path / "dt"
    shutil.copytree(CONFIGS / "draft_target" / "target", root / "tgt")
    shutil.copytree(CONFIGS / "draft_target" / "draft", root / "drf")
    (root / "build.json").write_text(
        json.dumps({"engines": {"target": "tgt", "draft": "drf"}})
    )
    summaries = {s.role: s for s in inspect_engines(root)}
    assert summaries["target"].mode == "draft_target"
    assert summaries["target"].max_draft_len == 4
    assert summaries["draft"].mode == "baseline"
    assert summaries["draft"].gather_generation_logits is True


def test_inspect_cli_text_and_json():
    result = CliRunner().invoke(cli, ["inspect", str(CONFIGS / "draft_target")])
    assert result.exit_code == 0, result.output
    assert "engine draft:" in result.output and "engine target:" in result.output
    assert "mode draft_target (DRAFT_TOKENS_EXTERNAL), max_draft_len=4" in result.output
    result = CliRunner().invoke(cli, ["inspect", str(CONFIGS / "medusa"), "--json"])
    (data,) = json.loads(result.output)
    assert data["num_medusa_heads"] == 3 and data["missing_ranks"] == [0]


def test_inspect_rejects_a_checkpoint_config(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(CONFIGS / "checkpoint_only")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a TensorRT-LLM engine config" in err


def test_inspect_rejects_an_empty_dir(tmp_path):
    with pytest.raises(BuildError, match="holds no engine"):
        render_engine_inspection(tmp_path)


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    return plan_all(
        tmp_path_factory,
        "  - {name: base, mode: baseline, tp_size: 2, max_input_len: 256, max_seq_len: 512}\n"
        "  - {name: dt, mode: draft_target, max_draft_len: 4, draft_acceptance: logits,"
        " max_input_len: 256, max_seq_len: 512}\n"
        f"  - {{name: med, mode: medusa, medusa_choices: {TREE6}, max_input_len: 256,"
        " max_seq_len: 512}\n"
        "  - {name: fp8, mode: baseline, quantization: fp8, max_input_len: 256,"
        " max_seq_len: 512}\n",
    )


@pytest.mark.parametrize(
    ("plan", "role", "fixture"),
    [
        ("base", "target", "baseline_tp2"),
        ("dt", "target", "draft_target/target"),
        ("dt", "draft", "draft_target/draft"),
        ("med", "target", "medusa"),
        ("fp8", "target", "fp8"),
    ],
)
def test_readback_accepts_engines_built_as_planned(plans, plan, role, fixture):
    step = next(e for e in plans[plan].engines if e.role == role)
    assert engine_mismatches(summarize_engine(CONFIGS / fixture), step.expect) == []


def test_readback_names_every_difference(plans, tmp_path):
    engine = engine_copy(tmp_path, "medusa", {0: 1})
    config = json.loads((engine / "config.json").read_text())
    config["pretrained_config"]["max_draft_len"] = 63  # MedusaConfig's default
    config["pretrained_config"]["num_medusa_heads"] = 4
    config["build_config"]["plugin_config"]["paged_kv_cache"] = False
    config["build_config"]["max_seq_len"] = 500
    (engine / "config.json").write_text(json.dumps(config))
    (step,) = plans["med"].engines
    problems = engine_mismatches(summarize_engine(engine), step.expect)
    assert problems == [
        "num_medusa_heads: engine has 4, asked 3",
        "pretrained_config.max_draft_len: engine has 63, asked 6",
        "max_seq_len: engine has 500, asked >= 512",
        "plugin_config.paged_kv_cache: engine has False, asked True",
    ]


def test_readback_catches_a_plain_engine_for_a_draft_target(plans):
    target = next(e for e in plans["dt"].engines if e.role == "target")
    problems = engine_mismatches(
        summarize_engine(CONFIGS / "draft_target" / "draft"), target.expect
    )
    assert (
        "speculative_decoding_mode: engine has 'NONE', asked 'DRAFT_TOKENS_EXTERNAL'"
        in (problems)
    )
    assert "max_draft_len: engine has 0, asked 4" in problems


def test_run_plan_without_tensorrt_llm_fails_with_the_log(plans, tmp_path):
    """The real worker runs here and fails at the import: the log holds its traceback."""
    import dataclasses

    plan = dataclasses.replace(
        plans["base"], engine_root=str(tmp_path / "engines/base")
    )
    with pytest.raises(BuildError, match="build.log") as exc:
        run_plan(plan)
    assert "tensorrt_llm is not importable" in str(exc.value)
    log = (tmp_path / "engines/base/build.log").read_text()
    assert "trtbench.builders.trtllm.worker" in log and "Traceback" in log
    assert (tmp_path / "engines/base/plan.json").is_file()
    assert not (tmp_path / "engines/base/build.json").exists()


def test_text_summary_lists_rank_sizes_and_missing_files(tmp_path):
    text = render_engine_inspection(
        engine_copy(tmp_path, "baseline_tp2", {1: 2_500_000})
    )
    # 2,500,000 B / 2**20 = 2.384 MiB (binary units, not 2.5 decimal MB)
    assert "bytes per rank: rank1=2.4 MiB (missing: rank0.engine)" in text
    assert "TP=2 PP=1 (world 2)" in text


def test_inspect_describes_a_reference_build_from_its_manifest(tmp_path):
    from trtbench.builders.manifest import (
        BuildManifest,
        CudaGraphs,
        MedusaInfo,
        ModelFiles,
        write_manifest,
    )

    variant_dir = tmp_path / "engines" / "medusa"
    variant_dir.mkdir(parents=True)
    write_manifest(
        variant_dir,
        BuildManifest(
            backend="reference",
            variant={
                "name": "medusa",
                "dtype": "float32",
                "max_batch_size": 8,
                "max_input_len": 256,
                "max_seq_len": 512,
            },
            mode="medusa",
            max_draft_len=3,
            models={
                "target": ModelFiles(path="/m/target"),
                "draft": None,
                "medusa": ModelFiles(path="/m/medusa"),
            },
            tokenizer_dir="/m/target",
            medusa=MedusaInfo(num_heads=2, num_layers=1, choices=[[0], [1], [0, 0]]),
            cuda_graphs=CudaGraphs(
                requested=True, available=False, reason="no CUDA device"
            ),
            bytes_on_disk=2_500_000,
        ),
    )
    result = CliRunner().invoke(cli, ["inspect", str(variant_dir)])
    assert result.exit_code == 0, result.output
    assert (
        "mode medusa, max_draft_len=3, medusa heads=2 x 1 layer(s), tree of 3 nodes"
        in (result.output)
    )
    assert "CUDA graphs requested but unavailable (no CUDA device)" in result.output
    # 2,500,000 B / 2**20 = 2.384 MiB
    assert "models (2.4 MiB): target=/m/target, medusa=/m/medusa" in result.output
    as_json = CliRunner().invoke(cli, ["inspect", str(variant_dir), "--json"])
    assert json.loads(as_json.output)[0]["medusa"]["num_heads"] == 2
