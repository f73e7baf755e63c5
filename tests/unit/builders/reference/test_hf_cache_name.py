"""The KV-cache argument's name across transformers versions (hf_load.cache_keyword).

transformers renamed a decoder's ``past_key_values`` argument and output to ``cache`` during
5.x (5.17 has ``past_key_values``, 5.25 ``cache``); a decoder given the other name swallows
it in ``**kwargs`` and attends without the cache, which on an H200 with 5.17 failed every
prefill with a mask of the cache's length against keys of the prompt's. The modules below
have the two signatures as written in those versions' ``LlamaModel.forward``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from trtbench.builders.reference.hf_load import cache_keyword, returned_cache


class NewDecoder(torch.nn.Module):
    def forward(self, input_ids=None, attention_mask=None, cache=None, **kwargs):
        return cache


class OldDecoder(torch.nn.Module):
    def forward(self, input_ids=None, past_key_values=None, use_cache=None, **kwargs):
        return past_key_values


class NoCache(torch.nn.Module):
    def forward(self, x, **kwargs):
        return x


def test_each_signature_gets_the_name_it_declares() -> None:
    sentinel = object()
    for module in (NewDecoder(), OldDecoder()):
        name = cache_keyword(module)
        # Passed under that name, the module receives the cache (not in **kwargs).
        assert module(**{name: sentinel}) is sentinel


def test_a_forward_without_a_cache_argument_is_refused() -> None:
    with pytest.raises(TypeError, match="NoCache.forward takes no KV cache argument"):
        cache_keyword(NoCache())


def test_returned_cache_reads_either_attribute() -> None:
    new, old = object(), object()
    assert returned_cache(SimpleNamespace(cache=new)) is new
    assert returned_cache(SimpleNamespace(past_key_values=old)) is old
    assert returned_cache(SimpleNamespace(logits=1)) is None
