"""Draft-target speculation: a small draft model proposes K tokens, the target verifies them
(Leviathan et al. 2023, arXiv 2211.17192; TensorRT-LLM ``DraftTargetDecodingConfig``, engine
path ``DRAFT_TOKENS_EXTERNAL``; vLLM ``draft_model``)."""

from __future__ import annotations

from trtbench.core.methods.method import Method
from trtbench.core.stacks import BACKENDS

METHOD = Method(
    name="draft_target",
    order=10,
    draft_length="max_draft_len",
    backends=BACKENDS,
    llmapi_decoding_type="DraftTarget",
    engine_mode="DRAFT_TOKENS_EXTERNAL",
    vllm_method="draft_model",
    planner="draft_target",
    drafter="draft_model",
    label="draft model",
    fields=("max_draft_len", "speculative_model", "draft_acceptance"),
    engine_counts="per_response",
    models_dir=("draft", "a draft model dir"),
    name_hints=("draft", "dtm"),
    reference_decoder="trtbench.builders.reference.methods.draft_target:make_decoder",
)
