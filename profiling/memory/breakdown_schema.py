"""Columns of ``memory_breakdown.csv`` (one row per variant; definitions in ``breakdown``).

Roles: ``target``, ``draft`` (a draft model with its own KV pool), ``medusa`` (heads, no KV)
and ``eagle3`` (an EAGLE-3 draft checkpoint: one decoder layer whose KV lives in the
target's pool, so its pool share is counted on the target's blocks).
"""

from __future__ import annotations

from trtbench.core.export import Column
from trtbench.core.methods import METHODS

MEMORY_BREAKDOWN_SCHEMA: tuple[Column, ...] = (
    Column("variant", "variant name"),
    Column("mode", "the variant's method (spec mode): " + ", ".join(METHODS)),
    Column("target_weights_bytes", "target model weight files", required=False),
    Column(
        "draft_weights_bytes",
        "draft model weight files (empty: no draft)",
        required=False,
    ),
    Column(
        "medusa_heads_bytes",
        "Medusa head weight files (empty: no heads)",
        required=False,
    ),
    Column(
        "eagle3_weights_bytes",
        "EAGLE-3 draft checkpoint weight files (empty: no EAGLE-3 draft)",
        required=False,
    ),
    Column("weights_total_bytes", "sum of the four", required=False),
    Column(
        "weight_source", "files (weight files on disk) or build.json (models.*.bytes)"
    ),
    Column(
        "target_kv_bytes_per_token",
        "2 × layers × KV heads × head_dim × dtype bytes (target)",
        required=False,
    ),
    Column("draft_kv_bytes_per_token", "same for the draft model", required=False),
    Column(
        "eagle3_kv_bytes_per_token",
        "same for the EAGLE-3 draft layer(s) (its config.json: 1 layer)",
        required=False,
    ),
    Column(
        "target_kv_max_blocks",
        "KV blocks in the target's pool (server metric max)",
        required=False,
    ),
    Column(
        "kv_tokens_per_block",
        "tokens per KV block (server metric tokens_per)",
        required=False,
    ),
    Column(
        "target_kv_pool_bytes",
        "target_kv_max_blocks × kv_tokens_per_block × target_kv_bytes_per_token",
        required=False,
    ),
    Column("draft_kv_max_blocks", "KV blocks in the draft's pool", required=False),
    Column(
        "draft_kv_pool_bytes",
        "draft_kv_max_blocks × tokens per block × draft_kv_bytes_per_token",
        required=False,
    ),
    Column(
        "eagle3_kv_pool_bytes",
        "the EAGLE-3 layer's share of the target's pool: target_kv_max_blocks × "
        "kv_tokens_per_block × eagle3_kv_bytes_per_token",
        required=False,
    ),
    Column(
        "kv_source",
        "server_metrics when the KV block metrics were scraped, else empty",
        required=False,
    ),
    Column("memory_source", "nvml or rss: where the peaks come from", required=False),
    Column(
        "peak_device_used_bytes",
        "max over load-test readings of device memory used, summed over GPUs",
        required=False,
    ),
    Column(
        "peak_proc_used_bytes",
        "max over load-test readings of the server tree's device memory (NVML per-process)",
        required=False,
    ),
    Column(
        "peak_rss_bytes",
        "max over load-test readings of the server tree's RSS",
        required=False,
    ),
    Column(
        "peak_readings",
        "readings in the load-test phases the peaks are taken over",
        required=False,
    ),
)
