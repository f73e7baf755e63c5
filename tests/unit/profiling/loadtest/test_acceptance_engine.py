"""Per-position acceptance from the reference engine's own steps (trained tiny models).

Greedy draft-target K = 4 and a Medusa chain [[0], [0, 0], [0, 0, 0]] (3 nodes, depth 3:
proposed = depth, so position j means "the j-th draft") generate a few prompts in process;
their Steps become response/request records as the Triton reference model streams them (one
response per step), ``acceptance.py`` computes the figures, and a plain loop over the same
Steps counts them independently.
"""

from __future__ import annotations

import pytest
import torch

from trtbench.builders.reference.loading import make_engine
from trtbench.core.export import records_to_frame
from trtbench.core.records import RequestRecord, ResponseRecord
from trtbench.profiling.loadtest.stats.acceptance import (
    acceptance_summary,
    acceptance_table,
)

PROMPTS = [
    "def main(argv=None):\n    parser = argparse.ArgumentParser(",
    "class Queue:\n    def __init__(self, maxsize=0):\n        self.maxsize = ",
    "import os\nimport sys\n\n\ndef _read(path):\n    with open(path) as f:\n",
]
LIMITS = [40, 33, 45]  # uneven, so some last steps are cut by max_tokens
CHAIN = [[0], [0, 0], [0, 0, 0]]


@pytest.fixture(scope="module")
def runs(tiny_models):
    """{variant: [steps of each prompt]} from the engines run in process."""
    from transformers import AutoTokenizer

    from trtbench.builders.reference.loading import load_causal_lm
    from trtbench.builders.reference.medusa_heads import load_medusa_heads

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    cpu, f32 = torch.device("cpu"), torch.float32
    target = load_causal_lm(tiny_models["target"], f32, cpu)
    draft = load_causal_lm(tiny_models["draft"], f32, cpu)
    heads = load_medusa_heads(tiny_models["medusa"], f32, cpu)
    tok = AutoTokenizer.from_pretrained(tiny_models["target"])
    kw = {"max_seq_len": 128, "max_input_len": 64}
    engines = {
        "dt": make_engine("draft_target", target, tok, draft=draft, draft_len=4, **kw),
        "med": make_engine("medusa", target, tok, heads=heads, choices=CHAIN, **kw),
    }
    out = {}
    for name, engine in engines.items():
        out[name] = [
            list(engine.generate(tok(p)["input_ids"], n, end_id=-1))
            for p, n in zip(PROMPTS, LIMITS, strict=True)
        ]
        engine.close()
    torch.set_num_threads(before)
    return out


def records(variant, runs):
    """Request and response frames of one variant's runs (tier c1)."""
    requests, responses = [], []
    for r, steps in enumerate(runs):
        rid = f"{variant}-c1-{r}"
        for i, s in enumerate(steps):
            responses.append(
                ResponseRecord(
                    variant,
                    "c1",
                    rid,
                    i,
                    1000 + i,
                    len(s.token_ids),
                    i == len(steps) - 1,
                    s.draft_proposed,
                    s.draft_accepted,
                )
            )
        osl = sum(len(s.token_ids) for s in steps)
        requests.append(
            RequestRecord(
                variant=variant,
                tier="c1",
                concurrency=1,
                request_rate_per_s=None,
                request_id=rid,
                task_id=rid,
                scheduled_ns=0,
                sent_ns=10,
                first_token_ns=1000,
                last_token_ns=1000 + len(steps) - 1,
                end_ns=5000,
                input_tokens=8,
                requested_output_tokens=LIMITS[r],
                output_tokens=osl,
                token_responses=len(steps),
                empty_responses=0,
                echoed_tokens=0,
                first_response_tokens=len(steps[0].token_ids),
                draft_tokens=sum(s.draft_proposed for s in steps),
                accepted_draft_tokens=sum(s.draft_accepted for s in steps),
                input_token_source="tokenizer",
                output_token_source="output_ids",
            )
        )
    return records_to_frame(requests), records_to_frame(responses)


@pytest.mark.parametrize(("variant", "k"), [("dt", 4), ("med", 3)])
def test_per_position_rates_match_a_plain_count(runs, variant, k):
    steps = [s for run in runs[variant] for s in run]
    assert sum(len(s.token_ids) for s in steps) == sum(LIMITS)  # OSL: emitted tokens
    verify = [s for s in steps if s.draft_proposed > 0]
    assert {s.draft_proposed for s in verify} == {k}
    proposed_at_least = [
        sum(s.draft_proposed >= j for s in verify) for j in range(k + 1)
    ]
    accepted_at_least = [
        sum(s.draft_accepted >= j for s in verify) for j in range(k + 1)
    ]
    exactly = [sum(s.draft_accepted == j for s in verify) for j in range(k + 1)]

    table = acceptance_table(*records(variant, runs[variant]))
    pos = table[table["kind"] == "position"]
    assert list(pos["draft_position"]) == list(range(1, k + 1))
    assert list(pos["steps_count"]) == proposed_at_least[1:]
    assert list(pos["hits_count"]) == accepted_at_least[1:]
    hist = table[table["kind"] == "histogram"]
    assert list(hist["hits_count"]) == exactly
    # The trained drafters: position 1 is accepted far above chance (1/2048).
    assert pos["value_ratio"].iloc[0] > 0.3
    assert list(pos["value_ratio"]) == sorted(pos["value_ratio"], reverse=True)

    s = acceptance_summary(*records(variant, runs[variant])).iloc[0]
    accepted = sum(s_.draft_accepted for s_ in verify)
    assert s["verify_steps_count"] == len(verify)
    assert s["acceptance_length_tokens"] == pytest.approx(1 + accepted / len(verify))
    assert s["draft_acceptance_rate_ratio"] == pytest.approx(
        accepted / (k * len(verify))
    )
