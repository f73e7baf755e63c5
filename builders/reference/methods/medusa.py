"""Medusa's decoder: the heads' tree, verified with tree attention."""

from __future__ import annotations

from trtbench.builders.medusa_tree import build_tree
from trtbench.builders.reference.decoding import BaselineDecoder, MedusaDecoder
from trtbench.builders.reference.methods.parts import DecoderParts, missing


def make_decoder(parts: DecoderParts) -> BaselineDecoder:
    """A :class:`MedusaDecoder`.

    Raises:
        BuildError: no heads or tree in ``parts``, or a ``draft_len_schedule`` (a tree has
            no draft length to schedule).
    """
    if parts.heads is None or not parts.choices or parts.draft_len_schedule:
        raise missing("medusa", "heads and a tree and takes no draft_len_schedule")
    tree = build_tree(parts.choices)
    return MedusaDecoder(
        parts.runner(parts.target, tree.num_nodes + 1),
        parts.heads,
        tree,
        parts.max_concurrency,
    )
