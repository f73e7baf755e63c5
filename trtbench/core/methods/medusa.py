"""Medusa: heads on the target propose a tree of tokens (Cai et al. 2024, arXiv 2401.10774).
TensorRT-LLM runs it on the engine path only (``MEDUSA``); vLLM drafts one chain of it."""

from __future__ import annotations

from trtbench.core.methods.method import Method
from trtbench.core.stacks import REFERENCE, TRTLLM

METHOD = Method(
    name="medusa",
    order=20,
    draft_length="medusa_choices",
    backends=(REFERENCE, TRTLLM),
    llmapi_decoding_type=None,
    engine_mode="MEDUSA",
    vllm_method="medusa",
    planner="medusa",
    drafter="heads",
    label="Medusa",
    fields=("max_draft_len", "medusa_choices"),
    engine_counts="perf_metrics",
    models_dir=("medusa", "a Medusa heads dir"),
    engine_decoding_type="Medusa",
    name_hints=("medusa",),
    reference_decoder="trtbench.builders.reference.methods.medusa:make_decoder",
)
