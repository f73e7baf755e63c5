"""What a method's decoder factory is given: the loaded models and the built variant.

A method module of this folder defines ``make_decoder(parts: DecoderParts) ->
BaselineDecoder``; the method's ``reference_decoder`` (``trtbench/core/methods/``) names it
as ``module:function`` and :func:`decoder_for` imports it on demand, so the ground floor
never imports engine code and adding a method adds no branch to the engine's factory.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import nn
from transformers import PreTrainedModel

from trtbench.builders.reference.adaptive import DraftLenPolicy
from trtbench.builders.reference.decoding import BaselineDecoder
from trtbench.builders.reference.ngram import NgramSettings
from trtbench.builders.reference.runner import ModelRunner
from trtbench.core import methods
from trtbench.core.errors import BuildError


@dataclass(frozen=True)
class DecoderParts:
    """The inputs of a decoder factory.

    Attributes:
        target: the target model; runner: ``runner(model, widest)`` → a
            :class:`ModelRunner` with ``widest`` extra positions and the engine's slots.
        max_seq_len, max_batch_size: per-request tokens at most; rows decoded together.
        draft_len: K (drafts per step at most); policy: K by batch size (``adaptive.py``).
        draft, heads, choices, eagle3: the models a method may need (None: not loaded).
        ngram: the n-gram window; max_concurrency, draft_len_schedule: adaptive
            speculation as given.
        variant: the built variant (build.json's ``variant``; empty when assembled by hand):
            a method's own fields (``Method.spec_fields``) are read from it.
    """

    target: PreTrainedModel
    runner: Callable[[PreTrainedModel, int], ModelRunner]
    max_seq_len: int
    max_batch_size: int
    draft_len: int
    policy: DraftLenPolicy
    draft: PreTrainedModel | None = None
    heads: nn.Module | None = None
    choices: list[list[int]] | None = None
    eagle3: nn.Module | None = None
    ngram: NgramSettings | None = None
    max_concurrency: int | None = None
    draft_len_schedule: Mapping[int, int] | None = None
    variant: Mapping[str, Any] = field(default_factory=dict)


def decoder_for(mode: str, parts: DecoderParts) -> BaselineDecoder:
    """The decoder of ``mode`` from its method's ``reference_decoder`` factory.

    Raises:
        BuildError: an unknown mode, a method the reference engine does not run, or a
            model the method needs missing from ``parts`` (the factory's message).
    """
    method = methods.method_of(mode)
    if method is None or method.reference_decoder is None:
        on = [m.name for m in methods.METHODS.values() if m.reference_decoder]
        raise BuildError(
            f"mode {mode!r} has no reference-engine decoder (it has {', '.join(on)}); "
            "rebuild the engine with one of those or another backend"
        )
    module, _, name = method.reference_decoder.partition(":")
    factory = getattr(importlib.import_module(module), name)
    return factory(parts)


def missing(mode: str, what: str) -> BuildError:
    """The error of a factory whose model is not in its parts."""
    return BuildError(
        f"mode {mode!r} cannot be assembled from the models given ({mode} needs {what}); "
        "rebuild the engine"
    )
