"""The KV block pool's arithmetic and scheduling decisions, worked by hand.

Blocks of 4 tokens. A sequence with L cached tokens holds ceil(L / 4) blocks between steps
and needs ceil((L + q) / 4) during a step that feeds q tokens.
"""

from __future__ import annotations

import pytest

from trtbench.builders.reference.kv_blocks import (
    KvBlockPool,
    KvCacheSettings,
    SeqNeed,
    pool_blocks,
)
from trtbench.core.errors import ConfigError


def test_blocks_for_rounds_up():
    pool = KvBlockPool(10, 4)
    assert [pool.blocks_for(n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_pool_size_is_the_smallest_limit():
    # slot cache: 3 slots x ceil(70 / 4) = 54 blocks; max_tokens 100 -> 25 blocks.
    assert pool_blocks(KvCacheSettings(4), 512, 3, 70, 64) == 54
    assert pool_blocks(KvCacheSettings(4, max_tokens=100), 512, 3, 70, 64) == 25
    # 0.5 x 40960 bytes / (512 bytes x 4 tokens) = 10 blocks < 16 needed at 64 tokens
    with pytest.raises(ConfigError, match="kv_cache_budget_bytes 40960"):
        pool_blocks(
            KvCacheSettings(4, budget_bytes=40960, free_memory_fraction=0.5),
            512,
            3,
            70,
            64,
        )
    assert (
        pool_blocks(
            KvCacheSettings(4, budget_bytes=81920, free_memory_fraction=0.5),
            512,
            3,
            70,
            64,
        )
        == 20
    )
    with pytest.raises(ConfigError, match="tokens_per_block is 0"):
        pool_blocks(KvCacheSettings(0), 512, 3, 70, 64)


def test_admission_needs_the_prefill_and_one_token():
    pool = KvBlockPool(5, 4)
    assert pool.grow("a", 12)  # 3 blocks
    assert pool.free_blocks == 2
    assert pool.admission_tokens(7, 10, 5) == 8  # max_utilization: prefill + 1
    assert pool.can_admit(8)  # ceil(8 / 4) = 2 <= 2
    assert not pool.can_admit(9)  # ceil(9 / 4) = 3 > 2


def test_plain_step_preempts_the_youngest():
    pool = KvBlockPool(6, 4)
    rows = [SeqNeed("old", 8, 1), SeqNeed("mid", 7, 2), SeqNeed("young", 4, 3)]
    for r in rows:
        assert pool.grow(r.key, r.cached)  # 2 + 2 + 1 = 5 blocks
    # a plain step: old needs ceil(9/4)=3 (+1), mid ceil(8/4)=2 (+0), young ceil(5/4)=2 (+1)
    victims = pool.reserve_plain(rows)
    assert victims == ["young"]
    assert (pool.held("old"), pool.held("mid"), pool.held("young")) == (3, 2, 0)
    assert pool.used_blocks == 5 and pool.preemptions == 1


def test_the_needy_row_is_itself_preempted_when_youngest():
    pool = KvBlockPool(4, 4)
    rows = [SeqNeed("old", 8, 1), SeqNeed("young", 8, 2)]
    for r in rows:
        pool.grow(r.key, r.cached)  # 2 + 2 = 4 = everything
    # old needs a 3rd block: young (youngest) goes; old then fits.
    assert pool.reserve_plain(rows) == ["young"]
    assert pool.held("old") == 3 and pool.free_blocks == 1


def test_verification_blocks_oldest_first_else_draft_nothing():
    pool = KvBlockPool(7, 4)
    rows = [SeqNeed("a", 3, 1), SeqNeed("b", 6, 2)]
    for r in rows:
        pool.grow(r.key, r.cached)  # 1 + 2
    assert pool.reserve_plain(rows) == []  # a: ceil(4/4)=1, b: ceil(7/4)=2
    # q = 5 (K = 4): a needs ceil(8/4)=2 (+1 -> 4 used), b needs ceil(11/4)=3 (+1 -> 5 used)
    assert pool.reserve_speculative(rows, 5) == [True, True]
    assert pool.speculative_block_steps == (2 - 1) + (3 - 2)
    pool.account_step()
    assert pool.block_steps == 5
    pool.sync({"a": 5, "b": 7})  # after the step: a kept 2 tokens, b 1
    assert (pool.held("a"), pool.held("b")) == (2, 2)
    # q = 9 (a tree of 8 nodes): a needs ceil(14/4)=4 (+2 -> 6), b ceil(16/4)=4 (+2 > 1 free)
    assert pool.reserve_speculative([SeqNeed("a", 5, 1), SeqNeed("b", 7, 2)], 9) == [
        True,
        False,
    ]
    assert pool.draft_skipped == 1 and pool.used_blocks == 6


def test_sync_releases_retired_rows():
    pool = KvBlockPool(8, 4)
    pool.grow("a", 9)
    pool.grow("b", 4)
    pool.sync({"b": 4})
    assert pool.held("a") == 0 and pool.used_blocks == 1


def test_a_wait_for_blocks_counts_once_until_the_key_gets_blocks():
    pool = KvBlockPool(2, 4)
    pool.grow("a", 8)  # all blocks
    assert not pool.can_admit(4, "b") and not pool.can_admit(4, "b")
    assert pool.kv_waits == 1  # one wait, however often the head is looked at
    pool.release("a")
    assert pool.can_admit(4, "b") and pool.grow("b", 3)
    pool.grow("c", 8)  # c takes the other block; b waits again later
    assert not pool.can_admit(6, "b") and pool.kv_waits == 2


def test_guaranteed_no_evict_reserves_a_whole_request_and_keeps_it():
    pool = KvBlockPool(12, 4, policy="guaranteed_no_evict")
    # 10 prompt tokens, 20 to generate, K = 4 (q = 5): the last step starts with
    # 10 + 20 - 2 = 28 cached and writes 5 -> 33 tokens = 9 blocks.
    assert pool.admission_tokens(10, 20, 5) == 33
    assert pool.admission_tokens(10, 1, 5) == 14  # 10 + 1 - 2 + 5 (no step: spare)
    assert pool.admission_tokens(10, 1, 1) == 11  # at least the prefill + 1
    assert pool.admission_tokens(40, 20, 5) == 48  # capped at the pool (12 x 4)
    pool.admit("a", 33)
    assert pool.held("a") == 9
    pool.sync({"a": 11})  # early in its life: the reservation stays
    assert pool.held("a") == 9
    assert not pool.can_admit(13, "b")  # 4 blocks > 3 free
    # a row holding its reservation never preempts nor skips drafts
    assert pool.reserve_plain([SeqNeed("a", 27, 1)]) == []
    assert pool.reserve_speculative([SeqNeed("a", 27, 1)], 5) == [True]
    pool.release("a")
    assert pool.used_blocks == 0 and pool.can_admit(13, "b")
    with pytest.raises(ValueError, match="batch_scheduler_policy"):
        KvBlockPool(12, 4, policy="fifo")


def test_llm_api_kv_cache_config_maps_onto_the_budget():
    from trtbench.builders.reference.llm_args import plan_from_llm_args

    plan = plan_from_llm_args(
        {
            "model": "/m",
            "kv_cache_config": {"max_tokens": 640, "tokens_per_block": 16},
            "scheduler_config": {"capacity_scheduler_policy": "GUARANTEED_NO_EVICT"},
        }
    )
    assert plan.kv_cache == KvCacheSettings(
        16, 640, None, 1.0, policy="guaranteed_no_evict"
    )
    default = plan_from_llm_args({"model": "/m", "kv_cache_config": {}}).kv_cache
    assert default == KvCacheSettings(32, None, None, 1.0, policy="max_utilization")
    assert not default.limited
    with pytest.raises(ConfigError, match="capacity_scheduler_policy 'STATIC'"):
        plan_from_llm_args(
            {"model": "/m", "scheduler_config": {"capacity_scheduler_policy": "STATIC"}}
        )
