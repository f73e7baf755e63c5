"""``trtbench plan`` through the CLI: output, CSV, the fit to a run, and bad input (exit 2)."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support.run_factory import summary_row, write_build, write_summary
from trtbench.cli import cli, main
from trtbench.plan.fit import fit_run
from trtbench.profiling.report.run_data import load_run


def test_plan_prints_and_writes_csv(tmp_path):
    out = tmp_path / "plan.csv"
    args = [
        "plan",
        "--model",
        "llama-3-8b",
        "--draft",
        "llama-3.2-1b",
        "--medusa-accuracies",
        "vicuna-7b",
        "--concurrency",
        "1,64",
        "--out",
        str(out),
        "--no-overheads",  # the roofline's figures below; test_overheads.py the terms
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "E[N]=3.36" in result.output  # α = 0.8, γ = 4 (Leviathan et al. 2023)
    assert "E = 2.38" in result.output  # greedy 63-node tree on Vicuna-7B heads
    assert "Crossover medusa: slower than baseline from B =" in result.output
    # Sizes in binary units (1 GiB = 2**30 B, 1 MiB = 2**20 B), never decimal GB:
    # H100 80e9 B = 74.506 GiB; 90 % budget 72e9 B = 67.055 GiB; weights 16,060,522,496 B
    # = 14.957 GiB; KV per sequence 1280 tokens x 131,072 B = 160 MiB; FP32 logits of one
    # token 128,256 x 4 B = 513,024 B = 501.0 KiB; baseline B=1 total 14.957 + 0.156 +
    # 0.0005 = 15.114 GiB.
    assert "989 TFLOP/s dense, 74.51 GiB)" in result.output
    assert "memory budget 90% = 67.06 GiB" in result.output
    assert (
        "baseline: 14.96 GiB + 0.0 MiB + (160.0 MiB + 501.0 KiB) x B" in result.output
    )
    assert "15.11 GiB" in result.output  # the B=1 baseline row
    assert " GB" not in result.output and "mem GB" not in result.output
    frame = pd.read_csv(out)
    assert len(frame) == 6  # 3 modes x 2 concurrencies
    base = frame[(frame["mode"] == "baseline") & (frame["concurrency"] == 1)].iloc[0]
    # Llama-3-8B BF16 at B=1: (16,060,522,496 + 1152 * 131,072) B / 3.35e12 B/s = 4.839 ms
    assert base["step_time_ms"] == pytest.approx(
        (16_060_522_496 + 1152 * 131_072) / 3.35e9
    )


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--model", "llama-3-8b", "--concurrency", "0,4"], "--concurrency"),
        (["--model", "llama-3-8b", "--alpha", "1.5"], "--alpha"),
        (["--model", "llama-3-8b", "--gpu", "tpu-v5"], "--gpu"),
        (["--model", "llama-3-8b", "--gpu", "a100", "--dtype", "fp8"], "--dtype"),
        (["--model", "no-such-model"], "--model"),
        (["--draft", "llama-3.2-1b"], "--model"),
        (["--model", "llama-3-8b", "--draft", "params=1e9"], "--draft"),
        (
            ["--model", "llama-3-8b", "--medusa-accuracies", "0.5,x"],
            "--medusa-accuracies",
        ),
        (
            [
                "--model",
                "llama-3-8b",
                "--medusa-accuracies",
                "vicuna-7b",
                "--medusa-tree",
                "mc_sim_7b_63",
            ],
            "--medusa-tree",
        ),  # ranks 5..9 unmeasured
        (["--model", "llama-3-8b", "--from-run", "/nonexistent/run"], "--from-run"),
    ],
)
def test_bad_input_exits_2_naming_the_option(args, option, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["plan", *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert option in err
    assert "Traceback" not in err


def _fit_run_dir(root, baseline="baseline"):
    # baseline TPOT 10 ms (c1), 12 ms (c8). draft-k4: E = 3.3616 (α = 0.8, γ = 4);
    # TPOT c1 = 10 * 1.2 / 3.3616 -> speedup 2.80133, step ratio E/S = 1.2 = 4c + 1 -> c = 0.05
    # c8: TPOT 6 -> speedup 2.0. medusa (3 nodes): 2 tokens/response, TPOT 6.25 -> 1.6,
    # v = 2 / 1.6 = 1.25; c8 TPOT 8 -> 1.5
    rows = [
        summary_row("baseline", 1, tpot=10.0),
        summary_row("baseline", 8, tpot=12.0),
        summary_row("draft-k4", 1, tpot=10 * 1.2 / 3.3616, accept=3.3616),
        summary_row("draft-k4", 8, tpot=6.0, accept=3.3616),
        summary_row("medusa", 1, tpot=6.25, per_response=2.0),
        summary_row("medusa", 8, tpot=8.0, per_response=2.0),
    ]
    write_summary(root, rows, baseline)
    write_build(root, "baseline", "baseline")
    write_build(root, "draft-k4", "draft_target", draft_len=4)
    write_build(root, "medusa", "medusa", choices=[[0], [0, 0], [1]])
    return root


@pytest.mark.parametrize("loadtest_baseline", ["baseline", None])
def test_fit_recovers_alpha_and_cost_ratio(tmp_path, loadtest_baseline):
    # None: the load test ran without --baseline (no speedups in the file); the fit
    # recomputes them against the run's baseline variant.
    run = load_run(_fit_run_dir(tmp_path, loadtest_baseline))
    fits, rows = fit_run(run.summary, run.variants, run.baseline)
    by = {f.variant: f for f in fits}
    assert by["draft-k4"].alpha == pytest.approx(0.8, abs=1e-6)
    assert by["draft-k4"].cost_ratio == pytest.approx(0.05, abs=1e-9)
    assert by["draft-k4"].reference_tier == "c1"
    assert by["medusa"].alpha is None
    assert by["medusa"].cost_ratio == pytest.approx(1.25)
    err = rows.set_index(["variant", "tier"])["error_ratio"]
    assert err[("draft-k4", "c1")] == pytest.approx(0.0, abs=1e-9)
    assert err[("draft-k4", "c8")] == pytest.approx(3.3616 / 1.2 / 2.0 - 1)  # +40.07 %
    assert err[("medusa", "c8")] == pytest.approx(1.6 / 1.5 - 1)  # +6.67 %


def test_plan_from_run_prints_fit_and_roofline(tmp_path):
    root = _fit_run_dir(tmp_path / "run")
    fit_only = CliRunner().invoke(cli, ["plan", "--from-run", str(root)])
    assert fit_only.exit_code == 0, fit_only.output
    assert "0.800" in fit_only.output and "+40.1%" in fit_only.output
    both = CliRunner().invoke(
        cli,
        [
            "plan",
            "--from-run",
            str(root),
            "--model",
            "llama-3-8b",
            "--draft",
            "llama-3.2-1b",
        ],
    )
    assert both.exit_code == 0, both.output
    assert "roofline" in both.output
    assert "α=0.800" in both.output  # the fitted α replaces --alpha


def _listed(text: str, before: str, after: str) -> list[str]:
    """The comma-separated names between ``before`` and ``after`` in ``text``, whitespace
    runs folded first (help text is wrapped)."""
    flat = " ".join(text.split()) + " END"
    inner = flat.split(before, 1)[1].split(after, 1)[0]
    return [n.strip() for n in inner.split(",") if n.strip()]


@pytest.mark.parametrize(
    "args, option, help_span, error_span",
    [
        # the help listed 5 model presets while the error listed all 10 (issue 51)
        (["--model", "no-such"], "--model", ("a preset (", ")"), ("a preset (", ")")),
        (
            ["--model", "llama-3-8b", "--gpu", "tpu-v5"],
            "--gpu",
            ("GPU preset (per GPU): ", ". "),
            ("use one of ", " END"),
        ),
        (
            ["--model", "llama-3-8b", "--medusa-accuracies", "0.5,x"],
            "--medusa-accuracies",
            ("or a preset: ", " (omit"),
            ("neither a preset (", ")"),
        ),
    ],
)
def test_the_help_lists_the_presets_the_error_accepts(
    args, option, help_span, error_span, capsys
):
    """The presets ``plan --help`` names for an option are the ones its error names."""
    help_text = CliRunner().invoke(cli, ["plan", "--help"], terminal_width=400).output
    with pytest.raises(SystemExit):
        main(["plan", *args])
    in_error = _listed(capsys.readouterr().err, *error_span)
    in_help = _listed(help_text.split(f"{option} ", 1)[1], *help_span)
    assert in_help == in_error
    assert len(in_help) >= 3


def test_the_model_help_names_every_preset_a_plan_accepts():
    """Hand-listed: the model presets of the planner's table (``--help`` used to name
    five; issue 45 added the mixture-of-experts checkpoints, Qwen3-8B and the EAGLE papers'
    68M draft), each of which plans."""
    help_text = CliRunner().invoke(cli, ["plan", "--help"], terminal_width=400).output
    listed = _listed(help_text, "a preset (", ")")
    # the aliases follow, each with the preset it stands for (deepseek-r1 was missing)
    aliases = dict(n.split(" = ") for n in listed if " = " in n)
    assert aliases == {
        "deepseek-r1": "deepseek-v3",
        "llama-3.1-8b": "llama-3-8b",
        "llama-3.3-70b": "llama-3.1-70b",
    }
    listed = [n.split(" = ")[0] for n in listed]
    assert set(listed) - set(aliases) == {
        "llama-3-8b",
        "llama-3.1-70b",
        "llama-3.2-1b",
        "llama-3.2-3b",
        "vicuna-7b",
        "vicuna-13b",
        "codellama-34b",
        "llama-3.1-405b",
        "tinyllama-1.1b",
        "qwama-0.5b",
        "deepseek-v3",
        "llama-4-scout",
        "llama-4-maverick",
        "qwen3-30b-a3b",
        "qwen3-235b-a22b",
        "gpt-oss-120b",
        "mixtral-8x7b",
        "qwen3-8b",
        "vicuna-68m",
    }
    for name in listed:
        result = CliRunner().invoke(
            cli, ["plan", "--model", name, "--concurrency", "1"]
        )
        assert result.exit_code == 0, (name, result.output)


def test_the_planner_doc_lists_the_presets_the_planner_has():
    """docs/planner.md names the same presets as the registries ``--help`` and the errors
    read (the README used to list four GPUs and no model presets)."""
    from tests.support.data import REPO_ROOT
    from trtbench.plan.gpus import GPUS
    from trtbench.plan.model_shapes import PRESET_CONFIGS
    from trtbench.plan.settings import MEDUSA_ACCURACY_PRESETS

    doc = (REPO_ROOT / "docs" / "planner.md").read_text()
    assert _listed(doc, "is a model preset (", ")") == list(PRESET_CONFIGS)
    assert _listed(doc, "`--gpu` a GPU preset (", ")") == sorted(GPUS)
    assert _listed(doc, "a table or a preset (", ")") == list(MEDUSA_ACCURACY_PRESETS)
