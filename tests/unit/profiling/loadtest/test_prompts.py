"""Synthetic prompts (seeded lengths) and trtllm-bench JSONL datasets (line-numbered errors)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from trtbench.core.errors import ConfigError
from trtbench.profiling.loadtest.workload.prompts import (
    TextTokenizer,
    corpus_text,
    load_dataset,
    synthetic_prompts,
)


@pytest.fixture(scope="module")
def bpe() -> TextTokenizer:
    """A small byte-level BPE trained on the prompt corpus itself (well under a second)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([corpus_text()], trainer)

    tok.decoder = decoders.ByteLevel()
    return TextTokenizer(tok, "bpe")


def test_fixed_lengths_without_tokenizer_are_words():
    prompts = synthetic_prompts(5, 12, 0, 30, 0, np.random.default_rng(0))
    assert [len(p.text.split()) for p in prompts] == [12] * 5
    assert {p.input_tokens for p in prompts} == {12}
    assert {p.output_tokens for p in prompts} == {30}
    assert {p.input_token_source for p in prompts} == {"words"}
    assert [p.task_id for p in prompts] == [f"synthetic-{i}" for i in range(5)]


def test_drawn_lengths_follow_mean_and_std_and_stay_positive():
    rng = np.random.default_rng(3)
    prompts = synthetic_prompts(3000, 20, 5, 100, 10, rng)
    isl = np.array([p.input_tokens for p in prompts])
    osl = np.array([p.output_tokens for p in prompts])
    # Rounded normal draws: mean ≈ 20 / 100, std ≈ 5 / 10 (rounding adds 1/12 variance).
    assert isl.mean() == pytest.approx(20, abs=0.4)
    assert isl.std() == pytest.approx(5, rel=0.06)
    assert osl.mean() == pytest.approx(100, abs=0.8)
    tiny = synthetic_prompts(200, 1, 10, 1, 10, np.random.default_rng(4))
    assert min(p.input_tokens for p in tiny) >= 1
    assert min(p.output_tokens for p in tiny) >= 1


def test_same_seed_same_prompts():
    a = synthetic_prompts(8, 16, 4, 32, 4, np.random.default_rng(11))
    b = synthetic_prompts(8, 16, 4, 32, 4, np.random.default_rng(11))
    c = synthetic_prompts(8, 16, 4, 32, 4, np.random.default_rng(12))
    assert a == b
    assert a != c


def test_tokenizer_prompts_count_real_tokens(bpe):
    prompts = synthetic_prompts(20, 32, 0, 8, 0, np.random.default_rng(5), bpe)
    for p in prompts:
        # The count is the prompt text's own encoding; a window re-encodes to ~32 tokens.
        assert p.input_tokens == len(bpe.encode(p.text))
        assert p.input_ids == tuple(bpe.encode(p.text))
        assert abs(p.input_tokens - 32) <= 3
        assert p.input_token_source == "tokenizer"


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def test_dataset_prompt_and_input_ids(tmp_path, bpe):
    ids = bpe.encode("def main():")
    path = write_lines(
        tmp_path / "d.jsonl",
        [
            json.dumps({"task_id": 7, "prompt": "hello there", "output_tokens": 5}),
            "",
            json.dumps({"task_id": "b", "input_ids": ids, "output_tokens": 9}),
        ],
    )
    prompts = load_dataset(path, bpe)
    assert [p.task_id for p in prompts] == ["7", "b"]
    assert prompts[0].input_tokens == len(bpe.encode("hello there"))
    assert prompts[1].text == "def main():"
    assert (prompts[1].input_tokens, prompts[1].output_tokens) == (len(ids), 9)
    assert prompts[1].input_token_source == "dataset"
    words = load_dataset(
        write_lines(
            tmp_path / "w.jsonl", [json.dumps({"prompt": "a b c", "output_tokens": 2})]
        )
    )
    assert (words[0].input_tokens, words[0].input_token_source) == (3, "words")


def test_dataset_line_that_is_not_json_names_its_line(tmp_path):
    good = json.dumps({"task_id": 0, "prompt": "x", "output_tokens": 4})
    path = write_lines(tmp_path / "bad.jsonl", [good, good, "{not json"])
    with pytest.raises(ConfigError, match=r"bad\.jsonl:3: not valid JSON"):
        load_dataset(path)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ({"prompt": "x"}, "output_tokens"),
        ({"prompt": "x", "output_tokens": 0}, "output_tokens"),
        ({"output_tokens": 3}, "prompt"),
        ({"input_ids": [1, 2], "output_tokens": 3}, "--tokenizer"),
        ([1, 2], "JSON object"),
    ],
)
def test_dataset_field_errors_name_line_and_field(tmp_path, line, needle):
    path = write_lines(tmp_path / "d.jsonl", [json.dumps(line)])
    with pytest.raises(ConfigError, match=needle) as info:
        load_dataset(path)
    assert "d.jsonl:1:" in str(info.value)


def test_missing_and_empty_dataset(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_dataset(tmp_path / "nope.jsonl")
    with pytest.raises(ConfigError, match="no requests"):
        load_dataset(write_lines(tmp_path / "e.jsonl", ["", ""]))
