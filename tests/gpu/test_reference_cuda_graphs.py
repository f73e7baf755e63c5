"""CUDA graphs in the reference engine: captured decode steps replay to the eager tokens."""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs a CUDA device: the reference engine captures its decode step with torch CUDA graphs",
    ),
]

TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]


@pytest.mark.parametrize("mode", ["baseline", "draft_target", "medusa"])
def test_graph_replay_matches_eager(tiny_models, mode):
    from transformers import AutoTokenizer

    from trtbench.builders.reference.loading import load_causal_lm, make_engine
    from trtbench.builders.reference.medusa_heads import load_medusa_heads

    device, dtype = torch.device("cuda"), torch.float32
    target = load_causal_lm(tiny_models["target"], dtype, device)
    tok = AutoTokenizer.from_pretrained(tiny_models["target"])
    extra = {
        "baseline": {},
        "draft_target": {
            "draft": load_causal_lm(tiny_models["draft"], dtype, device),
            "draft_len": 4,
        },
        "medusa": {
            "heads": load_medusa_heads(tiny_models["medusa"], dtype, device),
            "choices": TREE,
        },
    }[mode]
    kw = {"max_seq_len": 256, "max_input_len": 128, **extra}
    eager = make_engine(mode, target, tok, cuda_graphs=False, **kw)
    graphed = make_engine(mode, target, tok, cuda_graphs=True, **kw)
    assert graphed.cuda_graphs.available, graphed.cuda_graphs.reason
    want_q = {"baseline": 1, "draft_target": 5, "medusa": 7}[mode]
    assert graphed.decoder.target.graph_shapes == ((1, want_q),)
    prompt = tok("def main(argv):\n    parser = argparse.")["input_ids"]
    for limit in (1, 5, 48):
        want = eager.generate_ids(prompt, limit, end_id=-1)
        assert graphed.generate_ids(prompt, limit, end_id=-1) == want
    # A batch of two: one graph per (rows, step length); both rows replay to their tokens.
    # Batched and one-row forwards may round differently; along these two outputs the
    # target's top-2 logit gap was >= 0.045 (tiny models on the CPU dev machine), far above
    # float32 rounding, so greedy picks cannot flip.
    batched = make_engine(mode, target, tok, cuda_graphs=True, max_batch_size=2, **kw)
    assert (2, want_q) in batched.decoder.target.graph_shapes
    other = tok("class Queue:\n    def put(self, item):\n")["input_ids"]
    handles = [batched.submit(p, 32, end_id=-1, start=False) for p in (prompt, other)]
    batched.batcher.run_until_idle()
    got = [[t for s in h for t in s.token_ids] for h in handles]
    assert got == [eager.generate_ids(p, 32, end_id=-1) for p in (prompt, other)]


def test_eagle3_draft_chain_is_captured_and_replays_to_the_eager_tokens(tiny_models):
    """EAGLE-3 (issue 47): the draft's catch-up (rows x K + 1) and chain (rows x 1) are
    captured like the target's verification; the graphed engine returns the eager tokens."""
    from transformers import AutoTokenizer

    from trtbench.builders.reference.eagle3 import load_eagle3
    from trtbench.builders.reference.loading import load_causal_lm, make_engine

    device, dtype = torch.device("cuda"), torch.float32
    target = load_causal_lm(tiny_models["target"], dtype, device)
    tok = AutoTokenizer.from_pretrained(tiny_models["target"])
    eagle3 = load_eagle3(tiny_models["eagle3"], target, dtype, device)
    kw = {"max_seq_len": 256, "max_input_len": 128, "draft_len": 4, "eagle3": eagle3}
    eager = make_engine("eagle3", target, tok, cuda_graphs=False, **kw)
    graphed = make_engine(
        "eagle3", target, tok, cuda_graphs=True, max_batch_size=2, **kw
    )
    assert graphed.cuda_graphs.available, graphed.cuda_graphs.reason
    assert graphed.decoder.draft.graph_shapes == ((1, 1), (1, 5), (2, 1), (2, 5))
    assert graphed.decoder.target.graph_shapes == ((1, 5), (2, 5))
    prompts = [
        tok("def main(argv):\n    parser = argparse.")["input_ids"],
        tok("class Queue:\n    def put(self, item):\n")["input_ids"],
    ]
    handles = [graphed.submit(p, 32, end_id=-1, start=False) for p in prompts]
    graphed.batcher.run_until_idle()
    got = [[t for s in h for t in s.token_ids] for h in handles]
    assert got == [eager.generate_ids(p, 32, end_id=-1) for p in prompts]
