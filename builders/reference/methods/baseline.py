"""The baseline's decoder: one target forward per token."""

from __future__ import annotations

from trtbench.builders.reference.decoding import BaselineDecoder
from trtbench.builders.reference.methods.parts import DecoderParts


def make_decoder(parts: DecoderParts) -> BaselineDecoder:
    """A :class:`BaselineDecoder` over the target."""
    return BaselineDecoder(parts.runner(parts.target, 1))
