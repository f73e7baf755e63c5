"""Chain methods planned by the kind of drafter they declare (``plan/chain_kinds.py``), not by
name: suffix decoding (``free``, ``planner="chain"``, rates 0.5,0.4,0.3) is planned as a
lookup with no code of its own in the planner, and gets its ``--suffix`` options."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from trtbench.cli import cli, main
from trtbench.commands.plan import plan as plan_command
from trtbench.core.methods import CHAIN_METHODS, METHODS
from trtbench.plan.chain_kinds import HEAD, LOOKUP, MODULES, chain_kind
from trtbench.plan.inputs import (
    CHAIN_PLAN,
    DRAFT_MODEL_PLAN,
    MEDUSA_PLAN,
    REFERENCE,
    REFERENCE_PLAN,
)
from trtbench.plan.planner import estimate_memory, estimate_step
from trtbench.plan.settings import PlanSettings, plan_inputs

# Llama-3-8B in BF16: KV per token 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B;
# weights 16,060,522,496 B; vocabulary 128,256. One H100 SXM reads 3.35e12 B/s.
KV_PER_TOKEN = 131_072
WEIGHT_BYTES = 16_060_522_496
VOCAB = 128_256
H100_BYTES_PER_S = 3.35e12


def _suffix_inputs(**options):
    settings = PlanSettings(
        model="llama-3-8b",
        input_len=1000,
        output_len=2,
        concurrency=(4,),
        no_overheads=True,
        **options,
    )
    return plan_inputs(settings)


def test_the_planner_arithmetics_are_the_four_the_methods_declare():
    assert (REFERENCE_PLAN, DRAFT_MODEL_PLAN, MEDUSA_PLAN, CHAIN_PLAN) == (
        "baseline",
        "draft_target",
        "medusa",
        "chain",
    )
    assert REFERENCE == "baseline"  # the one method that drafts nothing


def test_every_chain_method_has_a_kind():
    kinds = {name: chain_kind(METHODS[name]) for name in CHAIN_METHODS}
    assert kinds == {"eagle3": HEAD, "mtp": MODULES, "ngram": LOOKUP, "suffix": LOOKUP}
    assert chain_kind(METHODS["medusa"]) is None  # not a chain


def test_suffix_is_planned_as_a_free_chain():
    inputs = _suffix_inputs(suffix="default")
    assert inputs.modes == ("baseline", "suffix")
    chain = inputs.chain("suffix")
    assert chain is not None and chain.rates == (0.5, 0.4, 0.3)
    # E = 1 + a1 + a1 a2 + a1 a2 a3 = 1 + 0.5 + 0.2 + 0.06
    assert chain.tokens_per_step == pytest.approx(1.76)
    assert chain.head is None and chain.extra_params == 0.0 and chain.kv_layers == 0
    # a lookup: 4 sequences x 10 µs of CPU + one verify of 4 sequences x (K + 1) = 4 tokens,
    # memory-bound: the weights once + 4 x context 1001 x the KV per token
    step = estimate_step(inputs, "suffix", 4)
    verify = (WEIGHT_BYTES + 4 * 1001 * KV_PER_TOKEN) / H100_BYTES_PER_S
    assert step.step_s == pytest.approx(4 * 10e-6 + verify)
    assert step.tokens_per_step == pytest.approx(1.76)


def test_suffix_holds_no_draft_memory():
    inputs = _suffix_inputs(suffix="0.5,0.4,0.3")
    mem = estimate_memory(inputs, "suffix", 1)
    assert mem.extra_weights_bytes == 0.0
    # only the target's KV, over input 1000 + output 2 + K = 3 drafted tokens
    assert mem.kv_per_sequence_bytes == KV_PER_TOKEN * 1005 == 131_727_360
    assert mem.logits_per_sequence_bytes == (1 + 3) * VOCAB * 4


def test_suffix_lookup_time_is_its_own_option():
    inputs = _suffix_inputs(suffix="default", suffix_lookup_us=25.0)
    assert inputs.chain("suffix").lookup_s == pytest.approx(25e-6)
    with_ngram = _suffix_inputs(suffix="default", ngram="default")
    assert with_ngram.modes == ("baseline", "ngram", "suffix")
    assert with_ngram.chain("ngram").lookup_s == pytest.approx(10e-6)


def test_cli_plans_suffix_only_when_asked(tmp_path):
    out = tmp_path / "plan.csv"
    args = ["plan", "--model", "llama-3-8b", "--concurrency", "1", "--out", str(out)]
    result = CliRunner().invoke(cli, [*args, "--suffix", "default"])
    assert result.exit_code == 0, result.output
    assert (
        "suffix: K=3, rates 0.5,0.4,0.3 → E=1.76; no model, CPU lookup 10 µs per sequence"
        in result.output
    )
    frame = pd.read_csv(out)
    assert list(frame["mode"]) == ["baseline", "suffix"]
    assert frame.loc[frame["mode"] == "suffix", "extra_weights_bytes"].item() == 0
    plain = CliRunner().invoke(cli, args)
    assert plain.exit_code == 0, plain.output
    assert list(pd.read_csv(out)["mode"]) == ["baseline"]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--suffix", "abc"], "--suffix: 'abc' is not 'default'"),
        (["--suffix", "0.5,1.5"], "--suffix: acceptance rates must lie in [0, 1]"),
        (["--suffix", "5@3"], "--suffix: '5@3': an acceptance length E with K = 3"),
        (["--suffix", "default", "--suffix-lookup-us", "-1"], "'--suffix-lookup-us'"),
    ],
)
def test_bad_suffix_options_exit_2_in_one_line(capsys, argv, named):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--model", "llama-3-8b", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert named in err and len(err.splitlines()) == 1, err


def test_the_chain_options_keep_their_help():
    """The options written before the kinds derived them, word for word; suffix's own."""
    helps = {p.name: p.help for p in plan_command.params}
    assert helps["eagle3"] == (
        "Plan EAGLE-3 with these rates ('default': 0.8,0.7,0.6, assumed; 'E@K': a "
        "published acceptance length E with K drafts); K = number of rates."
    )
    assert helps["eagle3_layers"] == "Decoder layers of the EAGLE-3 head."
    assert helps["eagle3_vocab"] == (
        "Draft vocabulary of the EAGLE-3 LM head (default: the target's)."
    )
    assert helps["mtp"] == (
        "Plan MTP with these rates ('default': 0.85, DeepSeek-V3's 2nd-token acceptance)."
    )
    assert helps["mtp_layers"] == "MTP modules in memory (num_nextn_predict_layers)."
    assert helps["ngram"] == (
        "n-gram (prompt lookup) chain rates (default: 0.5,0.4,0.3, assumed)."
    )
    assert helps["suffix"] == (
        "suffix decoding (suffix tree) chain rates (default: 0.5,0.4,0.3, assumed)."
    )
    assert (
        helps["suffix_lookup_us"] == "CPU lookup time per sequence per step (assumed)."
    )
    names = [p.name for p in plan_command.params]
    start = names.index("eagle3")
    assert names[start : start + 11] == [
        "eagle3",
        "eagle3_layers",
        "eagle3_vocab",
        "eagle3_topk",
        "eagle3_tokens",
        "mtp",
        "mtp_layers",
        "ngram",
        "ngram_lookup_us",
        "suffix",
        "suffix_lookup_us",
    ]
