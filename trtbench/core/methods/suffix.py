"""Suffix decoding: drafts from suffix trees over the request's own tokens and over previous
responses, no model (Oliaro et al. 2024, arXiv 2411.04975; Snowflake's ``arctic-inference``;
vLLM ``--speculative-config '{"method": "suffix", …}'``).

Its own variant fields are vLLM's ``SpeculativeConfig`` fields with vLLM's defaults
(``vllm/config/speculative.py``): ``suffix_decoding_max_tree_depth`` (24: the trees' depth,
which bounds match length + drafts), ``suffix_decoding_max_cached_requests`` (10000:
responses kept in the global tree, oldest evicted first; 0: no global tree),
``suffix_decoding_max_spec_factor`` (1.0: at most factor × match length drafts) and
``suffix_decoding_min_token_prob`` (0.1: a draft whose estimated probability falls below it
is dropped, with those after it). K (``max_draft_len``) is vLLM's
``num_speculative_tokens``. The reference engine runs it
(``builders/reference/methods/suffix.py``); TensorRT-LLM has no such decoding config on
either path, so those backends refuse it (exit 2). Planner rates 0.5, 0.4, 0.3: n-gram's
assumption (both copy text seen before; the paper's agentic workloads accept far more).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trtbench.core.methods.method import Method
from trtbench.core.stacks import REFERENCE

SPEC_FIELDS: dict[str, tuple[Any, Any]] = {
    "suffix_decoding_max_tree_depth": (int, Field(default=24, ge=1)),
    "suffix_decoding_max_cached_requests": (int, Field(default=10000, ge=0)),
    "suffix_decoding_max_spec_factor": (float, Field(default=1.0, ge=0.0)),
    "suffix_decoding_min_token_prob": (float, Field(default=0.1, ge=0.0, le=1.0)),
}
"""Variant field → (type, default and bounds), vLLM's names and defaults."""


def vllm_options(v: Any) -> dict[str, Any]:
    """``--speculative-config`` keys after ``"method": "suffix"`` of variant ``v``: K and
    the four ``suffix_decoding_*`` fields as the variant gives them."""
    return {
        "num_speculative_tokens": v.draft_len,
        **{name: getattr(v, name) for name in SPEC_FIELDS},
    }


METHOD = Method(
    name="suffix",
    order=60,
    draft_length="max_draft_len",
    backends=(REFERENCE,),
    llmapi_decoding_type=None,
    engine_mode=None,
    vllm_method="suffix",
    planner="chain",
    drafter="suffix_tree",
    label="suffix decoding",
    fields=("max_draft_len",),
    free=True,
    default_rates=(0.5, 0.4, 0.3),
    reference_decoder="trtbench.builders.reference.methods.suffix:make_decoder",
    vllm_options=vllm_options,
    spec_fields=SPEC_FIELDS,
)
