"""EAGLE-3: a one-layer head over the target's hidden states drafts a chain (Li et al. 2025,
arXiv 2503.01840; TensorRT-LLM ``Eagle3DecodingConfig``, LLM API only; vLLM ``eagle3``).
Planner rates: 0.8, 0.7, 0.6 (the order of published chain acceptance)."""

from __future__ import annotations

from typing import Any

from trtbench.core.methods.method import Method
from trtbench.core.stacks import REFERENCE, TRTLLM_PYTORCH


def _check(v: Any) -> None:
    if v.speculative_model is None:
        raise ValueError(
            "mode eagle3 needs speculative_model: set it to the EAGLE-3 draft checkpoint dir"
        )


METHOD = Method(
    name="eagle3",
    order=30,
    draft_length="max_draft_len",
    backends=(REFERENCE, TRTLLM_PYTORCH),
    llmapi_decoding_type="Eagle3",
    engine_mode=None,
    vllm_method="eagle3",
    planner="chain",
    drafter="eagle3_head",
    label="EAGLE-3",
    fields=("max_draft_len", "speculative_model"),
    default_rates=(0.8, 0.7, 0.6),
    reference_decoder="trtbench.builders.reference.methods.eagle3:make_decoder",
    check=_check,
)
