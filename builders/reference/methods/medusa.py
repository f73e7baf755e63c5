"""Medusa's decoder: the heads' tree, verified with tree attention; its build checks the
heads against the target and the tree against the heads."""

from __future__ import annotations

from trtbench.builders.medusa_tree import build_tree
from trtbench.builders.reference.build import (
    MethodModels,
    ModelCheck,
    check_medusa,
    check_model_dir,
)
from trtbench.builders.reference.decoding import BaselineDecoder, MedusaDecoder
from trtbench.builders.reference.methods.parts import DecoderParts, missing


def check_models(check: ModelCheck) -> MethodModels:
    """The heads (``models.medusa``) against the target; the tree against the heads and
    ``max_draft_len`` (K: the tree's node count unless set).

    Raises:
        ConfigError: a missing heads dir or a bad tree (naming the field).
        ModelMismatchError: heads that do not fit the target.
    """
    heads = check_model_dir(check.spec.models.medusa, "models.medusa", "Medusa heads")
    medusa, draft_len = check_medusa(check.target, heads, check.variant, check.index)
    return MethodModels(roles={"medusa": heads}, draft_len=draft_len, medusa=medusa)


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
