"""Incremental detokenization of streamed token ids (``templates/python/trtbench_detok.py``).

A byte-level BPE tokenizer trained on ASCII text only splits every non-ASCII character into
one token per UTF-8 byte, so feeding ids one at a time cuts characters in half: the decoder
must hold those pieces back and still return exactly the whole text.
"""

from __future__ import annotations

import importlib.util
from importlib import resources

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast


@pytest.fixture(scope="module")
def detok():
    """The template module as Triton's Python backend imports it (a plain file)."""
    file = (
        resources.files("trtbench.triton_repo") / "templates/python/trtbench_detok.py"
    )
    spec = importlib.util.spec_from_file_location("trtbench_detok", str(file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["</s>"],
    )
    tok.train_from_iterator(["hello world, the quick brown fox"] * 50, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>")


TEXT = "héllo → 日本 wörld"


def test_pieces_hold_partial_characters_and_join_to_the_text(detok, tokenizer):
    ids = tokenizer.encode(TEXT)
    # "é" is 2 UTF-8 bytes, "→" 3, "日" 3: at least one id ends inside a character
    assert len(ids) > len(TEXT)
    decoder = detok.IncrementalDecoder(tokenizer)
    pieces = [decoder.push([i]) for i in ids] + [decoder.flush()]
    assert "".join(pieces) == TEXT
    assert all("\ufffd" not in p for p in pieces)
    assert "" in pieces[:-1]  # something was held back
    # "→" (e2 86 92) is three byte tokens: the first two pushes yield nothing
    arrow = tokenizer.encode("→")
    assert len(arrow) == 3
    d = detok.IncrementalDecoder(tokenizer)
    assert [d.push([arrow[0]]), d.push([arrow[1]]), d.push([arrow[2]])] == ["", "", "→"]


def test_flush_returns_a_dangling_partial_character(detok, tokenizer):
    ids = tokenizer.encode("ok é")
    decoder = detok.IncrementalDecoder(tokenizer)
    assert decoder.push(ids[:-1]) == "ok "  # the last id completes "é"
    assert decoder.flush() == "\ufffd"


def test_special_tokens_are_skipped(detok, tokenizer):
    eos = tokenizer.eos_token_id
    decoder = detok.IncrementalDecoder(tokenizer)
    assert decoder.push(tokenizer.encode("hello") + [eos]) == "hello"
    assert decoder.flush() == ""
