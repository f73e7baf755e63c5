"""A step cut by max_tokens reports the drafts the engine accepted and the tokens it emitted.

On the trained tiny models (draft-target, K = 4): an uncut run finds a step that accepted
a ≥ 2 drafts after P tokens; asking for P + 1 tokens cuts that step to 1 token, and the step
must still report a accepted drafts (engine.py "Counting"), while the output is P + 1 tokens.
"""

from __future__ import annotations

import pytest
import torch

from trtbench.builders.reference.loading import make_engine

PROMPT = "def main(argv=None):\n    parser = argparse.ArgumentParser("

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def dt_k4(tiny_models):
    from transformers import AutoTokenizer

    from trtbench.builders.reference.loading import load_causal_lm

    cpu, f32 = torch.device("cpu"), torch.float32
    target = load_causal_lm(tiny_models["target"], f32, cpu)
    draft = load_causal_lm(tiny_models["draft"], f32, cpu)
    tok = AutoTokenizer.from_pretrained(tiny_models["target"])
    engine = make_engine(
        "draft_target",
        target,
        tok,
        draft=draft,
        draft_len=4,
        max_seq_len=128,
        max_input_len=64,
    )
    return engine, tok(PROMPT)["input_ids"]


def test_cut_step_counts_engine_accepted_drafts(dt_k4):
    engine, prompt = dt_k4
    full = list(engine.generate(prompt, 48, end_id=-1))
    before = 0
    for i, step in enumerate(full):
        if i > 0 and step.draft_accepted >= 2:
            break
        before += len(step.token_ids)
    else:
        pytest.fail("no step accepted 2 drafts; the tiny draft should (quality.json)")
    assert len(step.token_ids) == step.draft_accepted + 1  # uncut: a drafts + bonus
    cut = list(engine.generate(prompt, before + 1, end_id=-1))
    assert len(cut) == i + 1
    assert cut[:-1] == full[:i]
    last = cut[-1]
    assert last.token_ids == step.token_ids[:1]  # 1 token fits
    assert last.draft_proposed == 4
    assert last.draft_accepted == step.draft_accepted  # not reduced to 1
    assert sum(len(s.token_ids) for s in cut) == before + 1  # OSL counts emitted tokens
