"""EAGLE-3's decoder: the head drafts a chain from the target's hidden states; its build
checks the checkpoint against the target."""

from __future__ import annotations

from trtbench.builders.reference.build import MethodModels, ModelCheck, check_model_dir
from trtbench.builders.reference.decoding import BaselineDecoder
from trtbench.builders.reference.eagle3 import check_eagle3
from trtbench.builders.reference.eagle_decoding import Eagle3Decoder, Eagle3Runner
from trtbench.builders.reference.methods.parts import DecoderParts, missing
from trtbench.builders.reference.runner import ModelRunner
from trtbench.core.errors import ConfigError
from trtbench.spec.bench import VariantSpec


def check_models(check: ModelCheck) -> MethodModels:
    """The EAGLE-3 checkpoint (the variant's ``speculative_model``) against the target
    (``eagle3.check_eagle3``); its summary is the build note's.

    Raises:
        ConfigError: a missing checkpoint or one that does not fit the target (naming
            ``variants[i].speculative_model``).
    """
    field = f"variants[{check.index}].speculative_model"
    path = check_model_dir(check.variant.speculative_model, field, "EAGLE-3 checkpoint")
    try:
        checked = check_eagle3(path, check.target_config)
    except ConfigError as exc:
        raise ConfigError(f"{field}: {exc}") from None
    return MethodModels(
        roles={"eagle3": path}, draft_len=check.variant.draft_len, checked=checked
    )


def build_notes(variant: VariantSpec, found: MethodModels) -> dict[str, str]:
    """build.json's ``reference.eagle3``: the chain, its checkpoint and what its check found."""
    return {
        "eagle3": (
            f"EAGLE-3 chain of {variant.draft_len} drafts per step from "
            f"{variant.speculative_model} (checked against the target: {found.checked})"
        )
    }


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
