"""Medusa heads: FasterDecoding key names and config, save → load round trip, loader errors."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from trtbench.builders.reference.medusa_heads import (
    MedusaHeads,
    load_medusa_heads,
    read_medusa_config,
    save_medusa_heads,
)
from trtbench.core.errors import BuildError, ModelMismatchError

HIDDEN, VOCAB = 8, 11


def random_heads(num_heads: int = 3, num_layers: int = 2, seed: int = 0) -> MedusaHeads:
    """Heads with every weight random (fresh ResBlocks are zero, which would hide bugs)."""
    torch.manual_seed(seed)
    heads = MedusaHeads(num_heads, num_layers, HIDDEN, VOCAB)
    with torch.no_grad():
        for p in heads.parameters():
            p.normal_(0.0, 0.5)
    return heads


def test_saved_keys_shapes_and_config_are_fasterdecoding(tmp_path):
    save_medusa_heads(random_heads(3, 2), tmp_path, "/models/target")
    # {h}.{l}.linear.weight|bias for l < L = 2, and {h}.{L}.weight, for h = 0, 1, 2
    expected = {}
    for h in range(3):
        for layer in range(2):
            expected[f"{h}.{layer}.linear.weight"] = [HIDDEN, HIDDEN]
            expected[f"{h}.{layer}.linear.bias"] = [HIDDEN]
        expected[f"{h}.2.weight"] = [VOCAB, HIDDEN]
    with safe_open(str(tmp_path / "medusa_lm_head.safetensors"), framework="pt") as f:
        found = {k: list(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    assert found == expected
    assert json.loads((tmp_path / "config.json").read_text()) == {
        "medusa_num_heads": 3,
        "medusa_num_layers": 2,
        "base_model_name_or_path": "/models/target",
        "hidden_size": HIDDEN,
        "vocab_size": VOCAB,
        "version": "2",
        # vLLM 0.32's MedusaConfig / Medusa: the type, and biases in the residual blocks
        "model_type": "medusa",
        "medusa_fc_bias": True,
    }


def test_forward_is_resblocks_then_lm_projection():
    heads = random_heads(2, 1)
    x = torch.randn(2, 5, HIDDEN)
    out = heads(x)
    assert out.shape == (2, 2, 5, VOCAB)  # [num_heads, batch, seq, vocab]
    sd = heads.state_dict()
    for h in range(2):
        w, b = sd[f"{h}.0.linear.weight"], sd[f"{h}.0.linear.bias"]
        # ResBlock: x + SiLU(x W^T + b); then logits = r W_lm^T (FasterDecoding medusa_model.py)
        r = x + torch.nn.functional.silu(x @ w.T + b)
        torch.testing.assert_close(out[h], r @ sd[f"{h}.1.weight"].T)


def test_fresh_resblock_is_zero_initialised():
    heads = MedusaHeads(2, 1, HIDDEN, VOCAB)
    assert torch.count_nonzero(heads.state_dict()["1.0.linear.weight"]) == 0


def test_init_lm_heads_from_copies_the_base_lm_head():
    heads = MedusaHeads(3, 1, HIDDEN, VOCAB)
    lm = torch.randn(VOCAB, HIDDEN)
    heads.init_lm_heads_from(lm)
    for h in range(3):
        assert torch.equal(heads.state_dict()[f"{h}.1.weight"], lm)


def test_round_trip_gives_identical_logits(tmp_path):
    heads = random_heads(3, 2).eval()
    save_medusa_heads(heads, tmp_path, "target")
    loaded = load_medusa_heads(tmp_path)
    x = torch.randn(1, 7, HIDDEN)
    assert (loaded.num_heads, loaded.num_layers) == (3, 2)
    assert torch.equal(loaded(x), heads(x))


def test_load_casts_dtype(tmp_path):
    save_medusa_heads(random_heads(), tmp_path, "target")
    loaded = load_medusa_heads(tmp_path, dtype=torch.float64)
    assert {p.dtype for p in loaded.parameters()} == {torch.float64}


def test_legacy_pt_file_loads(tmp_path):
    heads = random_heads(2, 1).eval()
    save_medusa_heads(heads, tmp_path, "target")
    (tmp_path / "medusa_lm_head.safetensors").unlink()
    torch.save(heads.state_dict(), tmp_path / "medusa_lm_head.pt")
    x = torch.randn(3, HIDDEN)
    assert torch.equal(load_medusa_heads(tmp_path)(x), heads(x))


def test_config_without_sizes_is_completed_from_the_weights(tmp_path):
    save_medusa_heads(random_heads(2, 1), tmp_path, "target")
    (tmp_path / "config.json").write_text('{"medusa_num_layers": 1}')
    info = read_medusa_config(tmp_path)
    assert (info["num_heads"], info["num_layers"]) == (2, 1)
    assert (info["hidden_size"], info["vocab_size"]) == (HIDDEN, VOCAB)
    assert info["base_model_name_or_path"] is None


def test_config_claiming_fewer_heads_loads_every_stored_head(tmp_path):
    # the published vicuna-7b heads say medusa_num_heads=2 and store 5
    save_medusa_heads(random_heads(3, 1), tmp_path, "target")
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "medusa_num_heads": 2}))
    assert load_medusa_heads(tmp_path).num_heads == 3


def test_missing_config_names_the_file(tmp_path):
    save_medusa_heads(random_heads(), tmp_path, "target")
    (tmp_path / "config.json").unlink()
    with pytest.raises(BuildError, match=r"config\.json is missing"):
        load_medusa_heads(tmp_path)


def test_missing_weights_names_the_file(tmp_path):
    save_medusa_heads(random_heads(), tmp_path, "target")
    (tmp_path / "medusa_lm_head.safetensors").unlink()
    with pytest.raises(BuildError, match=r"medusa_lm_head\.safetensors"):
        load_medusa_heads(tmp_path)


def test_inconsistent_head_shapes_name_the_weights_file(tmp_path):
    save_medusa_heads(random_heads(2, 1), tmp_path, "target")
    path = tmp_path / "medusa_lm_head.safetensors"
    tensors = load_file(str(path))
    tensors["1.1.weight"] = torch.zeros(VOCAB + 1, HIDDEN)  # head 1 has another vocab
    save_file(tensors, str(path))
    with pytest.raises(
        ModelMismatchError, match=r"medusa_lm_head\.safetensors: head 1"
    ):
        load_medusa_heads(tmp_path)


def test_config_disagreeing_with_weights_names_config_json(tmp_path):
    save_medusa_heads(random_heads(), tmp_path, "target")
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "hidden_size": 4096}))
    with pytest.raises(ModelMismatchError, match=r"config\.json says hidden_size=4096"):
        read_medusa_config(tmp_path)


def test_foreign_tensor_names_are_rejected(tmp_path):
    save_medusa_heads(random_heads(), tmp_path, "target")
    path = tmp_path / "medusa_lm_head.safetensors"
    tensors = {f"medusa_head.{k}": v for k, v in load_file(str(path)).items()}
    save_file(tensors, str(path))
    with pytest.raises(ModelMismatchError, match="unexpected tensor 'medusa_head.0"):
        load_medusa_heads(tmp_path)
