"""In-flight batching is lossless: a request's steps do not depend on what else is batched.

Each request of a staggered scenario (arrivals at different iterations, prompts of 1..30
tokens, different max_tokens, an end token met inside a step, min_tokens, more requests than
slots) must produce exactly the steps it produces alone, in every mode, and the tokens of an
independent greedy oracle.

Why the comparison is exact and stays so on other machines: a batched matmul may sum in
another order than a one-row matmul and differ in the last bits, which flips an argmax only
when the top two logits are that close. The models here are float64 (rounding ~1e-16
relative), and the oracle asserts that every target choice along the way wins by more than
MARGIN = 1e-6 — ten orders of magnitude above any reordering error — so a flip is impossible
for the target; draft and head proposals (which change step shapes, not tokens) run in the
same float64 arithmetic.
"""

from __future__ import annotations

import threading

import pytest
import torch

from tests.support.random_llama import (
    greedy_oracle,
    make_tokenizer,
    perturbed_copy,
    random_heads,
    random_llama,
)
from trtbench.builders.reference.loading import make_engine

VOCAB = 64
MARGIN = 1e-6
SLOTS = 3
TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]
GEN = torch.Generator().manual_seed(11)
PROMPT_TOKENS = torch.randint(2, VOCAB, (64,), generator=GEN).tolist()


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def target():
    return random_llama(seed=0, vocab_size=VOCAB).double()


@pytest.fixture(scope="module")
def engines(target):
    """Engines with SLOTS batch slots over float64 models sharing the target."""
    base32 = random_llama(seed=0, vocab_size=VOCAB)
    near = perturbed_copy(base32, seed=2, scale=0.005).double()
    other = random_llama(seed=3, vocab_size=VOCAB).double()
    heads = random_heads(base32, num_heads=3, seed=4).double()
    kw = {"max_seq_len": 80, "max_input_len": 40, "max_batch_size": SLOTS}
    tok = make_tokenizer(VOCAB)
    return {
        "baseline": make_engine("baseline", target, tok, **kw),
        "dt-near-k3": make_engine(
            "draft_target", target, tok, draft=near, draft_len=3, **kw
        ),
        "dt-other-k2": make_engine(
            "draft_target", target, tok, draft=other, draft_len=2, **kw
        ),
        "medusa": make_engine("medusa", target, tok, heads=heads, choices=TREE, **kw),
    }


def make_scenario(target):
    """(arrival iteration, prompt, max_tokens, end_id, min_tokens, oracle tokens) x 6."""
    lengths = (3, 9, 17, 1, 30, 5)
    prompts = [PROMPT_TOKENS[i : i + n] for i, n in enumerate(lengths)]
    long, _ = greedy_oracle(target, prompts[2], 25)
    # request 2 ends at the latest token that is new when emitted (random models cycle)
    cut = max(i for i in range(25) if long[i] not in long[:i])
    end = long[cut]
    first, _ = greedy_oracle(target, prompts[4], 1)
    rows = [
        (0, prompts[0], 20, -1, 0),
        (0, prompts[1], 14, -1, 0),
        (2, prompts[2], 25, end, 0),
        (2, prompts[3], 1, -1, 0),
        (3, prompts[4], 12, first[0], 5),  # its first token is suppressed 5 times
        (5, prompts[5], 16, -1, 0),
    ]
    scenario = []
    for arrival, prompt, max_tokens, end_id, min_tokens in rows:
        eos = None if end_id < 0 else end_id
        want, gap = greedy_oracle(target, prompt, max_tokens, eos, min_tokens)
        assert gap > MARGIN, ("near tie in the oracle run", gap)
        scenario.append((arrival, prompt, max_tokens, end_id, min_tokens, want))
    assert scenario[2][5] == long[: cut + 1] and cut >= 4
    return scenario


@pytest.fixture(scope="module")
def scenario(target):
    return make_scenario(target)


def solo(engine, prompt, max_tokens, end_id, min_tokens):
    """Steps of one request decoded alone (batch of one)."""
    handle = engine.submit(
        prompt, max_tokens, end_id=end_id, min_tokens=min_tokens, start=False
    )
    engine.batcher.run_until_idle()
    return list(handle)


def run_staggered(engine, scenario):
    """Submit each request before its arrival iteration; return (steps per request, rows
    per decode step, admission iteration per request)."""
    batcher, handles, widths, admitted = engine.batcher, {}, [], {}
    last_arrival = max(s[0] for s in scenario)
    iteration, busy = 0, True
    while busy or iteration <= last_arrival:
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
        busy = batcher.iterate()
        widths.append(len(engine.decoder.rows))  # rows still active after the step
        for i, handle in handles.items():
            if handle.admitted_ns and i not in admitted:
                admitted[i] = iteration
        iteration += 1
    return {i: list(h) for i, h in handles.items()}, widths, admitted


@pytest.mark.parametrize("name", ["baseline", "dt-near-k3", "dt-other-k2", "medusa"])
def test_staggered_batch_equals_each_request_alone(engines, scenario, name):
    engine = engines[name]
    alone = [solo(engine, *s[1:5]) for s in scenario]
    batched, widths, admitted = run_staggered(engine, scenario)
    for i, (*_, want) in enumerate(scenario):
        assert [t for s in alone[i] for t in s.token_ids] == want, (name, i)
        assert batched[i] == alone[i], (name, i)
    # The batch was really shared: all slots busy at some step, and request 4 waited for
    # a free slot (at its arrival, iteration 3, requests 0, 1 and 2 hold the 3 slots: at
    # most 1 + 4 tokens per request and iteration, none of them can have finished).
    assert max(widths) == SLOTS
    assert admitted[4] > 3
    assert sum(len(a) for a in alone) > 2 * len(widths)


def test_concurrent_generate_threads_share_steps(engines, scenario):
    """Real loop thread, 4 client threads on 3 slots: each output equals its oracle."""
    engine = engines["medusa"]
    results: dict[int, list[int]] = {}

    def client(i):
        _, prompt, max_tokens, end_id, min_tokens, _ = scenario[i]
        results[i] = engine.generate_ids(
            prompt, max_tokens, end_id=end_id, min_tokens=min_tokens
        )

    threads = [threading.Thread(target=client, args=(i,)) for i in (0, 2, 4, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    engine.close()
    assert {i: results[i] for i in (0, 2, 4, 5)} == {
        i: scenario[i][5] for i in (0, 2, 4, 5)
    }


def test_waiting_requests_are_admitted_first_come_first_served(engines, scenario):
    engine = engines["baseline"]
    prompts = [s[1] for s in scenario[:5]]
    handles = [engine.submit(p, 3, end_id=-1, start=False) for p in prompts]
    engine.batcher.run_until_idle()
    order = [h.admitted_ns for h in handles]
    assert order == sorted(order) and len(set(order)) == 5
    assert all(len([t for s in h for t in s.token_ids]) == 3 for h in handles)


def test_cancelled_request_frees_its_slot(target, scenario):
    """One slot: A runs, B waits; cancelling A ends A's steps and lets B in next."""
    engine = make_engine(
        "baseline", target, make_tokenizer(VOCAB), max_seq_len=80, max_input_len=40
    )
    a = engine.submit(scenario[0][1], 30, end_id=-1, start=False)
    b = engine.submit(scenario[5][1], 16, end_id=-1, start=False)
    engine.batcher.iterate()  # A: prefill + 1 decode step; B waits
    assert not b.admitted_ns
    a.cancel()
    engine.batcher.iterate()  # A retired before admission, B admitted
    assert a.done and b.admitted_ns
    assert [len(s.token_ids) for s in a] == [1, 1]
    engine.batcher.run_until_idle()
    assert [t for s in b for t in s.token_ids] == scenario[5][5]


def test_deliver_callback_gets_steps_then_final(engines, scenario):
    engine = engines["dt-near-k3"]
    calls = []
    engine.submit(
        scenario[2][1],
        25,
        end_id=scenario[2][3],
        deliver=lambda *c: calls.append(c),
        start=False,
    )
    engine.batcher.run_until_idle()
    assert [c[1] for c in calls] == [False] * (len(calls) - 1) + [True]
    assert all(c[2] is None and c[0] is not None for c in calls)
    assert [t for c in calls for t in c[0].token_ids] == scenario[2][5]


def test_close_ends_requests_in_flight_with_an_error(target, scenario):
    engine = make_engine(
        "baseline", target, make_tokenizer(VOCAB), max_seq_len=80, max_input_len=40
    )
    running = engine.submit(scenario[0][1], 20, end_id=-1, start=False)
    waiting = engine.submit(scenario[1][1], 5, end_id=-1, start=False)
    engine.batcher.iterate()
    engine.close()
    for handle in (running, waiting):
        with pytest.raises(RuntimeError, match="closed during the request"):
            list(handle)
    # the engine stays usable: a new loop serves the next request
    assert engine.generate_ids(scenario[1][1], 14, end_id=-1) == scenario[1][5]
    engine.close()


def test_generate_submits_only_when_iterated(engines, scenario):
    engine = engines["baseline"]
    steps = engine.generate(scenario[0][1], 5)
    steps.close()
    assert not engine.batcher.iterate()  # nothing was queued
