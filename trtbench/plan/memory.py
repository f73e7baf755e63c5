"""Per-GPU memory of each mode: weights, draft weights or heads, KV cache, logits, overhead.

Per GPU of a ``tp * pp`` group (``parallel`` module doc for the split)::

    weights  = params * bytes/param / (tp * pp)            (target; heads likewise; the draft
                                                            over its own group, --draft-tp)
    KV/seq   = Σ_models KV bytes/token * ceil(kv_heads/tp)/kv_heads / pp * (input + output + K)
    logits   = B * (1 + K) * vocab * 4 B                   (FP32 logits of one step, gathered)
    total    = weights + extra weights + B * (KV/seq + logits/seq) + overhead
    fits     = total <= memory_fraction * GPU memory

K is the draft length (γ, Medusa tree nodes, or the chain's K). Models with KV: the target,
the draft model (draft_target), the EAGLE-3 layers or MTP modules (one target-width layer
each); Medusa heads and a lookup (n-gram, suffix decoding) hold none. Which applies is the
arithmetic the method declares (``inputs.planner_of``) and, of a chain, what its kind put in
its setup (``chain_kinds``).
"""

from __future__ import annotations

from dataclasses import dataclass

from trtbench.plan.inputs import (
    DRAFT_MODEL_PLAN,
    MEDUSA_PLAN,
    PlanInputs,
    medusa_head_params,
    planner_of,
)
from trtbench.plan.parallel import kv_share

LOGIT_BYTES = 4.0  # FP32 logits


@dataclass(frozen=True)
class MemoryEstimate:
    """Device memory of one mode at one concurrency, per GPU (bytes)."""

    weights_bytes: float
    extra_weights_bytes: float
    kv_per_sequence_bytes: float
    kv_cache_bytes: float
    total_bytes: float
    fits: bool
    logits_per_sequence_bytes: float = 0.0
    overhead_bytes: float = 0.0


def extra_params(inputs: PlanInputs, mode: str) -> float:
    """Parameters a mode adds to the target: draft model, Medusa heads, a chain's drafter
    (EAGLE-3 / MTP layers; none for a lookup)."""
    plan = planner_of(mode)
    if plan == DRAFT_MODEL_PLAN and inputs.draft:
        return inputs.draft.model.params
    if plan == MEDUSA_PLAN and inputs.medusa:
        m = inputs.medusa
        return medusa_head_params(inputs.target, m.num_heads, m.num_layers)
    chain = inputs.chain(mode)
    return chain.extra_params if chain else 0.0


def kv_bytes_per_token_per_gpu(inputs: PlanInputs, mode: str) -> float:
    """KV bytes one token of one sequence takes on one GPU, over every model of ``mode``."""
    kvb, tp, pp = inputs.kv_bytes_per_element, inputs.parallel.tp, inputs.parallel.pp
    target = inputs.target
    per_token = target.kv_bytes_per_token(kvb) * kv_share(target, tp)
    if planner_of(mode) == DRAFT_MODEL_PLAN and inputs.draft:
        d, draft = inputs.draft.model, inputs.draft_parallel
        # the draft's KV on one GPU of its own group (all of its layers there when it runs on
        # fewer GPUs than the target, one stage)
        draft_kv = d.kv_bytes_per_token(kvb) * kv_share(d, draft.tp) / draft.pp
        return per_token / pp + draft_kv
    chain = inputs.chain(mode)
    if chain and chain.kv_layers:
        per_layer = target.kv_bytes_per_token(kvb) / target.layers
        per_token += chain.kv_layers * per_layer * kv_share(target, tp)
    return per_token / pp


def estimate_memory(inputs: PlanInputs, mode: str, batch: int) -> MemoryEstimate:
    """Per-GPU weights, draft/heads weights, KV cache and logits × concurrency; fit (module doc)."""
    gpus, wb = inputs.parallel.gpus, inputs.weight_bytes_per_param
    k = inputs.draft_len_of(mode)
    seq = inputs.input_len + inputs.output_len + k
    weights = inputs.target.params * wb / gpus
    extra = extra_params(inputs, mode) * wb / gpus
    if planner_of(mode) == DRAFT_MODEL_PLAN and inputs.draft:  # the draft's own group
        extra = extra_params(inputs, mode) * wb / inputs.draft_parallel.gpus
    kv_seq = kv_bytes_per_token_per_gpu(inputs, mode) * seq
    logits_seq = (1 + k) * inputs.target.vocab * LOGIT_BYTES
    total = weights + extra + batch * (kv_seq + logits_seq) + inputs.overhead_bytes
    fits = total <= inputs.memory_fraction * inputs.gpu.memory_bytes
    return MemoryEstimate(
        weights,
        extra,
        kv_seq,
        batch * kv_seq,
        total,
        fits,
        logits_seq,
        inputs.overhead_bytes,
    )


def max_fitting_concurrency(inputs: PlanInputs, mode: str) -> int:
    """Largest concurrency whose per-GPU memory fits (0: not even the weights fit)."""
    one = estimate_memory(inputs, mode, 1)
    room = (
        inputs.memory_fraction * inputs.gpu.memory_bytes
        - one.weights_bytes
        - one.extra_weights_bytes
        - one.overhead_bytes
    )
    per_seq = one.kv_per_sequence_bytes + one.logits_per_sequence_bytes
    return max(int(room // per_seq), 0)
