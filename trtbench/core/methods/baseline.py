"""The baseline: no drafts, one target forward per token (what every method is compared with)."""

from __future__ import annotations

from trtbench.core.methods.method import Method
from trtbench.core.stacks import BACKENDS

METHOD = Method(
    name="baseline",
    order=0,
    draft_length="none",
    backends=BACKENDS,
    llmapi_decoding_type=None,
    engine_mode="NONE",
    vllm_method="",
    planner="baseline",
    drafter="none",
    label="baseline",
    name_hints=("baseline",),
    reference_decoder="trtbench.builders.reference.methods.baseline:make_decoder",
)
