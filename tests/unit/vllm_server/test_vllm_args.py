"""``server: vllm`` variants → ``vllm serve`` argv and ``--speculative-config`` (vLLM 0.32).

Every expected argv and JSON object is written out by hand from vLLM 0.32's flags
(``vllm/engine/arg_utils.py``) and ``SpeculativeConfig`` fields (``vllm/config/speculative.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtbench.core.errors import ConfigError
from trtbench.spec.bench import ModelsSpec, VariantSpec, parse_spec
from trtbench.vllm_server.args import VllmSettings, serve_argv, speculative_config

PY = Path("/v/bin/python")


@pytest.fixture
def models(tmp_path: Path) -> ModelsSpec:
    heads = tmp_path / "medusa"
    heads.mkdir()
    (heads / "config.json").write_text(json.dumps({"medusa_num_heads": 3}))
    return ModelsSpec(target=Path("/m/target"), draft=Path("/m/draft"), medusa=heads)


def variant(**fields) -> VariantSpec:
    return VariantSpec(**{"name": "v", "mode": "baseline", **fields})


def test_baseline_argv_in_full(models):
    v = variant(name="base", max_batch_size=4, max_input_len=256, max_seq_len=512)
    settings = VllmSettings(kv_cache_gib=0.5, seed=7, extra_args=("--x", "1"))
    assert serve_argv(PY, v, models, 8123, settings) == [
        "/v/bin/python",
        "-m",
        "vllm.entrypoints.launchers.api_server.entry",
        "--model",
        "/m/target",
        "--served-model-name",
        "base",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--dtype",
        "float32",
        "--seed",
        "7",
        "--max-num-seqs",
        "4",
        "--max-model-len",
        "512",
        "--generation-config",
        "vllm",
        "--enforce-eager",
        "--kv-cache-memory-bytes",
        "536870912",
        "--x",
        "1",
    ]


def test_optional_flags(models):
    v = variant(cuda_graphs=True, dtype="bfloat16", tp_size=2, max_num_tokens=4096)
    argv = serve_argv(PY, v, models, 1, VllmSettings(kv_cache_gib=None))
    assert argv[argv.index("--dtype") + 1] == "bfloat16"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert argv[argv.index("--max-num-batched-tokens") + 1] == "4096"
    assert "--enforce-eager" not in argv and "--kv-cache-memory-bytes" not in argv
    assert "--speculative-config" not in argv


def test_draft_target_k4(models):
    v = variant(mode="draft_target", max_draft_len=4)
    argv = serve_argv(PY, v, models, 1)
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": "draft_model",
        "model": "/m/draft",
        "num_speculative_tokens": 4,
    }


def test_draft_target_default_k_is_4(models):
    spec = speculative_config(variant(mode="draft_target"), models)
    assert spec["num_speculative_tokens"] == 4


def test_medusa_chain_depth_is_the_number_of_heads_drafted(models):
    v = variant(mode="medusa", medusa_choices=[[0], [0, 0]])
    assert speculative_config(v, models) == {
        "method": "medusa",
        "model": str(models.medusa),
        "num_speculative_tokens": 2,
    }


def test_medusa_without_tree_uses_every_head_or_max_draft_len(models):
    assert (
        speculative_config(variant(mode="medusa"), models)["num_speculative_tokens"]
        == 3
    )
    v = variant(mode="medusa", max_draft_len=1)
    assert speculative_config(v, models)["num_speculative_tokens"] == 1


@pytest.mark.parametrize(
    "tree, words",
    [
        ([[0], [1]], "one top-1 chain"),
        ([[0], [0, 1]], "one top-1 chain"),
        ("mc_sim_7b_63", "mc_sim_7b_63 branches"),
        ([[0], [0, 0], [0, 0, 0], [0, 0, 0, 0]], "has 3"),
    ],
)
def test_medusa_trees_vllm_cannot_draft(models, tree, words):
    with pytest.raises(ConfigError, match=words) as info:
        speculative_config(
            variant(name="m", mode="medusa", medusa_choices=tree), models
        )
    assert "variant m (server: vllm, mode medusa)" in str(info.value)


def test_ngram_maps_the_match_lengths():
    spec = parse_spec(
        "models: {target: /m/t}\n"
        "variants: [{name: ng, mode: ngram, server: vllm, max_draft_len: 3,"
        " max_matching_ngram_size: 4}]\n"
    )
    assert speculative_config(spec.variants[0], spec.models) == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 1,
    }


@pytest.mark.parametrize("mode, extra", [("mtp", "")])  # eagle3: test_vllm_eagle3_args
def test_modes_vllm_cannot_serve_are_named(mode, extra):
    spec = parse_spec(
        "models: {target: /m/t}\n"
        f"variants: [{{name: x, mode: {mode}, server: vllm{extra}}}]\n"
    )
    with pytest.raises(ConfigError, match=f"mode {mode}.*use server: triton"):
        speculative_config(spec.variants[0], spec.models)


def test_missing_heads_config_is_a_config_error(tmp_path):
    models = ModelsSpec(target=Path("/m/t"), medusa=tmp_path / "nothing")
    with pytest.raises(
        ConfigError, match="models.medusa: .*config.json does not exist"
    ):
        speculative_config(variant(mode="medusa"), models)


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory):
    from tests.support.random_llama import make_tokenizer, random_llama, save_model

    root = tmp_path_factory.mktemp("vllm_refusal")
    return save_model(random_llama(seed=0), root / "target", make_tokenizer(64))


def test_a_method_without_a_vllm_mapping_exits_2_before_any_build(
    tiny_target, tmp_path, capsys, monkeypatch
):
    """The trap this guards: a method vLLM names but whose drafter has no mapping here
    (a method added to the registry without its vLLM keys) once fell through to n-gram's
    ``prompt_lookup_*`` config. Here n-gram's entry is given a drafter nothing maps:
    ``trtbench run --dry-run`` refuses the variant with one line, exit 2, builds nothing."""
    from dataclasses import replace

    import yaml

    from tests.support.cli import run_cli
    from trtbench.core import methods

    unmapped = replace(methods.METHODS["ngram"], drafter="suffix_tree")
    monkeypatch.setitem(methods.METHODS, "ngram", unmapped)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "t",
                "backend": "reference",
                "models": {"target": str(tiny_target)},
                "variants": [
                    {"name": "b", "mode": "baseline", "server": "vllm"},
                    {"name": "ng", "mode": "ngram", "server": "vllm"},
                ],
            }
        )
    )
    code, _, err = run_cli(
        ["run", spec, "--out", tmp_path / "run", "--dry-run"], capsys
    )
    assert code == 2 and err.count("\n") == 1, err
    assert "variant ng (server: vllm, mode ngram)" in err
    # the six methods written before the plug-ins, then any added since; never ngram
    listed = err.split("mapped for modes ", 1)[1].split(" only;", 1)[0].split(", ")
    assert listed[:4] == ["baseline", "draft_target", "medusa", "eagle3"], err
    assert "ngram" not in listed and "mtp" not in listed
    assert not (tmp_path / "run" / "builds").exists()
