"""A KV budget below one request at max_seq_len: ``trtbench build`` exits 2 with one line.

The tiny random Llama (float32): 2 layers × 2 KV heads × head_dim 8 → 2 × 2 × 2 × 8 × 4 =
256 KV bytes per token. max_seq_len 64 in blocks of 16 needs 4 blocks.
"""

from __future__ import annotations

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.random_llama import make_tokenizer, random_llama, save_model


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    root = tmp_path_factory.mktemp("kv_budget")
    return save_model(random_llama(seed=0), root / "target", make_tokenizer(64))


def build(target, tmp_path, capsys, **kv):
    variant = {"name": "b", "mode": "baseline", "max_input_len": 32, "max_seq_len": 64}
    doc = {
        "name": "t",
        "backend": "reference",
        "models": {"target": str(target)},
        "variants": [{**variant, "tokens_per_block": 16, **kv}],
    }
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc))
    return run_cli(["build", spec, "--out", tmp_path / "run", "--dry-run"], capsys)


@pytest.mark.parametrize(
    ("kv", "words"),
    [
        (
            {"kv_cache_max_tokens": 48},
            ["kv_cache_max_tokens 48 gives 3 KV blocks", "4"],
        ),
        # 0.9 (deploy default) × 10000 B / (256 B × 16) = 2 blocks
        (
            {"kv_cache_budget_bytes": 10000},
            [
                "kv_cache_budget_bytes 10000",
                "256 bytes per token",
                "gives 2 KV blocks",
                # 4 blocks x 16 tokens x 256 B / 0.9 = 18204.4
                "raise kv_cache_budget_bytes to at least 18205",
            ],
        ),
    ],
)
def test_a_budget_below_one_request_exits_2(target, tmp_path, capsys, kv, words):
    code, _, err = build(target, tmp_path, capsys, **kv)
    assert code == 2 and err.startswith("trtbench: error: ") and err.count("\n") == 1
    for word in words:
        assert word in err, (word, err)


def test_a_budget_of_one_request_builds(target, tmp_path, capsys):
    assert build(target, tmp_path, capsys, kv_cache_max_tokens=64)[0] == 0
    # 0.9 × 18204 / 4096 = 3.9998 → 3 blocks < 4; 0.9 × 18205 / 4096 → 4
    assert build(target, tmp_path, capsys, kv_cache_budget_bytes=18204)[0] == 2
    assert build(target, tmp_path, capsys, kv_cache_budget_bytes=18205)[0] == 0


def test_the_draft_models_kv_counts_in_the_byte_budget(target, tmp_path, capsys):
    """A draft of the same shape doubles the bytes per token (512): 0.9 × 18205 / (512 ×
    16) = 2 blocks < 4, so the budget that builds baseline is exit 2 for draft_target;
    4 × 16 × 512 / 0.9 = 36408.9 → at least 36409."""
    draft = save_model(random_llama(seed=1), tmp_path / "draft", make_tokenizer(64))
    variant = {
        "name": "d",
        "mode": "draft_target",
        "max_draft_len": 2,
        "max_input_len": 32,
        "max_seq_len": 64,
        "tokens_per_block": 16,
    }
    doc = {
        "name": "t",
        "backend": "reference",
        "models": {"target": str(target), "draft": str(draft)},
    }
    for budget, code in ((18205, 2), (36408, 2), (36409, 0)):
        spec = tmp_path / "spec.yaml"
        spec.write_text(
            yaml.safe_dump(
                {**doc, "variants": [{**variant, "kv_cache_budget_bytes": budget}]}
            )
        )
        got, _, err = run_cli(
            ["build", spec, "--out", tmp_path / f"run{budget}", "--dry-run"], capsys
        )
        assert got == code, (budget, err)
        if code == 2:
            assert "512 bytes per token" in err and "at least 36409" in err, err
