"""n-gram mode and adaptive speculation are lossless, alone and batched, and count right.

As in ``test_reference_engine.py`` / ``test_batching.py``: small random float64 Llamas, an
independent greedy oracle (the whole sequence re-run each token, no KV cache) whose every
choice wins by more than MARGIN (so batching cannot flip a token), and each request of a
staggered batch must emit exactly the steps it emits alone. Random models fall into cycles,
so prompt lookup finds matches. Draft counts are checked against their definitions: an
ngram step proposes what the lookup found and accepts the longest prefix equal to the
oracle's next tokens; ``max_concurrency`` N drafts nothing while more than N rows are
active; ``draft_len_schedule`` drafts the value of the smallest key >= the active rows.
"""

from __future__ import annotations

import pytest
import torch

from tests.support.random_llama import (
    greedy_oracle,
)
from trtbench.builders.reference.loading import make_engine
from trtbench.builders.reference.ngram import NgramSettings, propose_ngram

VOCAB = 64
MARGIN = 1e-6
SLOTS = 3
LONG = 40
TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]
GEN = torch.Generator().manual_seed(21)
POOL = torch.randint(2, VOCAB, (80,), generator=GEN).tolist()
PROMPTS = [[7], [2, 3], POOL[:8], POOL[8:25], [5, 6, 7, 8, 5, 6, 7, 8, 5]]
NGRAM = NgramSettings(1, 2)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def engines(family):
    target, near, heads = family["target"], family["near"], family["heads"]
    tok = family["tokenizer"]
    kw = {"max_seq_len": 96, "max_input_len": 48, "max_batch_size": SLOTS}
    return {
        "baseline": make_engine("baseline", target, tok, **kw),
        "ngram-k3": make_engine("ngram", target, tok, draft_len=3, ngram=NGRAM, **kw),
        "ngram-2to4-k5-newest": make_engine(
            "ngram",
            target,
            tok,
            draft_len=5,
            ngram=NgramSettings(2, 4, use_oldest=False),
            **kw,
        ),
        "ngram-schedule": make_engine(
            "ngram",
            target,
            tok,
            draft_len=4,
            ngram=NGRAM,
            draft_len_schedule={1: 4, 2: 2},
            **kw,
        ),
        "dt-mc1": make_engine(
            "draft_target",
            target,
            tok,
            draft=near,
            draft_len=3,
            max_concurrency=1,
            **kw,
        ),
        "dt-schedule": make_engine(
            "draft_target",
            target,
            tok,
            draft=near,
            draft_len=3,
            draft_len_schedule={1: 3, 2: 1},
            **kw,
        ),
        "medusa-mc2": make_engine(
            "medusa", target, tok, heads=heads, choices=TREE, max_concurrency=2, **kw
        ),
    }


SPECULATIVE = [
    "ngram-k3",
    "ngram-2to4-k5-newest",
    "ngram-schedule",
    "dt-mc1",
    "dt-schedule",
    "medusa-mc2",
]


@pytest.fixture(scope="module")
def expected(target):
    out = []
    for prompt in PROMPTS:
        tokens, gap = greedy_oracle(target, prompt, LONG + 4)  # + the last drafts
        assert gap > MARGIN, ("near tie in the oracle run", gap)
        out.append(tokens)
    return out


def solo(engine, prompt, max_tokens, end_id=-1, min_tokens=0):
    handle = engine.submit(
        prompt, max_tokens, end_id=end_id, min_tokens=min_tokens, start=False
    )
    engine.batcher.run_until_idle()
    return list(handle)


def tokens_of(steps) -> list[int]:
    return [t for s in steps for t in s.token_ids]


@pytest.mark.parametrize("name", SPECULATIVE)
def test_single_request_equals_the_oracle(engines, expected, name):
    engine = engines[name]
    for prompt, want in zip(PROMPTS, expected, strict=True):
        for limit in (1, 5, LONG):
            steps = solo(engine, prompt, limit)
            assert tokens_of(steps) == want[:limit], (name, prompt, limit)
            for i, s in enumerate(steps):
                assert 0 <= s.draft_accepted <= s.draft_proposed <= engine.draft_len
                if i < len(steps) - 1:
                    assert len(s.token_ids) == s.draft_accepted + 1


def test_ngram_counts_follow_the_lookup_and_the_oracle(engines, expected):
    """Each step proposes the lookup's drafts for the sequence so far and accepts their
    longest prefix equal to the oracle's next tokens; both a fully right and a fully wrong
    proposal occur."""
    engine, full, wrong = engines["ngram-k3"], 0, 0
    for prompt, want in zip(PROMPTS, expected, strict=True):
        steps = solo(engine, prompt, LONG)
        done = len(steps[0].token_ids)
        for step in steps[1:]:
            drafts = propose_ngram(prompt + want[:done], NGRAM, 3)
            right = 0
            while right < len(drafts) and drafts[right] == want[done + right]:
                right += 1
            assert (step.draft_proposed, step.draft_accepted) == (len(drafts), right)
            full += bool(drafts) and right == len(drafts)
            wrong += bool(drafts) and right == 0
            done += len(step.token_ids)
    assert full > 0 and wrong > 0


def test_hand_worked_prompt_drafts_from_its_repeat(engines, expected):
    """Prompt 5 6 7 8 5 6 7 8 5: after the first token t, the lookup of [5, t] (or [t])
    decides; if t is 6 the draft is 7 8 5, the prompt's own continuation."""
    steps = solo(engines["ngram-k3"], PROMPTS[4], 6)
    first = steps[0].token_ids[0]
    want = propose_ngram([*PROMPTS[4], first], NGRAM, 3)
    assert steps[1].draft_proposed == len(want)
    if first == 6:
        assert want == [7, 8, 5]


def make_scenario(target):
    """(arrival iteration, prompt, max_tokens, end_id, min_tokens, oracle tokens)."""
    rows = [
        (0, POOL[30:33], 20, -1, 0),
        (0, POOL[33:42], 14, -1, 0),
        (1, POOL[42:59], 25, -1, 0),
        (2, [7], 1, -1, 0),
        (3, POOL[59:64], 18, -1, 0),
        (5, PROMPTS[4], 16, -1, 0),
    ]
    first, _ = greedy_oracle(target, POOL[42:59], 1)
    rows[2] = (1, POOL[42:59], 25, first[0], 5)  # its first token suppressed 5 times
    out = []
    for arrival, prompt, max_tokens, end_id, min_tokens in rows:
        eos = None if end_id < 0 else end_id
        want, gap = greedy_oracle(target, prompt, max_tokens, eos, min_tokens)
        assert gap > MARGIN
        out.append((arrival, prompt, max_tokens, end_id, min_tokens, want))
    return out


@pytest.fixture(scope="module")
def scenario(target):
    return make_scenario(target)


@pytest.mark.parametrize("name", SPECULATIVE)
def test_staggered_batch_equals_each_request_alone(engines, scenario, name):
    engine = engines[name]
    alone = [solo(engine, *s[1:5]) for s in scenario]
    handles, widths, iteration, busy = {}, [], 0, True
    while busy or iteration <= 5:
        for i, (arrival, prompt, max_tokens, end_id, min_tokens, _) in enumerate(
            scenario
        ):
            if arrival == iteration:
                handles[i] = engine.submit(
                    prompt,
                    max_tokens,
                    end_id=end_id,
                    min_tokens=min_tokens,
                    start=False,
                )
        busy = engine.batcher.iterate()
        widths.append(len(engine.decoder.rows))
        iteration += 1
    for i, (*_, want) in enumerate(scenario):
        batched = [t for s in handles[i] for t in s.token_ids]
        assert tokens_of(alone[i]) == want, (name, i)
        assert batched == want, (name, i)
    assert max(widths) == SLOTS


def two_at_once(engine, short: int, long: int):
    """Steps of two requests submitted together: A (``short`` tokens), B (``long``)."""
    a = engine.submit(POOL[:6], short, end_id=-1, start=False)
    b = engine.submit(POOL[6:14], long, end_id=-1, start=False)
    engine.batcher.run_until_idle()
    return list(a), list(b)


def test_max_concurrency_one_drafts_nothing_while_two_are_active(engines, target):
    engine = engines["dt-mc1"]
    a, b = two_at_once(engine, 6, 24)
    # both are admitted in the first iteration; A's 5 decode steps (1 token each, nothing
    # drafted) run with B; from B's 6th decode step on B is alone and drafts K = 3.
    assert [s.draft_proposed for s in a] == [0] * 6
    assert [s.draft_proposed for s in b[1:6]] == [0] * 5
    assert all(s.draft_proposed == 3 for s in b[6:]) and len(b) > 6
    assert tokens_of(a) == greedy_oracle(target, POOL[:6], 6)[0]
    assert tokens_of(b) == greedy_oracle(target, POOL[6:14], 24)[0]
    # a request alone drafts from its first decode step
    assert all(s.draft_proposed == 3 for s in solo(engine, POOL[:6], 10)[1:])


def test_medusa_max_concurrency_counts_the_active_rows(engines):
    engine = engines["medusa-mc2"]
    nodes = len(TREE)
    a, b = two_at_once(engine, 6, 12)  # two active <= 2: the tree is verified
    assert all(s.draft_proposed == nodes for s in a[1:] + b[1:])
    handles = [
        engine.submit(p, 4, end_id=-1, start=False)
        for p in (POOL[:3], POOL[3:7], POOL[7:12])
    ]
    engine.batcher.run_until_idle()
    steps = [list(h) for h in handles]
    # three active > 2: the first decode step of each verifies no tree
    assert [s[1].draft_proposed for s in steps] == [0, 0, 0]


def test_schedule_picks_k_by_the_active_batch_size(engines, target):
    engine = engines["dt-schedule"]  # {1: 3, 2: 1}
    a, b = two_at_once(engine, 6, 24)
    assert all(s.draft_proposed == 1 for s in a[1:])
    together = len(a) - 1  # A's decode steps, all with B active
    assert all(s.draft_proposed == 1 for s in b[1 : together + 1])
    assert all(s.draft_proposed == 3 for s in b[together + 1 :])
    assert tokens_of(b) == greedy_oracle(target, POOL[6:14], 24)[0]
    # three active: above the largest key, nothing is drafted
    handles = [
        engine.submit(p, 3, end_id=-1, start=False)
        for p in (POOL[:3], POOL[3:7], POOL[7:12])
    ]
    engine.batcher.run_until_idle()
    assert [list(h)[1].draft_proposed for h in handles] == [0, 0, 0]
