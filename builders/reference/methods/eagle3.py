"""EAGLE-3's decoder: the head drafts a chain from the target's hidden states."""

from __future__ import annotations

from trtbench.builders.reference.decoding import BaselineDecoder
from trtbench.builders.reference.eagle_decoding import Eagle3Decoder, Eagle3Runner
from trtbench.builders.reference.methods.parts import DecoderParts, missing
from trtbench.builders.reference.runner import ModelRunner


def make_decoder(parts: DecoderParts) -> BaselineDecoder:
    """An :class:`Eagle3Decoder`.

    Raises:
        BuildError: no EAGLE-3 draft in ``parts``.
    """
    eagle3 = parts.eagle3
    if eagle3 is None:
        raise missing("eagle3", "an EAGLE-3 draft")
    widest = parts.max_seq_len + parts.draft_len + 1
    return Eagle3Decoder(
        ModelRunner(
            parts.target, widest, parts.max_batch_size, aux_layers=eagle3.layer_ids
        ),
        Eagle3Runner(eagle3, widest, parts.max_batch_size),
        parts.draft_len,
        parts.policy,
    )
