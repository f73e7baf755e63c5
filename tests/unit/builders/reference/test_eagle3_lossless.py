"""EAGLE-3 mode is lossless, alone, batched, adaptive and under KV preemption, and its
draft counts follow an independent recomputation of the chain.

As ``test_ngram_adaptive_lossless.py``: the small random float64 Llama of the family, an
independent greedy oracle (the whole sequence re-run each token, no KV cache) whose every
choice wins by more than MARGIN. The EAGLE-3 draft is trained for a few seconds on the
target's own greedy continuations (``tiny_eagle.train_eagle3``) so that drafts are sometimes
right and sometimes wrong. The chain check recomputes each step's drafts without any cache:
the draft's whole input (token ``p + 1`` with ``fc(aux_p)`` of the target for every real
position, then the chained drafts with the draft's own outputs) re-run from scratch each
draft, with the target's aux states from a full forward pass (``tiny_eagle.target_aux``).
"""

from __future__ import annotations

import pytest
import torch

from tests.support.random_llama import greedy_oracle
from trtbench.builders.reference.kv_blocks import KvCacheSettings
from trtbench.builders.reference.loading import make_engine
from trtbench.builders.tiny.tiny_eagle import target_aux

VOCAB = 64
MARGIN = 1e-6
SLOTS = 3
K = 3
LONG = 30
GEN = torch.Generator().manual_seed(33)
POOL = torch.randint(2, VOCAB, (90,), generator=GEN).tolist()
PROMPTS = [[7], [2, 3], POOL[:8], POOL[8:25]]
TINY = KvCacheSettings(tokens_per_block=4, max_tokens=64)
# (arrival iteration, prompt, max_tokens)
SCENARIO = [
    (0, POOL[30:39], 30),
    (0, POOL[39:56], 22),
    (1, POOL[56:61], 33),
    (2, [7], 12),
    (4, POOL[61:75], 24),
]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def draft(eagle3_draft):
    return eagle3_draft


@pytest.fixture(scope="module")
def engines(family, draft):
    target, tok = family["target"], family["tokenizer"]
    kw = {"max_seq_len": 96, "max_input_len": 48, "max_batch_size": SLOTS}
    tight = {"max_seq_len": 64, "max_input_len": 32, "max_batch_size": 3}
    return {
        "eagle3": make_engine("eagle3", target, tok, draft_len=K, eagle3=draft, **kw),
        "eagle3-schedule": make_engine(
            "eagle3",
            target,
            tok,
            draft_len=K,
            eagle3=draft,
            draft_len_schedule={1: 3, 2: 1},
            **kw,
        ),
        "eagle3-mc1": make_engine(
            "eagle3", target, tok, draft_len=K, eagle3=draft, max_concurrency=1, **kw
        ),
        "eagle3-kv": make_engine(
            "eagle3", target, tok, draft_len=K, eagle3=draft, kv_cache=TINY, **tight
        ),
        # the catch-up padded to K + 1 whatever is pending, as where graphs are captured
        "eagle3-static": static_shapes(
            make_engine("eagle3", target, tok, draft_len=K, eagle3=draft, **kw)
        ),
    }


def static_shapes(engine):
    engine.decoder.static_shapes = True
    return engine


def oracle(target, prompt, n):
    tokens, gap = greedy_oracle(target, prompt, n)
    assert gap > MARGIN, ("near tie in the oracle run", gap)
    return tokens


def solo(engine, prompt, max_tokens):
    handle = engine.submit(prompt, max_tokens, end_id=-1, start=False)
    engine.batcher.run_until_idle()
    return list(handle)


def tokens_of(steps) -> list[int]:
    return [t for s in steps for t in s.token_ids]


@torch.inference_mode()
def chain_without_cache(draft, target, seq: list[int], k: int) -> list[int]:
    """The k drafts for ``seq`` (x_0..x_L), recomputed from scratch (module docstring)."""
    aux = target_aux(target, torch.tensor([seq[:-1]]), draft.layer_ids)[0]
    ids, hidden, out = list(seq[1:]), draft.fc(aux), []
    for _ in range(k):
        n = len(ids)
        prenorm = draft.trunk(
            torch.tensor([ids]), hidden[None], torch.arange(n)[None], None
        )[0]
        out.append(int(draft.logits(prenorm[-1]).argmax()))
        ids.append(out[-1])
        hidden = torch.cat([hidden, prenorm[-1:]])
    return out


@pytest.mark.parametrize(
    "name", ["eagle3", "eagle3-schedule", "eagle3-mc1", "eagle3-kv", "eagle3-static"]
)
def test_single_requests_equal_the_oracle(engines, target, name):
    engine = engines[name]
    for prompt in PROMPTS:
        want = oracle(target, prompt, LONG)
        for limit in (1, 4, LONG):
            steps = solo(engine, prompt, limit)
            assert tokens_of(steps) == want[:limit], (name, prompt, limit)
            for s in steps[:-1]:
                assert len(s.token_ids) == s.draft_accepted + 1
                assert 0 <= s.draft_accepted <= s.draft_proposed <= K


def test_each_step_proposes_the_recomputed_chain_and_accepts_its_right_prefix(
    engines, target, draft
):
    """Every step of a lone request drafts K; the accepted count is the longest prefix of
    the cache-free chain equal to the oracle's next tokens. Both a full accept and a full
    reject occur, and the acceptance is well above chance (1 / 64 per token)."""
    engine, full, wrong, accepted, proposed = engines["eagle3"], 0, 0, 0, 0
    for prompt in PROMPTS:
        want = oracle(target, prompt, LONG + K + 1)
        steps = solo(engine, prompt, LONG)
        done = len(steps[0].token_ids)
        for step in steps[1:]:
            chain = chain_without_cache(draft, target, prompt + want[:done], K)
            right = 0
            while right < K and chain[right] == want[done + right]:
                right += 1
            assert (step.draft_proposed, step.draft_accepted) == (K, right)
            full, wrong = full + (right == K), wrong + (right == 0)
            accepted, proposed = accepted + right, proposed + K
            done += len(step.token_ids)
    assert full > 0 and wrong > 0
    assert accepted / proposed > 0.2, (accepted, proposed)


@pytest.mark.parametrize(
    "name", ["eagle3", "eagle3-schedule", "eagle3-kv", "eagle3-static"]
)
def test_staggered_batch_equals_the_oracle(engines, target, name):
    """Requests arrive over the first iterations; rows join and retire while others draft
    (eagle3-kv: 16 blocks of 4 tokens, so the youngest are preempted and recomputed, and
    rows whose verification blocks cannot be had draft nothing)."""
    engine = engines[name]
    pool = engine.kv_pool
    before = (pool.preemptions, pool.draft_skipped)
    handles, iteration, busy, widths = {}, 0, True, []
    while busy or iteration <= SCENARIO[-1][0]:
        for i, (arrival, prompt, max_tokens) in enumerate(SCENARIO):
            if arrival == iteration:
                handles[i] = engine.submit(prompt, max_tokens, end_id=-1, start=False)
        busy = engine.batcher.iterate()
        widths.append(len(engine.decoder.rows))
        iteration += 1
    for i, (_, prompt, max_tokens) in enumerate(SCENARIO):
        assert tokens_of(handles[i]) == oracle(target, prompt, max_tokens), (name, i)
    assert max(widths) == 3 and pool.used_blocks == 0
    if name == "eagle3-kv":
        assert pool.preemptions > before[0], (
            "the budget should have forced a preemption"
        )
        assert pool.draft_skipped > before[1], "some row should have drafted nothing"


def test_schedule_and_max_concurrency_set_the_draft_length(engines):
    """{1: 3, 2: 1}: 3 drafts alone, 1 with two rows; max_concurrency 1: none with two."""
    for name, two in (("eagle3-schedule", 1), ("eagle3-mc1", 0)):
        engine = engines[name]
        a = engine.submit(POOL[:6], 6, end_id=-1, start=False)
        b = engine.submit(POOL[6:14], 24, end_id=-1, start=False)
        engine.batcher.run_until_idle()
        steps_a, steps_b = list(a), list(b)
        assert {s.draft_proposed for s in steps_a[1:]} == {two}, name
        assert steps_b[-1].draft_proposed == K, name  # alone again at the end
    assert engines["eagle3"].decoder.verify_tokens(2) == K + 1
    assert engines["eagle3-schedule"].decoder.verify_tokens(2) == 2
    assert engines["eagle3-mc1"].decoder.verify_tokens(2) == 1
