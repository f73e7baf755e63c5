"""n-gram (prompt lookup): drafts copied from the request's own tokens, no model
(TensorRT-LLM ``NGramDecodingConfig``, LLM API only; vLLM ``ngram``). Planner rates 0.5,
0.4, 0.3 (E = 1.76: an assumption; it depends on how much of the output copies the
prompt)."""

from __future__ import annotations

from trtbench.core.methods.method import Method
from trtbench.core.stacks import REFERENCE, TRTLLM_PYTORCH

METHOD = Method(
    name="ngram",
    order=50,
    draft_length="max_draft_len",
    backends=(REFERENCE, TRTLLM_PYTORCH),
    llmapi_decoding_type="NGram",
    engine_mode=None,
    vllm_method="ngram",
    planner="chain",
    drafter="prompt_lookup",
    label="n-gram",
    fields=(
        "max_draft_len",
        "max_matching_ngram_size",
        "prompt_lookup_min",
        "prompt_lookup_max",
    ),
    free=True,
    default_rates=(0.5, 0.4, 0.3),
    reference_decoder="trtbench.builders.reference.methods.ngram:make_decoder",
)
