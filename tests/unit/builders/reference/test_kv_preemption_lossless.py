"""Under a KV budget that forces preemption, every mode still emits the oracle's tokens.

As ``test_ngram_adaptive_lossless.py``: a small random float64 Llama, an independent greedy
oracle (the whole sequence re-run each token, no KV cache) whose every choice wins by more
than MARGIN. The budget is 16 blocks of 4 tokens (= one request at max_seq_len 64); three
requests of up to 40 tokens each cannot run together, so the youngest are preempted and
recomputed. Each request's delivered tokens must equal the oracle's exactly (nothing lost,
nothing sent twice), alone and batched, and preemption / draft skipping must have happened.
"""

from __future__ import annotations

import pytest
import torch

from tests.support.random_llama import (
    greedy_oracle,
    make_tokenizer,
)
from trtbench.builders.reference.kv_blocks import KvCacheSettings
from trtbench.builders.reference.loading import make_engine
from trtbench.core.errors import ConfigError

VOCAB = 64
MARGIN = 1e-6
TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]
GEN = torch.Generator().manual_seed(5)
POOL = torch.randint(2, VOCAB, (80,), generator=GEN).tolist()
# (arrival iteration, prompt, max_tokens)
SCENARIO = [
    (0, POOL[0:9], 30),
    (0, POOL[9:26], 22),
    (1, POOL[26:31], 33),
    (2, [7], 12),
    (4, POOL[31:45], 24),
]
TINY = KvCacheSettings(tokens_per_block=4, max_tokens=64)
GNE = KvCacheSettings(tokens_per_block=4, max_tokens=64, policy="guaranteed_no_evict")
KW = {"max_seq_len": 64, "max_input_len": 32, "max_batch_size": 3, "kv_cache": TINY}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def engines(family):
    target, near, heads = family["target"], family["near"], family["heads"]
    tok = family["tokenizer"]
    return {
        "baseline": make_engine("baseline", target, tok, **KW),
        "draft_target": make_engine(
            "draft_target", target, tok, draft=near, draft_len=3, **KW
        ),
        "medusa": make_engine("medusa", target, tok, heads=heads, choices=TREE, **KW),
        "ngram": make_engine("ngram", target, tok, draft_len=3, **KW),
        "medusa-gne": make_engine(
            "medusa", target, tok, heads=heads, choices=TREE, **{**KW, "kv_cache": GNE}
        ),
        "draft_target-gne": make_engine(
            "draft_target",
            target,
            tok,
            draft=near,
            draft_len=3,
            **{**KW, "kv_cache": GNE},
        ),
    }


@pytest.fixture(scope="module")
def expected(target):
    out = []
    for _, prompt, max_tokens in SCENARIO:
        tokens, gap = greedy_oracle(target, prompt, max_tokens)
        assert gap > MARGIN, ("near tie in the oracle run", gap)
        out.append(tokens)
    return out


def tokens_of(handle) -> list[int]:
    return [t for step in handle for t in step.token_ids]


@pytest.mark.parametrize("name", ["baseline", "draft_target", "medusa", "ngram"])
def test_single_requests_under_the_budget_equal_the_oracle(engines, expected, name):
    engine = engines[name]
    for (_, prompt, max_tokens), want in zip(SCENARIO, expected, strict=True):
        handle = engine.submit(prompt, max_tokens, end_id=-1, start=False)
        engine.batcher.run_until_idle()
        assert tokens_of(handle) == want, (name, prompt)
    assert engine.kv_pool.used_blocks == 0


@pytest.mark.parametrize("name", ["baseline", "draft_target", "medusa", "ngram"])
def test_staggered_batch_with_preemption_equals_the_oracle(engines, expected, name):
    engine = engines[name]
    pool = engine.kv_pool
    before = (pool.preemptions, pool.draft_skipped)
    handles, iteration, busy, peak = {}, 0, True, 0
    while busy or iteration <= SCENARIO[-1][0]:
        for i, (arrival, prompt, max_tokens) in enumerate(SCENARIO):
            if arrival == iteration:
                handles[i] = engine.submit(prompt, max_tokens, end_id=-1, start=False)
        busy = engine.batcher.iterate()
        assert 0 <= pool.used_blocks <= pool.max_blocks == 16
        peak = max(peak, pool.used_blocks)
        iteration += 1
    for i, want in enumerate(expected):
        assert tokens_of(handles[i]) == want, (name, i)
    assert pool.preemptions > before[0], "the budget should have forced a preemption"
    if name != "baseline":
        assert pool.draft_skipped > before[1], "some row should have drafted nothing"
    assert peak == 16 and pool.used_blocks == 0
    stats = engine.stats()
    assert (stats.active, stats.waiting, stats.used_blocks) == (0, 0, 0)
    assert stats.free_blocks == stats.max_blocks == 16 and stats.tokens_per_block == 4


def test_a_budget_below_one_request_at_max_seq_len_is_a_config_error(target):
    tok = make_tokenizer(VOCAB)
    small = KvCacheSettings(tokens_per_block=4, max_tokens=60)  # 15 blocks < 64 / 4
    with pytest.raises(ConfigError, match="kv_cache_max_tokens 60 gives 15 KV blocks"):
        make_engine("baseline", target, tok, **{**KW, "kv_cache": small})
    per_token = 2 * 2 * 2 * 8 * 8  # 2 × layers × kv_heads × head_dim (32 / 4) × float64
    config = target.config
    assert (
        per_token
        == 2
        * config.num_hidden_layers
        * config.num_key_value_heads
        * (config.hidden_size // config.num_attention_heads)
        * 8
    )
    by_bytes = KvCacheSettings(
        tokens_per_block=4, budget_bytes=per_token * 64, free_memory_fraction=0.5
    )  # half of 64 tokens' bytes: 8 blocks
    with pytest.raises(ConfigError, match="kv_cache_budget_bytes .* gives 8 KV blocks"):
        make_engine("baseline", target, tok, **{**KW, "kv_cache": by_bytes})


def test_waiting_requests_are_admitted_first_come_first_served(engines, target):
    """16 blocks of 4. A (32 prompt tokens) holds ceil(33 / 4) = 9 blocks after its first
    step, 7 are free: B (29 tokens) needs ceil(30 / 4) = 8 and waits; C (1 token) needs
    1 but stays behind B. B is admitted only once A is done."""
    engine = engines["baseline"]
    prompts = {"A": POOL[40:72], "B": POOL[0:29], "C": [7]}
    want = {}
    for name, prompt in prompts.items():
        want[name], gap = greedy_oracle(target, prompt, 8)
        assert gap > MARGIN
    waits = engine.kv_pool.kv_waits
    a = engine.submit(prompts["A"], 8, end_id=-1, start=False)
    engine.batcher.iterate()
    assert engine.kv_pool.used_blocks == 9
    b = engine.submit(prompts["B"], 8, end_id=-1, start=False)
    c = engine.submit(prompts["C"], 8, end_id=-1, start=False)
    engine.batcher.iterate()
    assert [r.tag.input_ids for r in engine.decoder.rows] == [prompts["A"]]
    assert engine.stats().waiting == 2 and b.admitted_ns == c.admitted_ns == 0
    assert engine.kv_pool.kv_waits == waits + 1  # B, held back at the head
    while not a.done:
        engine.batcher.iterate()
        assert not c.admitted_ns or b.admitted_ns  # never C before B
    engine.batcher.run_until_idle()
    assert 0 < b.admitted_ns <= c.admitted_ns
    got = {n: tokens_of(h) for n, h in zip("ABC", (a, b, c), strict=True)}
    assert got == want


@pytest.mark.parametrize("name", ["medusa-gne", "draft_target-gne"])
def test_guaranteed_no_evict_admits_fewer_and_never_preempts(engines, expected, name):
    """Each request reserves prompt + max_tokens - 2 + q tokens at admission (q: 7 for the
    6-node tree, 4 for K = 3): the first two need 11 blocks each (9 + 30 - 2 + q and
    17 + 22 - 2 + q tokens), so they cannot run together in 16; fewer than 3 ever run."""
    engine = engines[name]
    pool = engine.kv_pool
    handles, iteration, busy, widths = {}, 0, True, []
    while busy or iteration <= SCENARIO[-1][0]:
        for i, (arrival, prompt, max_tokens) in enumerate(SCENARIO):
            if arrival == iteration:
                handles[i] = engine.submit(prompt, max_tokens, end_id=-1, start=False)
        busy = engine.batcher.iterate()
        widths.append(len(engine.decoder.rows))
        iteration += 1
    for i, want in enumerate(expected):
        assert tokens_of(handles[i]) == want, (name, i)
    assert pool.preemptions == 0 and pool.draft_skipped == 0
    assert max(widths) < 3 and pool.kv_waits > 0 and pool.used_blocks == 0


def test_a_byte_budget_holds_the_draft_models_kv_too(family):
    """TensorRT-LLM's PyTorch executor sizes the pool by target + draft KV bytes per token
    (``_torch/pyexecutor/_util.py``); so does the reference engine. Hand count: both models
    are 2 layers x 2 KV heads x head_dim 8 x float64 -> 2 x 2 x 2 x 8 x 8 = 512 bytes per
    token each. A budget of 1024 x 80 bytes (fraction 1) holds 80 tokens of both = 20 blocks
    of 4 for draft_target, and 160 tokens of the target alone = 40 blocks for baseline."""
    target, near, tok = family["target"], family["near"], family["tokenizer"]
    budget = KvCacheSettings(
        tokens_per_block=4, budget_bytes=1024 * 80, free_memory_fraction=1.0
    )
    kw = {**KW, "kv_cache": budget}
    draft = make_engine("draft_target", target, tok, draft=near, draft_len=3, **kw)
    alone = make_engine("baseline", target, tok, **kw)
    assert draft.stats().max_blocks == 20
    assert alone.stats().max_blocks == 40
