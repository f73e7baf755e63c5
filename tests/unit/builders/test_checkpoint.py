"""Weights against config.json from safetensors headers (``builders/checkpoint.py``).

The files are written with the ``safetensors`` package itself (numpy arrays), in the layouts
``save_pretrained`` uses: one ``model.safetensors``, or shards listed in
``model.safetensors.index.json``'s ``weight_map``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from trtbench.builders.checkpoint import check_weights_match_config, weight_shapes
from trtbench.core.errors import ConfigError

CONFIG = {"num_hidden_layers": 3, "vocab_size": 10, "hidden_size": 4}


def tensors(layers: range, vocab: int = 10, hidden: int = 4) -> dict[str, np.ndarray]:
    out = {"model.embed_tokens.weight": np.zeros((vocab, hidden), np.float32)}
    for i in layers:
        out[f"model.layers.{i}.mlp.up_proj.weight"] = np.zeros((8, hidden), np.float32)
    return out


def sharded(path: Path, shards: list[dict[str, np.ndarray]]) -> Path:
    path.mkdir()
    weight_map = {}
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(path / name))
        weight_map.update(dict.fromkeys(shard, name))
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map})
    )
    return path


def test_shapes_of_a_sharded_checkpoint_are_read_from_every_shard(tmp_path):
    all_ = tensors(range(3))
    names = sorted(all_)
    path = sharded(
        tmp_path / "m",
        [{n: all_[n] for n in names[:2]}, {n: all_[n] for n in names[2:]}],
    )
    assert weight_shapes(path) == {n: list(a.shape) for n, a in all_.items()}
    check_weights_match_config(path, CONFIG, "models.target")  # agrees: no error


def test_a_layer_missing_from_the_shards_is_named(tmp_path):
    path = sharded(tmp_path / "m", [tensors(range(2))])
    with pytest.raises(ConfigError) as err:
        check_weights_match_config(path, CONFIG, "models.draft")
    assert str(err.value).startswith("models.draft: ")
    assert "num_hidden_layers 3, but its weights hold 2 layers (indices 0..1)" in str(
        err.value
    )


def test_a_gap_in_the_layer_indices_is_refused(tmp_path):
    path = tmp_path / "m"
    path.mkdir()
    save_file(tensors([0, 1, 3]), str(path / "model.safetensors"))
    with pytest.raises(ConfigError, match=r"hold 3 layers \(indices 0..3\)"):
        check_weights_match_config(path, CONFIG, "models.target")


def test_an_embedding_of_another_vocabulary_is_refused(tmp_path):
    path = tmp_path / "m"
    path.mkdir()
    save_file(tensors(range(3), vocab=12), str(path / "model.safetensors"))
    with pytest.raises(
        ConfigError,
        match=r"vocab_size 10, hidden_size 4, but "
        r"model.embed_tokens.weight is \[12, 4\]",
    ):
        check_weights_match_config(path, CONFIG, "models.target")


def test_no_safetensors_is_not_checked_and_a_bad_file_is_named(tmp_path):
    path = tmp_path / "m"
    path.mkdir()
    assert weight_shapes(path) is None
    check_weights_match_config(path, CONFIG, "models.target")  # pytorch_model.bin: skip
    (path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ConfigError, match="cannot be read as safetensors"):
        weight_shapes(path)
