"""Draft-target's decoder: K draft-model forwards, one verification of K + 1."""

from __future__ import annotations

from trtbench.builders.reference.decoding import BaselineDecoder, DraftTargetDecoder
from trtbench.builders.reference.methods.parts import DecoderParts, missing


def make_decoder(parts: DecoderParts) -> BaselineDecoder:
    """A :class:`DraftTargetDecoder`.

    Raises:
        BuildError: no draft model in ``parts``.
    """
    if parts.draft is None:
        raise missing("draft_target", "a draft model")
    widest = parts.draft_len + 1
    return DraftTargetDecoder(
        parts.runner(parts.target, widest),
        parts.runner(parts.draft, widest),
        parts.draft_len,
        parts.policy,
    )
