"""Fixtures shared by the unit tests that run the reference engine."""

from __future__ import annotations

import pytest
import torch

from tests.support.random_llama import float64_family


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
