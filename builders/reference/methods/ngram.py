"""n-gram's decoder: prompt lookup, no model (``builders/reference/ngram.py``)."""

from __future__ import annotations

from trtbench.builders.reference.decoding import BaselineDecoder
from trtbench.builders.reference.methods.parts import DecoderParts
from trtbench.builders.reference.ngram import NgramDecoder, NgramSettings


def make_decoder(parts: DecoderParts) -> BaselineDecoder:
    """An :class:`NgramDecoder` (window: ``parts.ngram``, default 1..2)."""
    return NgramDecoder(
        parts.runner(parts.target, parts.draft_len + 1),
        parts.draft_len,
        parts.ngram or NgramSettings(),
        parts.policy,
    )
