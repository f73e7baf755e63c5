"""The reference loader refuses weights that do not match their config.json (missing,
unexpected or mis-shaped tensors, unreadable files): a BuildError naming the directory and
the first keys, never a randomly initialised model."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM

from tests.support.cli import run_cli
from tests.support.random_llama import make_tokenizer, random_llama, save_model
from trtbench.builders.reference.loading import (
    load_causal_lm,
    weight_problems,
)
from trtbench.builders.tiny.tiny_training import load_llama
from trtbench.core.errors import BuildError

F32, CPU = torch.float32, torch.device("cpu")
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A real 2-layer random Llama saved with save_pretrained."""
    return save_model(random_llama(3, layers=2), tmp_path_factory.mktemp("m") / "ok")


def copy(saved, tmp_path, name):
    return shutil.copytree(saved, tmp_path / name)


def rewrite_weights(directory, change) -> None:
    tensors = load_file(str(directory / WEIGHTS))
    change(tensors)
    save_file(tensors, str(directory / WEIGHTS), metadata={"format": "pt"})


def test_matching_weights_load_exactly(saved):
    model = load_causal_lm(saved, F32, CPU)
    stored = load_file(str(saved / WEIGHTS))
    state = model.state_dict()
    assert set(stored) == set(state)
    assert all(torch.equal(stored[k], state[k]) for k in stored)
    assert not model.training


def test_config_with_more_layers_than_the_weights(saved, tmp_path):
    more = copy(saved, tmp_path, "more")
    config = json.loads((more / "config.json").read_text())
    config["num_hidden_layers"] = 3
    (more / "config.json").write_text(json.dumps(config))
    with pytest.raises(BuildError) as err:
        load_causal_lm(more, F32, CPU)
    assert str(err.value) == (
        f"model directory {more}: missing 9 tensors: "
        "model.layers.2.input_layernorm.weight, model.layers.2.mlp.down_proj.weight, "
        "model.layers.2.mlp.gate_proj.weight, …; the weights do not match config.json; "
        "re-export the model"
    )


def test_an_unexpected_tensor(saved, tmp_path):
    extra = copy(saved, tmp_path, "extra")
    rewrite_weights(
        extra, lambda t: t.update({"model.extra_proj.weight": torch.ones(2)})
    )
    with pytest.raises(
        BuildError, match=r": 1 unexpected tensors: model\.extra_proj\.weight;"
    ):
        load_causal_lm(extra, F32, CPU)


def test_a_tensor_of_the_wrong_shape(saved, tmp_path):
    shape = copy(saved, tmp_path, "shape")
    key = "model.layers.1.self_attn.q_proj.weight"
    rewrite_weights(shape, lambda t: t.update({key: torch.zeros(16, 32)}))
    with pytest.raises(BuildError) as err:
        load_causal_lm(shape, F32, CPU)
    assert (
        f"model directory {shape}: 1 tensors of the wrong shape: {key} [16, 32] "
        in str(err.value)
    )
    assert "(config: [32, 32]); the weights do not match config.json" in str(err.value)


def test_the_tiny_model_loader_checks_too(saved, tmp_path):
    fewer = copy(saved, tmp_path, "fewer")
    rewrite_weights(fewer, lambda t: t.pop("model.norm.weight"))
    with pytest.raises(BuildError, match=r"missing 1 tensors: model\.norm\.weight;"):
        load_llama(fewer)


def test_tied_lm_head_is_not_missing(tmp_path):
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    tied = save_model(LlamaForCausalLM(config), tmp_path / "tied")
    assert "lm_head.weight" not in load_file(str(tied / WEIGHTS))
    model = load_causal_lm(tied, F32, CPU)
    assert torch.equal(model.lm_head.weight, model.model.embed_tokens.weight)


@pytest.mark.parametrize("damage", ["no weights", "truncated"])
def test_unreadable_weights_name_the_directory(saved, tmp_path, damage):
    broken = copy(saved, tmp_path, "broken")
    data = (broken / WEIGHTS).read_bytes()
    (broken / WEIGHTS).unlink()
    if damage == "truncated":
        (broken / WEIGHTS).write_bytes(data[: len(data) // 2])
    with pytest.raises(BuildError) as err:
        load_causal_lm(broken, F32, CPU)
    message = str(err.value)
    assert message.startswith(f"model directory {broken} cannot be loaded (")
    assert message.endswith("re-export the model (save_pretrained)")
    assert "\n" not in message


def test_weight_problems_lists_every_kind_sorted():
    info = {
        "missing_keys": {"b", "a", "d", "c"},
        "unexpected_keys": [],
        "mismatched_keys": [("w", torch.Size([2]), torch.Size([3]))],
        "error_msgs": [],
    }
    assert weight_problems(info) == [
        "missing 4 tensors: a, b, c, …",
        "1 tensors of the wrong shape: w [2] (config: [3])",
    ]
    assert weight_problems({"missing_keys": set(), "unexpected_keys": set()}) == []


def test_a_draft_whose_weights_lost_a_layer_is_refused_by_the_build(tmp_path, capsys):
    """Config and weights are compared before anything is built (safetensors headers); the
    engine load's strict check (above) stays for files changed afterwards."""
    tok = make_tokenizer(64)
    target = save_model(random_llama(0), tmp_path / "target", tok)
    draft = save_model(random_llama(1, layers=1), tmp_path / "draft", tok)
    config = json.loads((draft / "config.json").read_text())
    config["num_hidden_layers"] = 2
    (draft / "config.json").write_text(json.dumps(config))
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "t",
                "backend": "reference",
                "models": {"target": str(target), "draft": str(draft)},
                "variants": [
                    {
                        "name": "dt",
                        "mode": "draft_target",
                        "max_draft_len": 2,
                        "max_input_len": 16,
                        "max_seq_len": 32,
                    }
                ],
            }
        )
    )
    code, _, err = run_cli(["build", spec, "--out", tmp_path / "run"], capsys)
    assert code == 2, err
    line = err.strip().splitlines()[-1]  # after the save's progress bar
    assert line.startswith(f"trtbench: error: {spec}: models.draft: ")
    assert "num_hidden_layers 2, but its weights hold 1 layers (indices 0..0)" in line
    assert not (tmp_path / "run").exists()
