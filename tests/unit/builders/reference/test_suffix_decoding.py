"""Suffix decoding on the reference engine: the trees' drafts worked by hand, and lossless
output on the small random float64 Llamas (as ``test_ngram_adaptive_lossless.py``).

Hand-worked counts: a tree holds every substring (up to its depth) with its number of
occurrences; a continuation's probability is ``count(child) / count(node)`` multiplied
along the draft; a draft's score is the sum of its tokens' probabilities.
"""

from __future__ import annotations

import pytest

from tests.support.random_llama import greedy_oracle
from trtbench.builders.reference.loading import make_engine
from trtbench.builders.reference.methods.suffix import (
    SuffixCache,
    SuffixSettings,
    SuffixTree,
    speculate,
)

DEFAULT = SuffixSettings()  # vLLM's: depth 24, 10000 cached, factor 1.0, min prob 0.1


def drafts(tokens, k=4, **settings):
    s = SuffixSettings(**settings)
    tree = SuffixTree(s.max_tree_depth)
    tree.add(tokens)
    return speculate(tree, tokens, k, s)


def test_the_longest_useful_match_drafts_its_continuation():
    # [1,2,3,1,2]: match [2] (2 occurrences, one followed by 3): [3] p .5 (factor 1: 1
    # token); match [1,2]: [3] p .5 then [1] p .5 (2 tokens): score 1.0; [3,1,2] and
    # [2,3,1,2] occur only at the end: nothing follows
    assert drafts([1, 2, 3, 1, 2]) == ([3, 1], 1.0)


def test_counts_set_the_probability_and_min_token_prob_drops_drafts():
    # [7,1,2,7,1,3,7,1]: [1] occurs 3 times, followed once by 2 and once by 3 (2 seen
    # first): p 1/3; match [7,1] (3 times): [2] p 1/3, then [7] p 1/3 (its only child)
    seq = [7, 1, 2, 7, 1, 3, 7, 1]
    tokens, score = drafts(seq)
    assert tokens == [2, 7] and score == pytest.approx(2 / 3)
    assert drafts(seq, min_token_prob=0.4) == ([], 0.0)  # 1/3 < 0.4: nothing


def test_the_spec_factor_k_and_the_depth_bound_the_draft():
    seq = [1, 2, 3, 4, 5, 1, 2, 3, 4]
    # match [1,2,3,4] (4 tokens) → [5, 1, 2, 3] at factor 1, p .5 each (the match occurs
    # twice, once at the end)
    assert drafts(seq, k=8)[0] == [5, 1, 2, 3]
    assert drafts(seq, k=2)[0] == [5, 1]  # K
    assert drafts(seq, k=8, max_spec_factor=0.5)[0] == [5, 1]  # int(0.5 x 4)
    # depth 3: the context is [2,3,4], matches of 1..2 tokens; [3,4,5] is 3 deep: one draft
    assert drafts(seq, k=8, max_tree_depth=3)[0] == [5]


def test_a_requests_tree_catches_up_with_its_output():
    cache = SuffixCache(DEFAULT)
    cache.start("r", [1, 2, 3])
    assert cache.propose("r", [1, 2, 3], 4) == []  # nothing repeats yet
    assert cache.propose("r", [1, 2, 3, 1, 2], 4) == [3, 1]


def test_previous_responses_draft_through_the_global_tree():
    # request a: prompt [1], response [5,6,7,8] (streamed in as generated); request b:
    # [9,5,6]: its own tree has no continuation of [6] or [5,6]; the global one drafts [7]
    # (match 1, score 1.0) or [7,8] (match 2, score 2.0)
    for settings, want in (
        (DEFAULT, [7, 8]),
        (SuffixSettings(max_cached_requests=0), []),
    ):
        cache = SuffixCache(settings)
        cache.start("a", [1])
        cache.propose("a", [1, 5, 6, 7, 8], 4)
        cache.stop("a")
        cache.start("b", [9, 5, 6])
        assert cache.propose("b", [9, 5, 6], 4) == want
    assert not cache.cached  # 0: no global tree at all


def test_the_oldest_response_is_evicted_when_a_request_starts():
    cache = SuffixCache(SuffixSettings(max_cached_requests=1))
    cache.start("a", [1])
    cache.propose("a", [1, 5, 6, 7, 8], 4)
    cache.stop("a")
    cache.start("c", [4])  # takes the only place: a's response goes
    cache.propose("c", [4, 1, 2, 3], 4)
    assert list(cache.cached) == [[1, 2, 3]]
    assert set(cache.global_tree.root.children) == {1, 2, 3}  # a's nodes are gone
    cache.stop("c")
    cache.start("b", [9, 5, 6])
    assert cache.propose("b", [9, 5, 6], 4) == []


PROMPTS = [[7], [2, 3], [5, 6, 7, 8, 5, 6, 7, 8, 5], [3, 9, 3, 9, 3], [11, 12, 13]]
LONG = 30


@pytest.fixture(scope="module")
def expected(target):
    out = []
    for prompt in PROMPTS:
        tokens, gap = greedy_oracle(target, prompt, LONG + 8)
        assert gap > 1e-6, ("near tie in the oracle run", gap)
        out.append(tokens)
    return out


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize(
    "variant",
    [
        {},  # vLLM's defaults
        {  # eager: deep, any probability, 2 drafts per matched token
            "suffix_decoding_max_tree_depth": 8,
            "suffix_decoding_max_spec_factor": 2.0,
            "suffix_decoding_min_token_prob": 0.0,
            "suffix_decoding_max_cached_requests": 2,
        },
    ],
)
def test_suffix_output_equals_the_baseline(family, expected, variant):
    """Alone, then all at once (the global tree filled by the first pass): the tokens are
    the greedy oracle's; drafts were proposed, some accepted, some rejected."""
    engine = make_engine(
        "suffix",
        family["target"],
        family["tokenizer"],
        max_seq_len=96,
        max_input_len=48,
        max_batch_size=3,
        draft_len=4,
        variant=variant,
    )
    steps = []
    for prompt, want in zip(PROMPTS, expected, strict=True):
        handle = engine.submit(prompt, LONG, end_id=-1, start=False)
        engine.batcher.run_until_idle()
        got = list(handle)
        assert [t for s in got for t in s.token_ids] == want[:LONG], prompt
        steps += got
    handles = [engine.submit(p, LONG, end_id=-1, start=False) for p in PROMPTS]
    engine.batcher.run_until_idle()
    for handle, want in zip(handles, expected, strict=True):
        got = list(handle)
        assert [t for s in got for t in s.token_ids] == want[:LONG]
        steps += got
    proposed = sum(s.draft_proposed for s in steps)
    accepted = sum(s.draft_accepted for s in steps)
    assert 0 < accepted < proposed
    assert all(0 <= s.draft_accepted <= s.draft_proposed <= 4 for s in steps)
