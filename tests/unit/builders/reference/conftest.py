"""Fixtures shared by the unit tests that run the reference engine."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.random_llama import float64_family
from trtbench.builders.tiny.tiny_eagle import make_draft, train_eagle3
from trtbench.builders.tiny.tiny_recipe import EagleRecipe


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models run fastest on one thread (and leave the other core to the suite)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def family():
    """The float64 models of the batched lossless tests (vocabulary 64): target, near
    (a drafter), heads, tokenizer."""
    return float64_family(64)


@pytest.fixture(scope="module")
def target(family):
    return family["target"]


@pytest.fixture(scope="module")
def eagle3_draft(family):
    """An EAGLE-3 draft over the family's target, trained ~100 steps on its greedy text
    (a few seconds) so that its drafts are sometimes right and sometimes wrong."""
    target = family["target"]
    vocab = target.config.vocab_size
    torch.manual_seed(0)
    prompts = torch.randint(
        2, vocab, (48, 6), generator=torch.Generator().manual_seed(1)
    )
    with torch.inference_mode():
        tokens = prompts
        for _ in range(26):
            nxt = target(tokens).logits[:, -1].argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], 1)
        labels = target(tokens).logits.argmax(-1)
    recipe = EagleRecipe(intermediate=64, steps=100, batch=8, lr=1e-2)
    model = make_draft(target, recipe).double()
    data = {"tokens": tokens.clone(), "labels": labels.clone()}
    train_eagle3(model, target, data, recipe, np.random.default_rng(0))
    return model
