"""The tiny EAGLE-3 checkpoint served by vLLM 0.32 (an implementation trtbench did not write)
against the reference engine's eagle3 mode: same greedy tokens, same accepted count at every
verify step, same per-position acceptance counters.

vLLM CPU serves the tiny target with ``--speculative-config {"method": "eagle3", "model":
<tiny-models/eagle3>, "num_speculative_tokens": 4}`` (``--enforce-eager``, ``--per-request-
spec-decode-metrics detailed``). Loading it at all checks the checkpoint layout
(``LlamaForCausalLMEagle3``, ``midlayer.*``, ``fc``, ``norm``, ``lm_head``, no embeddings: vLLM
shares the target's); equal accepted counts check the semantics (which target states are
fused, the draft's inputs and positions, the chained hidden state). Requests, counters and
the clear-prompt rule are those of ``test_vllm_crosscheck.py``: equality is asserted on prompts
whose target picks and EAGLE-3 drafts all win by ``CLEAR_MARGIN`` (the drafts' margins from a
cache-free recomputation of each chain).
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.support.crosscheck import (
    CLEAR_MARGIN,
    complete_all,
    spec_counters,
    stdlib_prompts,
    step_frames,
    target_margins,
)
from tests.support.vllm_serve import DETAILED, serve_target
from trtbench.profiling.loadtest.clients.server_counts import position_rows
from trtbench.profiling.loadtest.stats.acceptance import (
    acceptance_summary,
    acceptance_table,
)

pytestmark = pytest.mark.integration

PROMPTS, PROMPT_LEN, TOKENS, K = 16, 32, 48, 4


@pytest.fixture(scope="module")
def ref(tiny_models):
    from transformers import AutoTokenizer

    from trtbench.builders.reference.eagle3 import load_eagle3
    from trtbench.builders.reference.loading import load_causal_lm

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    cpu, f32 = torch.device("cpu"), torch.float32
    tok = AutoTokenizer.from_pretrained(tiny_models["target"])
    target = load_causal_lm(tiny_models["target"], f32, cpu)
    yield {
        "tok": tok,
        "target": target,
        "eagle": load_eagle3(tiny_models["eagle3"], target, f32, cpu),
        "prompts": stdlib_prompts(tok, PROMPTS, PROMPT_LEN),
    }
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def eagle_url(tiny_models, tmp_path_factory):
    config = {
        "method": "eagle3",
        "model": str(tiny_models["eagle3"]),
        "num_speculative_tokens": K,
    }
    extra = [*DETAILED, "--speculative-config", json.dumps(config)]
    yield from serve_target(tiny_models, tmp_path_factory, "eagle3", extra)


def tokens(steps) -> list[int]:
    return [t for s in steps for t in s.token_ids]


@torch.inference_mode()
def chain_margin(target, eagle, seq: list[int], k: int) -> float:
    """The smallest top-1 − top-2 margin of the k chained drafts after ``seq``, recomputed
    without a cache (as ``test_eagle3_lossless.chain_without_cache``)."""
    from trtbench.builders.tiny.tiny_eagle import target_aux

    aux = target_aux(target, torch.tensor([seq[:-1]]), eagle.layer_ids)[0]
    ids, hidden, least = list(seq[1:]), eagle.fc(aux), float("inf")
    for _ in range(k):
        n = len(ids)
        prenorm = eagle.trunk(
            torch.tensor([ids]), hidden[None], torch.arange(n)[None], None
        )[0]
        top = eagle.logits(prenorm[-1]).topk(2).values
        least = min(least, float(top[0] - top[1]))
        ids.append(int(eagle.logits(prenorm[-1]).argmax()))
        hidden = torch.cat([hidden, prenorm[-1:]])
    return least


def test_vllm_eagle3_tokens_steps_and_counters_equal_the_reference(
    ref, eagle_url, tiny_models
):
    from trtbench.builders.reference.loading import make_engine

    prompts = ref["prompts"]
    eng = make_engine(
        "eagle3",
        ref["target"],
        ref["tok"],
        max_seq_len=256,
        max_input_len=PROMPT_LEN,
        max_batch_size=8,
        draft_len=K,
        eagle3=ref["eagle"],
    )
    handles = [eng.submit(p, TOKENS, end_id=-1) for p in prompts]
    steps = [list(h) for h in handles]
    eng.close()
    clear = []
    for i, (p, st) in enumerate(zip(prompts, steps, strict=True)):
        out = tokens(st)
        least = min(target_margins(ref["target"], p, out))
        done = 0
        for s in st[:-1]:
            done += len(s.token_ids)
            least = min(
                least, chain_margin(ref["target"], ref["eagle"], [*p, *out[:done]], K)
            )
        if least >= CLEAR_MARGIN:
            clear.append(i)
    assert len(clear) >= len(prompts) * 3 // 4, clear
    model = str(tiny_models["target"])
    before = spec_counters(eagle_url)
    theirs = complete_all(eagle_url, model, [prompts[i] for i in clear], TOKENS)
    delta = spec_counters(eagle_url).minus(before)
    for i, t in zip(clear, theirs, strict=True):
        assert t.token_ids == tokens(steps[i]), i
        assert t.per_step_accepted == [
            s.draft_accepted for s in steps[i] if s.draft_proposed
        ], i
        assert t.per_step_drafted == [K] * len(t.per_step_accepted)
    requests, responses = step_frames("eagle3", [steps[i] for i in clear])
    [summary] = acceptance_summary(requests, responses).to_dict("records")
    assert (delta.drafts, delta.draft_tokens, delta.accepted) == (
        summary["verify_steps_count"],
        summary["proposed_draft_tokens_count"],
        summary["accepted_draft_tokens_count"],
    )
    table = acceptance_table(requests, responses)
    position = table[table["kind"] == "position"].drop(columns="source")
    from_vllm = [
        {k: v for k, v in r.items() if k != "source"}
        for r in position_rows(("eagle3", "c1"), delta)
    ]
    assert position.to_dict("records") == from_vllm
    print(
        f"\neagle3: {len(clear)} of {len(prompts)} prompts clear; vLLM per position "
        f"{[round(a / delta.drafts, 3) for a in delta.accepted_per_pos]}, "
        f"{delta.accepted:g} accepted of {delta.draft_tokens:g} drafted"
    )
