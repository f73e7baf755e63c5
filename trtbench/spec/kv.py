"""Bench-spec fields of the reference engine's paged KV cache (``builders/reference/kv_blocks.py``).

Named as a TensorRT-LLM user knows them: ``tokens_per_block`` (``trtllm-build
--tokens_per_block`` / ``KvCacheConfig.tokens_per_block``, default 32), ``kv_cache_max_tokens``
(``KvCacheConfig.max_tokens``; the Triton backend's ``max_tokens_in_paged_kv_cache``) and
``kv_cache_budget_bytes``: the memory the deploy's ``kv_cache_free_gpu_mem_fraction`` is
taken of (TensorRT-LLM takes the device's free memory; the reference engine, which also runs
on CPU, takes this). ``batch_scheduler_policy`` (the Triton backend's parameter; LLM API
``scheduler_config.capacity_scheduler_policy``): ``max_utilization`` (default here: admit
when the prefill fits, preempt the youngest when short) or ``guaranteed_no_evict``
(TensorRT-LLM's default: admit only when the request's whole life, verification included,
fits; never preempt). No budget: the pool is as large as the slot cache (never short). A
budget below one request at ``max_seq_len`` is a ConfigError (exit 2).
"""

from __future__ import annotations

import math
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator


class KvCacheVariantFields(BaseModel):
    """The KV budget of a variant (base of :class:`trtbench.spec.bench.VariantSpec`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    tokens_per_block: int = Field(default=32, ge=1)
    kv_cache_max_tokens: int | None = Field(default=None, ge=1)
    kv_cache_budget_bytes: int | None = Field(default=None, ge=1)
    batch_scheduler_policy: Literal["max_utilization", "guaranteed_no_evict"] = (
        "max_utilization"
    )

    @model_validator(mode="after")
    def _check_kv(self):
        check_kv_fields(self)  # the variant's max_seq_len is set by now
        return self


class _Variant(Protocol):
    tokens_per_block: int
    kv_cache_max_tokens: int | None
    max_seq_len: int


def check_kv_fields(v: _Variant) -> None:
    """``kv_cache_max_tokens`` holds one request at ``max_seq_len`` (in whole blocks).

    Raises:
        ValueError: the message names the field and the fix (the spec's ConfigError).
    """
    if v.kv_cache_max_tokens is None:
        return
    tpb = v.tokens_per_block
    have, need = math.ceil(v.kv_cache_max_tokens / tpb), math.ceil(v.max_seq_len / tpb)
    if have < need:
        raise ValueError(
            f"kv_cache_max_tokens {v.kv_cache_max_tokens} gives {have} KV blocks of {tpb} "
            f"tokens, fewer than the {need} one request at max_seq_len {v.max_seq_len} "
            f"needs; raise it to at least {need * tpb} or lower max_seq_len"
        )
