"""n-gram's decoder: prompt lookup, no model (``builders/reference/ngram.py``); its build
note states the lookup window."""

from __future__ import annotations

from trtbench.builders.reference.build import MethodModels
from trtbench.builders.reference.decoding import BaselineDecoder
from trtbench.builders.reference.methods.parts import DecoderParts
from trtbench.builders.reference.ngram import NgramDecoder, NgramSettings
from trtbench.spec.bench import VariantSpec
from trtbench.spec.speculation import ngram_window


def build_notes(variant: VariantSpec, found: MethodModels) -> dict[str, str]:
    """build.json's ``reference.ngram``: the lookup window and rule."""
    low, high = ngram_window(
        variant.prompt_lookup_min,
        variant.prompt_lookup_max,
        variant.max_matching_ngram_size,
    )
    return {
        "ngram": (
            f"prompt lookup: suffixes of {high} down to {low} tokens searched in the "
            f"request's own prompt + output, the earliest occurrence drafts up to "
            f"{variant.draft_len} tokens (vLLM's rule); no match drafts nothing"
        )
    }


def make_decoder(parts: DecoderParts) -> BaselineDecoder:
    """An :class:`NgramDecoder` (window: ``parts.ngram``, default 1..2)."""
    return NgramDecoder(
        parts.runner(parts.target, parts.draft_len + 1),
        parts.draft_len,
        parts.ngram or NgramSettings(),
        parts.policy,
    )
