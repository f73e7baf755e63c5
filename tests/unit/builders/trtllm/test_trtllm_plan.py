"""TensorRT-LLM build plans (spec -> calls) for every mode, their rendering, the dry run through
the CLI, and the bad inputs of issue 5 — all on CPU, without tensorrt_llm."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pynvml
import pytest
from click.testing import CliRunner

from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.hf_dirs import TREE6, make_models, spec_for
from trtbench.builders.trtllm.backend import build_trtllm_variant, plan_and_check
from trtbench.builders.trtllm.calls import Call, EnumRef, PathArg, RankArg
from trtbench.builders.trtllm.contract import load_contract
from trtbench.builders.trtllm.facts import read_model_facts
from trtbench.builders.trtllm.plan import (
    VariantPlan,
    engine_layout,
    plan_variant,
)
from trtbench.builders.trtllm.render import build_argv, convert_argv, render_plan
from trtbench.builders.trtllm.run import GpuMemoryPeak, gpu_capabilities
from trtbench.cli import cli, main
from trtbench.core.errors import ConfigError, ModelMismatchError
from trtbench.core.run_dir import RunDir

VARIANTS = f"""\
  - {{name: base, mode: baseline, max_input_len: 256, max_seq_len: 512}}
  - {{name: dt, mode: draft_target, max_draft_len: 5, draft_acceptance: logits}}
  - {{name: dt-tok, mode: draft_target}}
  - {{name: med, mode: medusa, medusa_choices: {TREE6}, max_batch_size: 4}}
  - {{name: fp8, mode: baseline, quantization: fp8, tp_size: 2}}
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    return make_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def contract():
    return load_contract()


def plan_of(models, name: str, out: Path) -> VariantPlan:
    spec = spec_for(models, VARIANTS)
    return plan_and_check(spec, spec.variant(name), RunDir(out), load_contract(), [])


def build_kwargs(step) -> dict:
    return dict(step.llm.kwargs["build_config"].kwargs)


def plugins(step) -> dict:
    return dict(build_kwargs(step)["plugin_config"].kwargs)


def test_baseline_plan_sets_plugins_shapes_and_layout(models, tmp_path):
    plan = plan_of(models, "base", tmp_path)
    (step,) = plan.engines
    build = build_kwargs(step)
    assert build["speculative_decoding_mode"] == EnumRef(
        "SpeculativeDecodingMode", "NONE"
    )
    assert (build["max_draft_len"], build["max_input_len"], build["max_seq_len"]) == (
        0,
        256,
        512,
    )
    assert plugins(step) == {
        "gpt_attention_plugin": "auto",
        "gemm_plugin": "auto",
        "context_fmha": True,
        "remove_input_padding": True,
        "paged_kv_cache": True,
        "use_paged_context_fmha": True,
        "use_fp8_context_fmha": False,
        "multiple_profiles": True,
        "reduce_fusion": False,
    }
    # runtime limits passed to LLM equal the engine's (contract rule runtime_le_build)
    assert step.llm.kwargs["max_batch_size"] == build["max_batch_size"] == 8
    assert engine_layout(plan) == {"target": "."}
    assert plan.tokenizer_dir == str(models["target"])


def test_draft_target_plan_has_two_engines_with_logits(models, tmp_path):
    plan = plan_of(models, "dt", tmp_path)
    target, draft = plan.engines
    assert engine_layout(plan) == {"target": "target", "draft": "draft"}
    assert build_kwargs(target)["speculative_decoding_mode"].member == (
        "DRAFT_TOKENS_EXTERNAL"
    )
    assert build_kwargs(target)["max_draft_len"] == 5
    assert build_kwargs(draft)["speculative_decoding_mode"].member == "NONE"
    assert build_kwargs(draft)["max_draft_len"] == 0
    assert target.llm.kwargs["model"] == str(models["target"])
    assert draft.llm.kwargs["model"] == str(models["draft"])
    for step in (target, draft):
        assert build_kwargs(step)["gather_generation_logits"] is True
        assert plugins(step)["use_paged_context_fmha"] is True
    assert plan.max_draft_len == 5


def test_draft_target_token_acceptance_builds_without_logits(models, tmp_path):
    plan = plan_of(models, "dt-tok", tmp_path)
    assert [build_kwargs(s)["gather_generation_logits"] for s in plan.engines] == [
        False,
        False,
    ]
    assert plan.max_draft_len == 4  # the spec default K


def test_medusa_plan_converts_with_explicit_heads_then_builds(models, tmp_path):
    plan = plan_of(models, "med", tmp_path)
    (step,) = plan.engines
    # 6 nodes -> max_draft_len 6 by default; heads/layers from the heads' config.json
    assert (plan.max_draft_len, plan.medusa_num_heads, plan.medusa_num_layers) == (
        6,
        3,
        1,
    )
    # canonical order: by depth, then lexicographic
    assert plan.medusa_choices == ((0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0))
    spec = step.llm.kwargs["speculative_config"]
    assert spec.name == "MedusaDecodingConfig"
    assert (spec.kwargs["num_medusa_heads"], spec.kwargs["max_draft_len"]) == (3, 6)
    assert step.convert.args == (str(models["target"]),)
    assert step.convert.kwargs["speculative_model_dir"] == PathArg(
        str(models["medusa"])
    )
    assert step.convert.kwargs["max_draft_len"] == 6
    assert step.convert.kwargs["mapping"].kwargs["rank"] == RankArg()
    assert step.llm.kwargs["model"] == step.checkpoint_dir
    assert build_kwargs(step)["speculative_decoding_mode"].member == "MEDUSA"
    assert step.expect.num_medusa_heads == 3 and step.expect.num_medusa_layers == 1


def test_fp8_tp2_plan(models, tmp_path):
    (step,) = plan_of(models, "fp8", tmp_path).engines
    fp8 = EnumRef("QuantAlgo", "FP8")
    assert step.llm.kwargs["quant_config"] == Call(
        "QuantConfig", {"quant_algo": fp8, "kv_cache_quant_algo": fp8}
    )
    assert plugins(step)["gemm_plugin"] is None
    assert plugins(step)["use_fp8_context_fmha"] is True
    assert plugins(step)["reduce_fusion"] is True  # TP 2
    assert step.llm.kwargs["tensor_parallel_size"] == 2
    assert step.expect.quant_algo == step.expect.kv_cache_quant_algo == "FP8"


def test_plan_json_round_trip(models, tmp_path):
    plan = plan_of(models, "med", tmp_path)
    text = json.dumps(plan.to_json())
    assert VariantPlan.from_json(json.loads(text)) == plan


def test_command_lines_match_the_calls(models, tmp_path, contract):
    (step,) = plan_of(models, "med", tmp_path).engines
    plan = plan_of(models, "med", tmp_path)
    argv = build_argv(step)
    assert argv[:5] == [
        "trtllm-build",
        "--checkpoint_dir",
        str(tmp_path.resolve() / "engines/med/checkpoint-target"),
        "--output_dir",
        str(tmp_path.resolve() / "engines/med"),
    ]
    pairs = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert pairs["--speculative_decoding_mode"] == "medusa"
    assert pairs["--max_draft_len"] == "6"
    assert pairs["--kv_cache_type"] == "paged"
    assert pairs["--gemm_plugin"] == "auto"
    assert pairs["--use_paged_context_fmha"] == "enable"
    convert = convert_argv(step, plan)
    assert convert[1] == "examples/medusa/convert_checkpoint.py"
    cpairs = dict(zip(convert[2::2], convert[3::2], strict=False))
    assert cpairs["--num_medusa_heads"] == "3"
    assert cpairs["--num_medusa_layers"] == "1"
    assert cpairs["--max_medusa_token_len"] == "6"
    assert cpairs["--dtype"] == "float16"  # 'auto' resolved from the target config


def test_render_plan_shows_llm_api_and_cli(models, tmp_path, contract):
    text = render_plan(plan_of(models, "dt", tmp_path), contract)
    assert "from tensorrt_llm._tensorrt_engine import LLM" in text
    assert (
        "speculative_decoding_mode=SpeculativeDecodingMode.DRAFT_TOKENS_EXTERNAL"
        in text
    )
    assert text.count("llm.save(") == 2
    assert "--speculative_decoding_mode draft_tokens_external" in text
    assert text.count("--gather_generation_logits") == 2


def test_dry_run_through_cli_prints_plans_and_writes_nothing(models, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: t\nbackend: trtllm\n"
        f"models: {{target: {models['target']}, draft: {models['draft']}, "
        f"medusa: {models['medusa']}}}\nvariants:\n{VARIANTS}"
    )
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli, ["build", str(spec), "--out", str(out), "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("# variant ") == 5
    assert "would build med: trtllm medusa, tree=6 nodes, depth 3" in result.output
    assert not out.exists()


def test_real_build_without_tensorrt_llm_names_the_image(models, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"name: t\nbackend: trtllm\nmodels: {{target: {models['target']}}}\n"
        "variants:\n  - {name: base, mode: baseline}\n"
    )
    with pytest.raises(SystemExit) as exc:
        main(["build", str(spec), "--out", str(tmp_path / "run")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "tensorrt_llm is not importable" in err
    assert "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3" in err


@pytest.mark.parametrize(
    ("variant", "needle"),
    [
        # tree deeper than the heads: depth 4 > 3 heads
        (
            "{name: v, mode: medusa, medusa_choices: [[0], [0, 0], [0, 0, 0], [0, 0, 0, 0]]}",
            "depth 4 exceeds num_medusa_heads 3",
        ),
        # tree larger than max_draft_len: 6 nodes > 5
        (
            f"{{name: v, mode: medusa, medusa_choices: {TREE6}, max_draft_len: 5}}",
            "6 nodes but the engine's max_draft_len is 5",
        ),
        # the default tree mc_sim_7b_63 is 4 deep: too deep for 3 heads
        ("{name: v, mode: medusa}", "depth 4 exceeds num_medusa_heads 3"),
        (
            "{name: v, mode: medusa, medusa_choices: [[0]], max_beam_width: 2}",
            "beam_with_speculation",
        ),
        (
            "{name: v, mode: medusa, medusa_choices: [[0]], quantization: fp8}",
            "fp8_medusa",
        ),
    ],
)
def test_bad_medusa_variants_exit_2_with_one_line(
    models, tmp_path, capsys, variant, needle
):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"name: t\nbackend: trtllm\nmodels: {{target: {models['target']}, "
        f"medusa: {models['medusa']}}}\nvariants:\n  - {variant}\n"
    )
    with pytest.raises(SystemExit) as exc:
        main(["build", str(spec), "--out", str(tmp_path / "run"), "--dry-run"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_draft_target_without_draft_model_exits_2(models, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"name: t\nbackend: trtllm\nmodels: {{target: {models['target']}}}\n"
        "variants:\n  - {name: v, mode: draft_target}\n"
    )
    with pytest.raises(SystemExit) as exc:
        main(["build", str(spec), "--dry-run"])
    assert exc.value.code == 2
    assert "models.draft" in capsys.readouterr().err


def test_draft_with_another_vocab_is_refused(tmp_path):
    models = make_models(tmp_path, draft_vocab=96)
    spec = spec_for(models, "  - {name: v, mode: draft_target}\n")
    with pytest.raises(ModelMismatchError, match="vocab_size 96 but the target has 64"):
        read_model_facts(spec.models, {"draft_target"})


def test_heads_config_without_layers_is_refused(models, tmp_path):
    heads = tmp_path / "heads"
    shutil.copytree(models["medusa"], heads)
    config = json.loads((heads / "config.json").read_text())
    del config["medusa_num_layers"]
    (heads / "config.json").write_text(json.dumps(config))
    spec = spec_for({**models, "medusa": heads}, "  - {name: v, mode: medusa}\n")
    with pytest.raises(ConfigError, match="medusa_num_layers"):
        read_model_facts(spec.models, {"medusa"})


def test_fp8_on_an_ampere_gpu_is_refused_before_building(models, tmp_path):
    spec = spec_for(models, VARIANTS)
    with pytest.raises(ConfigError, match="compute capability >= 8.9.*8.0"):
        plan_and_check(
            spec,
            spec.variant("fp8"),
            RunDir(tmp_path),
            load_contract(),
            [("A100", (8, 0))],
        )
    # the same variant is fine on a Hopper GPU
    plan_and_check(
        spec, spec.variant("fp8"), RunDir(tmp_path), load_contract(), [("H100", (9, 0))]
    )


def test_dry_run_manifest_records_layout_tree_and_cuda_graphs(models, tmp_path):
    spec = spec_for(
        models,
        f"  - {{name: med, mode: medusa, medusa_choices: {TREE6}, cuda_graphs: true}}\n",
    )
    manifest = build_trtllm_variant(
        spec, spec.variant("med"), RunDir(tmp_path), dry_run=True
    )
    assert manifest.backend == "trtllm" and manifest.engines == {"target": "."}
    assert manifest.medusa.num_heads == 3 and manifest.medusa.num_layers == 1
    assert manifest.medusa.choices[-1] == [0, 0, 0]
    assert manifest.cuda_graphs.requested and manifest.cuda_graphs.available
    assert manifest.model_extra["trtllm"]["speculative_decoding_mode"] == {
        "target": "MEDUSA"
    }
    assert (
        "MedusaForCausalLm.from_hugging_face(" in manifest.model_extra["dry_run_text"]
    )


def test_plan_variant_is_pure(models, tmp_path):
    spec = spec_for(models, VARIANTS)
    facts = read_model_facts(spec.models, {"baseline"})
    plan = plan_variant(spec.variant("base"), facts, tmp_path / "engines" / "base")
    assert not (tmp_path / "engines").exists()
    assert plan.engines[0].engine_dir == str(tmp_path / "engines" / "base")


class ComputeCapabilityNvml(FakeNvml):
    """FakeNvml plus the compute capability query (per device, scripted)."""

    def __init__(self, gpus, capabilities):
        super().__init__(gpus)
        self.capabilities = capabilities

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        self._gpu(handle, "nvmlDeviceGetCudaComputeCapability")
        return self.capabilities[handle]


def test_gpu_capabilities_from_nvml():
    nvml = ComputeCapabilityNvml(
        [FakeGpu("GPU-0", name="NVIDIA A100"), FakeGpu("GPU-1", name="NVIDIA H100")],
        [(8, 0), (9, 0)],
    )
    nvml.nvmlInit()
    assert gpu_capabilities(nvml) == [("NVIDIA A100", (8, 0)), ("NVIDIA H100", (9, 0))]
    broken = ComputeCapabilityNvml([FakeGpu("GPU-0")], [(9, 0)])
    broken.nvmlInit()
    broken.gpus[0].fail["nvmlDeviceGetCudaComputeCapability"] = (
        pynvml.NVML_ERROR_NOT_SUPPORTED
    )
    assert gpu_capabilities(broken) == []


def test_gpu_memory_peak_tracks_the_largest_sample():
    gpus = [
        FakeGpu("GPU-0", used=2 * 2**30, reserved=0),
        FakeGpu("GPU-1", used=0, reserved=0),
    ]
    nvml = FakeNvml(gpus)
    nvml.nvmlInit()
    peak = GpuMemoryPeak(nvml, interval_s=3600)  # the thread samples once, then waits
    with peak:
        gpus[1].used = 5 * 2**30
        peak.sample()
        gpus[1].used = 1 * 2**30
    # baseline 2 GiB; peak 2 + 5 GiB; the exit sample (3 GiB) does not lower it
    assert peak.available and peak.baseline_used_bytes == 2 * 2**30
    assert peak.peak_used_bytes == 7 * 2**30
    assert peak.peak_delta_bytes == 5 * 2**30


def test_gpu_memory_peak_without_nvml_is_unavailable(monkeypatch):
    import trtbench.builders.trtllm.run as run

    monkeypatch.setattr(run, "_load_nvml", lambda: None)
    with GpuMemoryPeak() as peak:
        pass
    assert not peak.available and peak.peak_delta_bytes is None
