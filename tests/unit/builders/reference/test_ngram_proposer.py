"""The n-gram (prompt lookup) proposal and the draft-length policy, on hand-worked cases.

Expected drafts are worked out by hand from the rule in ``ngram.py`` (longest suffix first,
the earliest occurrence, up to k following tokens) and, independently, compared with vLLM
0.32's own proposer (``vllm/v1/spec_decode/ngram_proposer.py``) on random sequences, run in
the vLLM interpreter (skipped when there is none). The schedule cases follow TensorRT-LLM
1.4.0rc4's ``get_draft_len_for_batch_size`` docstring example ``{4: 4, 8: 2, 32: 1}``.
"""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from trtbench.builders.reference.adaptive import DraftLenPolicy
from trtbench.builders.reference.ngram import NgramSettings, propose_ngram
from trtbench.core.errors import ConfigError
from trtbench.spec.serving import resolve_vllm_python


@pytest.mark.parametrize(
    ("tokens", "low", "high", "k", "want"),
    [
        # suffix [5, 6] occurs at 0, followed by 7, 8, 5 (the brief's case)
        ([5, 6, 7, 8, 5, 6], 1, 2, 3, [7, 8, 5]),
        # fewer than k tokens follow the occurrence: the draft is shorter
        ([5, 6, 7, 8, 5, 6], 1, 2, 9, [7, 8, 5, 6]),
        # nothing occurs earlier: no draft
        ([1, 2, 3, 4], 1, 3, 3, []),
        ([9], 1, 2, 3, []),
        # [3] alone occurs (at 1) but min 2 forbids a 1-token match
        ([4, 3, 8, 3], 2, 3, 2, []),
        ([4, 3, 8, 3], 1, 3, 2, [8, 3]),
        # the longest size wins over an earlier shorter match: [2, 9] occurs at 4 only,
        # [9] also at 1 (which would draft 5, 7)
        ([0, 9, 5, 7, 2, 9, 6, 1, 2, 9], 1, 2, 2, [6, 1]),
        # an occurrence may overlap the suffix: [1, 1] at 0 is followed by the last 1
        ([1, 1, 1], 1, 2, 3, [1]),
        # k = 0 drafts nothing
        ([5, 6, 7, 5, 6], 1, 2, 0, []),
    ],
)
def test_hand_worked_proposals(tokens, low, high, k, want):
    assert propose_ngram(tokens, NgramSettings(low, high), k) == want


def test_several_occurrences_take_the_earliest_or_with_use_oldest_false_the_latest():
    # suffix [1, 2] occurs at 0 (then 3, 1, 2) and at 3 (then 4, 1, 2)
    tokens = [1, 2, 3, 1, 2, 4, 1, 2]
    assert propose_ngram(tokens, NgramSettings(1, 2), 3) == [3, 1, 2]
    assert propose_ngram(tokens, NgramSettings(1, 2, use_oldest=False), 3) == [4, 1, 2]


def test_window_must_be_ordered():
    with pytest.raises(ValueError, match="min_n <= max_n"):
        NgramSettings(3, 2)


def test_proposals_equal_vllm_proposer_on_random_sequences():
    try:
        python = resolve_vllm_python(None)
    except ConfigError as exc:
        pytest.skip(f"no vLLM interpreter: {exc}")
    rng = random.Random(0)
    cases = []
    for _ in range(600):
        low = rng.randint(1, 4)
        cases.append(
            {
                "tokens": [
                    rng.randrange(rng.randint(2, 5)) for _ in range(rng.randint(1, 30))
                ],
                "min": low,
                "max": rng.randint(low, 6),
                "k": rng.randint(1, 6),
            }
        )
    script = (
        "import json, sys\nimport numpy as np\n"
        "from vllm.v1.spec_decode.ngram_proposer import "
        "_find_longest_matched_ngram_and_propose_tokens as find\n"
        "cases = json.load(sys.stdin)\n"
        "print(json.dumps([find(np.array(c['tokens'], dtype=np.int32), c['min'], "
        "c['max'], 10**6, c['k']).tolist() for c in cases]))\n"
    )
    done = subprocess.run(  # noqa: S603 - the project's vLLM interpreter, no shell
        [str(python), "-c", script],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    ours = [
        propose_ngram(c["tokens"], NgramSettings(c["min"], c["max"]), c["k"])
        for c in cases
    ]
    assert ours == theirs
    assert sum(bool(d) for d in ours) > 100  # matches were found, not only misses


def test_schedule_picks_the_smallest_key_at_or_above_the_batch_size():
    policy = DraftLenPolicy.build(4, schedule={32: 1, 4: 4, 8: 2})
    got = {b: policy.draft_len(b) for b in (1, 4, 5, 8, 9, 32, 33, 100)}
    assert got == {1: 4, 4: 4, 5: 2, 8: 2, 9: 1, 32: 1, 33: 0, 100: 0}
    assert policy.lengths() == (1, 2, 4) and policy.adaptive


def test_max_concurrency_drafts_up_to_n_active_and_combines_with_a_schedule():
    assert [DraftLenPolicy(3, 2).draft_len(b) for b in (1, 2, 3)] == [3, 3, 0]
    both = DraftLenPolicy.build(3, 2, {1: 3, 4: 1})
    assert [both.draft_len(b) for b in (1, 2, 3)] == [3, 1, 0]
    assert [DraftLenPolicy(3).draft_len(b) for b in (1, 64)] == [3, 3]
    assert not DraftLenPolicy(3).adaptive


def test_schedule_json_keys_are_read_as_batch_sizes_and_checked():
    assert DraftLenPolicy.build(2, schedule={"1": 2, "8": 1}).schedule == (
        (1, 2),
        (8, 1),
    )
    with pytest.raises(ValueError, match="0..2"):
        DraftLenPolicy.build(2, schedule={1: 3})
