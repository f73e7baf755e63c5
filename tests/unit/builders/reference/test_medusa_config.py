"""vLLM's keys added to a Medusa heads config.json saved before they existed (cached builds)."""

from __future__ import annotations

import json

from trtbench.builders.reference.medusa_config import add_vllm_keys


def test_old_config_gets_the_keys_and_keeps_its_own(tmp_path):
    heads = tmp_path / "medusa"
    heads.mkdir()
    old = {"medusa_num_heads": 3, "medusa_num_layers": 1, "version": "2"}
    (heads / "config.json").write_text(json.dumps(old))
    paths = {"target": tmp_path / "target", "medusa": heads}
    assert add_vllm_keys(paths) is paths
    assert json.loads((heads / "config.json").read_text()) == {
        **old,
        "model_type": "medusa",  # vLLM's MedusaConfig
        "medusa_fc_bias": True,  # FasterDecoding's ResBlock linear has a bias
    }


def test_a_current_config_is_not_rewritten_and_a_missing_one_is_left(tmp_path):
    heads = tmp_path / "medusa"
    heads.mkdir()
    text = '{"medusa_num_heads": 1, "model_type": "medusa", "medusa_fc_bias": true}'
    (heads / "config.json").write_text(text)
    add_vllm_keys({"medusa": heads})
    assert (heads / "config.json").read_text() == text
    add_vllm_keys({"medusa": tmp_path / "absent"})  # logged, no raise
