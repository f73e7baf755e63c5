"""Draft-target's decoder: K draft-model forwards, one verification of K + 1; its build
checks the draft model against the target."""

from __future__ import annotations

from trtbench.builders.reference.build import (
    MethodModels,
    ModelCheck,
    check_draft,
    check_model_dir,
)
from trtbench.builders.reference.decoding import BaselineDecoder, DraftTargetDecoder
from trtbench.builders.reference.methods.parts import DecoderParts, missing
from trtbench.spec.bench import VariantSpec


def check_models(check: ModelCheck) -> MethodModels:
    """The draft model (the variant's ``speculative_model``, else ``models.draft``): a
    model dir whose weights, vocabulary and tokenizer fit the target.

    Raises:
        ConfigError: unset, missing, or without config.json (naming the field).
        ModelMismatchError: vocabulary or tokenizer differ from the target's.
    """
    variant = check.variant
    where = "speculative_model" if variant.speculative_model else "models.draft"
    path = variant.speculative_model or check.spec.models.draft
    draft = check_model_dir(path, where, "draft model")
    check_draft(draft, where, check.target_config, check.target_vocab)
    return MethodModels(roles={"draft": draft}, draft_len=variant.draft_len)


def build_notes(variant: VariantSpec, found: MethodModels) -> dict[str, str]:
    """build.json's ``reference.draft_acceptance``: why the rule asked for is exact."""
    return {
        "draft_acceptance": (
            f"{variant.draft_acceptance}: under greedy decoding both rules accept a draft "
            "token iff it is the target's argmax, so the engine compares tokens"
        )
    }


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
