"""The reference engine is lossless: draft_target and medusa emit baseline's greedy tokens.

The oracle is an independent greedy loop (the full sequence re-run through the model each
token, no KV cache, transformers' own causal mask), so the baseline engine is checked too.
Models are small random Llamas (losslessness must hold for any weights): a draft that is the
target itself (every draft accepted), a slightly perturbed copy (some accepted), an unrelated
model (almost none); Medusa heads are random, with a chain, a small and a full-width tree
(its first level lists every token, so one draft token is accepted every step).
"""

from __future__ import annotations

import pytest
import torch

from tests.support.random_llama import (
    greedy_oracle,
    make_tokenizer,
    perturbed_copy,
    random_heads,
    random_llama,
)
from trtbench.builders.medusa_tree import build_tree
from trtbench.builders.reference.engine import Step
from trtbench.builders.reference.loading import make_engine
from trtbench.builders.reference.runner import ModelRunner
from trtbench.core.errors import ConfigError

VOCAB = 64
EOS = 1
MAX_SEQ = 96
LONG = 40  # the longest generation compared
SMALL_TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]
CHAIN = [[0], [0, 0], [0, 0, 0]]
WIDE = [[i] for i in range(VOCAB)] + [[i, j] for i in range(VOCAB) for j in range(2)]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def target():
    return random_llama(seed=0, vocab_size=VOCAB)


@pytest.fixture(scope="module")
def engines(target):
    """name -> engine; every engine shares the target weights."""
    tok = make_tokenizer(VOCAB)
    drafts = {
        "self": perturbed_copy(target, seed=1, scale=0.0),
        "near": perturbed_copy(target, seed=2, scale=0.005),
        "other": random_llama(seed=3, vocab_size=VOCAB),
    }
    heads = random_heads(target, num_heads=3, seed=4)
    kw = {"max_seq_len": MAX_SEQ, "max_input_len": 48}
    out = {"baseline": make_engine("baseline", target, tok, **kw)}
    for name, k in (("self", 3), ("near", 4), ("near", 1), ("other", 2)):
        out[f"dt-{name}-k{k}"] = make_engine(
            "draft_target", target, tok, draft=drafts[name], draft_len=k, **kw
        )
    for name, tree in (("chain", CHAIN), ("small", SMALL_TREE), ("wide", WIDE)):
        out[f"medusa-{name}"] = make_engine(
            "medusa", target, tok, heads=heads, choices=tree, **kw
        )
    return out


SPECULATIVE = [
    "dt-self-k3",
    "dt-near-k4",
    "dt-near-k1",
    "dt-other-k2",
    "medusa-chain",
    "medusa-small",
    "medusa-wide",
]


def naive_greedy(model, prompt, max_tokens, eos=None, min_tokens=0):
    """The oracle's tokens (``random_llama.greedy_oracle``, without the top-2 gap)."""
    return greedy_oracle(model, prompt, max_tokens, eos, min_tokens)[0]


PROMPTS = [
    [7],
    [2, 3],
    [40, 41, 42, 43, 44, 45, 46, 47],
    [
        int(x)
        for x in torch.randint(
            2, VOCAB, (17,), generator=torch.Generator().manual_seed(5)
        )
    ],
    [
        int(x)
        for x in torch.randint(
            0, VOCAB, (33,), generator=torch.Generator().manual_seed(6)
        )
    ],
]


@pytest.fixture(scope="module")
def expected(target):
    """Oracle outputs of LONG tokens per prompt, never stopping at eos."""
    return [naive_greedy(target, p, LONG) for p in PROMPTS]


def check_steps(steps: list[Step], engine, max_tokens: int) -> None:
    """Accounting rules of the Step contract (engine.py docstring)."""
    k = engine.draft_len
    assert steps[0] == Step(steps[0].token_ids, 0, 0)
    assert len(steps[0].token_ids) == 1
    for i, step in enumerate(steps):
        assert 1 <= len(step.token_ids) <= k + 1
        assert 0 <= step.draft_accepted <= step.draft_proposed
        if i > 0:
            assert step.draft_proposed == k  # K, the tree's node count, or 0
        if i < len(steps) - 1:  # only the last step may be cut short
            assert len(step.token_ids) == step.draft_accepted + 1
        else:  # cut: the tokens are, the accepted count (engine.py "Counting") is not
            assert len(step.token_ids) <= step.draft_accepted + 1
    assert sum(len(s.token_ids) for s in steps) <= max_tokens


def test_baseline_matches_naive_greedy(engines, expected):
    for prompt, want in zip(PROMPTS, expected, strict=True):
        steps = list(engines["baseline"].generate(prompt, LONG, end_id=-1))
        assert [t for s in steps for t in s.token_ids] == want
        assert all(
            s == Step(s.token_ids, 0, 0) and len(s.token_ids) == 1 for s in steps
        )


@pytest.mark.parametrize("name", SPECULATIVE)
def test_lossless_across_max_tokens(engines, expected, name):
    engine = engines[name]
    depth = engine.decoder.tree.depth if name.startswith("medusa") else engine.draft_len
    limits = sorted({1, 2, depth, depth + 1, 2 * depth + 1, 13, LONG})
    for prompt, want in zip(PROMPTS, expected, strict=True):
        for limit in limits:
            steps = list(engine.generate(prompt, limit, end_id=-1))
            got = [t for s in steps for t in s.token_ids]
            assert got == want[:limit], (name, prompt, limit)
            check_steps(steps, engine, limit)


@pytest.mark.parametrize("name", ["baseline", *SPECULATIVE])
def test_lossless_stops_after_end_token_mid_step(engines, expected, name):
    """end_id = a token baseline emits later: output ends right after its first occurrence."""
    engine = engines[name]
    for prompt, want in zip(PROMPTS, expected, strict=True):
        for pos in (1, 6, len(want) - 3):
            end = want[pos]
            cut = want[: want.index(end) + 1]
            steps = list(engine.generate(prompt, LONG, end_id=end))
            assert [t for s in steps for t in s.token_ids] == cut, (name, prompt, end)
            check_steps(steps, engine, LONG)


@pytest.mark.parametrize("name", ["baseline", *SPECULATIVE])
def test_min_tokens_suppresses_end_token(engines, target, name):
    """With end_id = the first generated token, min_tokens forces the output past it."""
    engine = engines[name]
    for prompt in PROMPTS[:3]:
        end = naive_greedy(target, prompt, 1)[0]
        want = naive_greedy(target, prompt, 24, eos=end, min_tokens=9)
        got = engine.generate_ids(prompt, 24, end_id=end, min_tokens=9)
        assert got == want
        assert len(got) >= 9 and end not in got[:9]


def test_tokenizer_eos_is_the_default_end(target, expected):
    """end_id=None stops at the tokenizer's eos: here id 36, which the target emits often."""
    tok = make_tokenizer(VOCAB, eos_id=36)
    draft = perturbed_copy(target, seed=2, scale=0.005)
    kw = {"max_seq_len": MAX_SEQ, "max_input_len": 48}
    engine = make_engine("draft_target", target, tok, draft=draft, draft_len=4, **kw)
    assert engine.eos_token_id == 36
    stopped = 0
    for prompt, want in zip(PROMPTS, expected, strict=True):
        cut = want[: want.index(36) + 1] if 36 in want else want
        assert engine.generate_ids(prompt, LONG) == cut
        stopped += 36 in want
    assert stopped >= 3  # the rule was exercised, not only the max_tokens limit


def test_end_token_inside_a_step_cuts_it(engines, expected):
    """Self-draft steps carry 4 tokens; an end token at output index 6 ends step 3 early.

    Step 3 verified all 3 drafts (indices 5, 6, 7) but emits only 2 tokens (5, 6): it reports
    3 accepted drafts (the engine's count) and 2 tokens (engine.py "Counting")."""
    want = expected[2]
    assert want.index(want[6]) == 6  # first occurrence (worked out from the oracle)
    steps = list(engines["dt-self-k3"].generate(PROMPTS[2], LONG, end_id=want[6]))
    assert [len(s.token_ids) for s in steps] == [1, 4, 2]
    assert [s.draft_accepted for s in steps] == [0, 3, 3]
    assert steps[-1].token_ids == tuple(want[5:7])


def test_self_draft_accepts_everything(engines, expected):
    """A draft identical to the target: every non-final step emits K+1 tokens."""
    engine = engines["dt-self-k3"]
    steps = list(engine.generate(PROMPTS[2], LONG, end_id=-1))
    # 1 prefill token, then 39 tokens in steps of 4: 9 full steps + one cut to 3.
    assert [len(s.token_ids) for s in steps] == [1] + [4] * 9 + [3]
    assert [s.draft_accepted for s in steps] == [0] + [3] * 9 + [3]
    assert [s.draft_proposed for s in steps] == [0] + [3] * 10


def test_wide_tree_accepts_at_least_one_token_per_step(engines):
    """Depth 1 of WIDE lists all 64 tokens, so the target's next token is always a node."""
    engine = engines["medusa-wide"]
    assert engine.draft_len == VOCAB + 2 * VOCAB
    steps = list(engine.generate(PROMPTS[3], LONG, end_id=-1))
    assert all(s.draft_accepted >= 1 for s in steps[1:-1])


def test_tree_pass_matches_the_path_run_token_by_token(target):
    """Logits of a node in one tree-masked pass equal those of its path run as a chain."""
    tree = build_tree(SMALL_TREE)
    prompt, nodes = [5, 9, 11], [3, 20, 21, 30, 31, 40, 50]  # root + 6 node tokens
    with torch.inference_mode():
        one = ModelRunner(target, 32)
        one.forward([prompt])
        mask = torch.from_numpy(tree.attention_mask.copy())
        tree_logits, _ = one.forward([nodes], tree.position_offsets, mask)
        for leaf in ([0, 1, 3, 6], [0, 2, 5]):  # root→[0]→[0,0]→[0,0,0]; root→[1]→[1,0]
            chain = ModelRunner(target, 32)
            chain.forward([prompt])
            chain_logits, _ = chain.forward([[nodes[i] for i in leaf]])
            torch.testing.assert_close(
                tree_logits[0, leaf], chain_logits[0], atol=1e-5, rtol=1e-5
            )


def test_keep_moves_the_accepted_path_entries(target):
    """After keep(row 0, start, [0, 2, 5]) the cache holds those slots' keys at start..start+2."""
    with torch.inference_mode():
        runner = ModelRunner(target, 32)
        runner.forward([[5, 9]])
        runner.forward([[3, 20, 21, 30, 31, 40]])
        keys = runner.cache.keys[0]  # layer 0: [slots, kv_heads, positions, head_dim]
        picked = keys[:, :, [2, 4, 7]].clone()
        runner.keep(0, 2, [0, 2, 5])
        assert runner.lengths == [5]
        torch.testing.assert_close(keys[:, :, 2:5], picked, atol=0, rtol=0)


@pytest.mark.parametrize(
    ("prompt", "max_tokens", "words"),
    [
        ([], 4, "input_ids is empty"),
        ([3] * 49, 4, "max_input_len 48"),
        ([3] * 40, MAX_SEQ - 39, "exceeds max_seq_len 96"),
        ([3], 0, "max_tokens is 0"),
        ([3, VOCAB], 4, f"token id {VOCAB} is outside"),
    ],
)
def test_bad_requests_raise_config_error_at_call(engines, prompt, max_tokens, words):
    with pytest.raises(ConfigError, match=words):
        engines["medusa-small"].generate(prompt, max_tokens)  # raises before iterating


def test_end_id_outside_the_vocabulary_is_refused(engines):
    with pytest.raises(ConfigError, match=f"end_id {VOCAB} is outside"):
        engines["baseline"].generate([3], 4, end_id=VOCAB)


def test_longest_allowed_request_fits_the_cache(engines, target):
    """prompt + max_tokens == max_seq_len works for the widest step (the cache has room)."""
    prompt = PROMPTS[4][:30]
    want = naive_greedy(target, prompt, MAX_SEQ - 30)
    for name in ("baseline", "dt-near-k4", "medusa-wide"):
        assert engines[name].generate_ids(prompt, MAX_SEQ - 30, end_id=-1) == want


def test_cpu_engine_records_cuda_graphs_unavailable(target):
    engine = make_engine(
        "baseline",
        target,
        make_tokenizer(VOCAB),
        max_seq_len=16,
        max_input_len=8,
        cuda_graphs=True,
    )
    info = engine.info()["cuda_graphs"]
    assert info["requested"] is True and info["available"] is False
    assert "no CUDA device" in info["reason"]


TINY_PROMPTS = [
    "def main(argv=None):\n    parser = argparse.ArgumentParser(",
    "class Queue:\n    def __init__(self, maxsize=0):\n        self.maxsize = ",
    "import os\nimport sys\n\n\ndef _read(path):\n    with open(path) as f:\n",
]


@pytest.fixture(scope="module")
def tiny_engines(tiny_models):
    """Engines over the trained tiny models (target, distilled draft, Medusa heads)."""
    from transformers import AutoTokenizer

    from trtbench.builders.reference.loading import load_causal_lm
    from trtbench.builders.reference.medusa_heads import load_medusa_heads

    cpu, f32 = torch.device("cpu"), torch.float32
    target = load_causal_lm(tiny_models["target"], f32, cpu)
    draft = load_causal_lm(tiny_models["draft"], f32, cpu)
    heads = load_medusa_heads(tiny_models["medusa"], f32, cpu)
    tok = AutoTokenizer.from_pretrained(tiny_models["target"])
    kw = {"max_seq_len": 128, "max_input_len": 64}
    engines = {
        "baseline": make_engine("baseline", target, tok, **kw),
        "dt-k1": make_engine(
            "draft_target", target, tok, draft=draft, draft_len=1, **kw
        ),
        "dt-k4": make_engine(
            "draft_target", target, tok, draft=draft, draft_len=4, **kw
        ),
        "medusa-1": make_engine(
            "medusa", target, tok, heads=heads, choices=[[0]], **kw
        ),
        "medusa-6": make_engine(
            "medusa", target, tok, heads=heads, choices=SMALL_TREE, **kw
        ),
    }
    prompts = [tok(p)["input_ids"] for p in TINY_PROMPTS]
    return engines, prompts, target


def test_lossless_on_the_tiny_models(tiny_engines):
    engines, prompts, target = tiny_engines
    for prompt in prompts:
        want = naive_greedy(target, prompt, 48)
        for name, engine in engines.items():
            for limit in (1, 5, 48):
                assert engine.generate_ids(prompt, limit, end_id=-1) == want[:limit], (
                    name,
                    limit,
                )


def test_trained_drafters_are_accepted(tiny_engines):
    """Acceptance with the trained draft / heads is far above chance (1/vocab).

    A drafter proposing for the wrong position (e.g. head k used for depth k + 2) would still
    be lossless but accepted almost never; the distilled draft agrees with the target on
    ~0.9 of held-out positions and head 1 is right ~0.75 of the time (quality.json), so 0.5
    leaves margin for retraining.
    """
    engines, prompts, _ = tiny_engines
    for name in ("dt-k1", "medusa-1"):
        steps = [
            s
            for p in prompts
            for s in list(engines[name].generate(p, 48, end_id=-1))[1:]
        ]
        rate = sum(s.draft_accepted for s in steps) / sum(
            s.draft_proposed for s in steps
        )
        assert rate >= 0.5, (name, rate)
