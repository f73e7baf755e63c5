"""Per-tier TPOT prediction (``trtbench.plan.tier_fit``) on hand-worked synthetic runs.

Synthetic run: baseline TPOT = 2 + 0.5·B ms exactly at c1, c2, c4 (a partial c8 tier that
would break the line is excluded); prefill at c1 = t(1) + τ·(ISL − 1) = 2.5 + 0.1·10 = 3.5 ms
(ISL 11), so τ = 0.1 ms. Variant ``draft`` (K = 2, q = 3): per-position hits 80, 40 of 100
drafted row-steps -> a1 = 0.8, a2 = 0.5, E = 1 + 0.8 + 0.8·0.5 = 2.2 (10 requests x 20 decode
tokens - 120 accepted = 80 row-steps < 100 drafted: share s = 1). Verify pass
verify(B) = t(B) + 0.1·B·2 = 2.7 (c1), 3.4 (c2), 4.8 ms (c4). Measured steps (TPOT·E) 5.2,
7.9, 6.8 ms imply ρ_i = (step − verify) / t(B) = 2.5/2.5 = 1.0, 4.5/3 = 1.5, 2/4 = 0.5.
Leave-one-out ρ (median of the other two): c1 median(1.5, 0.5) = 1.0,
c2 median(1.0, 0.5) = 0.75, c4 median(1.0, 1.5) = 1.25; predicted steps ρ·t(B) + verify(B):
5.2, 0.75·3 + 3.4 = 5.65, 1.25·4 + 4.8 = 9.8 ms.
"""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support.run_factory import summary_row, write_build, write_summary
from trtbench.cli import cli
from trtbench.core.export import write_csv
from trtbench.core.run_dir import RunDir
from trtbench.plan.tier_fit import (
    TPOT,
    error_medians,
    fit_step_curve,
    fit_tiers,
    leave_one_out,
    median_abs_error,
)
from trtbench.plan.tier_stall import with_stall
from trtbench.plan.tier_tokens import chain_tokens_from_positions
from trtbench.profiling.loadtest.stats.acceptance import ACCEPTANCE_SCHEMA
from trtbench.profiling.report.comparison import summary_column
from trtbench.profiling.report.run_data import load_run
from trtbench.profiling.report.variant_info import VariantInfo

E = 2.2
MEASURED_STEP = {1: 5.2, 2: 7.9, 4: 6.8}
MEASURED = {c: step / E for c, step in MEASURED_STEP.items()}
PREDICTED_STEP = [5.2, 5.65, 9.8]
ERRORS = [0.0, 5.65 / 7.9 - 1, 9.8 / 6.8 - 1]


def _row(variant, c, tpot, status="complete", **extra):
    row = summary_row(variant, c, tpot=tpot)
    row.update(
        {
            "tier_status": status,
            "request_count": 10,
            summary_column("output_sequence_length"): 21.0,
            summary_column("input_sequence_length"): 11.0,
            **extra,
        }
    )
    return row


def _rows(with_partial=True):
    prefill = summary_column("server_prefill_time")
    rows = [_row("baseline", c, 2 + 0.5 * c) for c in (2, 4)]
    rows.insert(0, _row("baseline", 1, 2.5, **{prefill: 3.5}))
    rows += [_row("draft", c, MEASURED[c]) for c in (1, 2, 4)]
    if with_partial:
        rows += [
            _row("baseline", 8, 40.0, "partial"),
            _row("draft", 8, 40.0, "partial"),
        ]
    return rows


def _acceptance(variant="draft", tiers=("c1", "c2", "c4", "c8")):
    return pd.DataFrame(
        [
            (variant, t, "position", k, 100, h, h / 100, "server_per_step")
            for t in tiers
            for k, h in ((1, 80), (2, 40))
        ],
        columns=[c.name for c in ACCEPTANCE_SCHEMA],
    )


VARIANTS = {
    "baseline": VariantInfo("baseline", "baseline"),
    "draft": VariantInfo("draft", "draft_target", draft_len=2),
}


def test_chain_tokens_from_positions_hand_worked():
    assert chain_tokens_from_positions([80, 40], 100) == pytest.approx(2.2)
    # half the row-steps drafted: E = 1 + 0.5 x 1.2
    assert chain_tokens_from_positions([80, 40], 100, 0.5) == pytest.approx(1.6)
    assert chain_tokens_from_positions([0, 0], 100) == pytest.approx(1.0)


def test_median_abs_error_ignores_nan():
    assert median_abs_error(pd.Series([-0.3, 0.1, float("nan"), 0.2])) == 0.2
    assert pd.isna(median_abs_error(pd.Series([float("nan")])))


def test_step_curve_recovers_a_b_and_tau():
    base = pd.DataFrame([r for r in _rows(False) if r["variant"] == "baseline"])
    curve = fit_step_curve(base)
    assert curve.a_ms == pytest.approx(2.0)
    assert curve.b_ms == pytest.approx(0.5)
    assert curve.r2 == pytest.approx(1.0)
    assert curve.token_ms == pytest.approx(0.1)
    assert curve.tiers == ("c1", "c2", "c4")
    assert fit_step_curve(base.iloc[:1]) is None  # one tier: no slope


def test_leave_one_out_predictions_errors_and_partial_tiers_excluded():
    summary = pd.DataFrame(_rows())
    result = fit_tiers(summary, VARIANTS, "baseline", _acceptance())
    assert result.curve.b_ms == pytest.approx(0.5)  # the partial c8 (40 ms) not fitted
    assert result.excluded == ("baseline c8 (partial)", "draft c8 (partial)")
    rows = result.rows.set_index("tier")
    assert list(rows.index) == ["c1", "c2", "c4"]
    assert rows["tokens_per_step"].tolist() == pytest.approx([E] * 3)
    assert rows["e_source"].unique().tolist() == ["per_position"]
    # no records given: B = the concurrency, said per row and in the notes
    assert rows["batch"].tolist() == [1.0, 2.0, 4.0]
    assert rows["batch_source"].unique().tolist() == ["concurrency"]
    assert any(
        "client concurrency where the request/response" in n for n in result.notes
    )
    assert rows["implied_overhead_ratio"].tolist() == pytest.approx([1.0, 1.5, 0.5])
    assert rows["overhead_ratio"].tolist() == pytest.approx([1.0, 0.75, 1.25])
    assert rows["role"].tolist() == ["predicted"] * 3  # every tier out of sample
    assert rows["predicted_step_ms"].tolist() == pytest.approx(PREDICTED_STEP)
    assert rows["predicted_tpot_ms"].tolist() == pytest.approx(
        [x / E for x in PREDICTED_STEP]
    )
    assert rows["error_ratio"].tolist() == pytest.approx(ERRORS)
    # speedup vs the baseline TPOT measured at the same concurrency
    assert rows.loc["c2", "predicted_speedup_ratio"] == pytest.approx(3.0 / (5.65 / E))
    medians = error_medians(result.rows)  # |0|, 28.5 %, 44.1 %
    assert medians["draft"] == pytest.approx(1 - 5.65 / 7.9)
    assert medians["overall"] == medians["draft"]


def test_leave_one_out_by_hand():
    assert leave_one_out([1.0, 2.0, 4.0]) == pytest.approx([3.0, 2.5, 1.5])
    assert leave_one_out([1.0, float("nan"), 4.0])[1] == pytest.approx(2.5)
    assert all(pd.isna(x) for x in leave_one_out([1.0]))  # nothing else to take ρ from


def test_effective_batch_moves_the_curve_and_the_prediction():
    # baseline B_eff = c (the curve is unchanged); draft c4 decoded with B_eff = 3:
    # t(3) = 3.5, verify(3) = 3.5 + 0.1·3·2 = 4.1, ρ_c4 = (6.8 − 4.1) / 3.5 = 27/35;
    # its LOO ρ is still median(1.0, 1.5) = 1.25 -> step 1.25·3.5 + 4.1 = 8.475 ms
    batch = pd.DataFrame(
        [("baseline", f"c{c}", float(c), 10) for c in (1, 2, 4)]
        + [("draft", "c4", 3.0, 10)],
        columns=["variant", "tier", "batch_effective", "requests_count"],
    )
    result = fit_tiers(
        pd.DataFrame(_rows()), VARIANTS, "baseline", _acceptance(), batch
    )
    rows = result.rows.set_index("tier")
    assert rows["batch"].tolist() == [1.0, 2.0, 3.0]
    assert rows["batch_source"].tolist() == ["concurrency", "concurrency", "records"]
    assert rows.loc["c4", "implied_overhead_ratio"] == pytest.approx(27 / 35)
    assert rows.loc["c4", "predicted_step_ms"] == pytest.approx(8.475)
    assert rows.loc["c4", "error_ratio"] == pytest.approx(8.475 / 6.8 - 1)
    # c1: median(1.5, 27/35)
    assert rows.loc["c1", "overhead_ratio"] == pytest.approx((1.5 + 27 / 35) / 2)


def test_with_stall_is_admissions_times_prefill():
    prefill = summary_column("server_prefill_time")
    rows = pd.DataFrame(
        {
            "admissions_per_token": [0.25, float("nan"), 0.5],
            prefill: [4.0, 4.0, float("nan")],
        }
    )
    out = with_stall(rows)
    assert out["stall_ms"].tolist() == [1.0, 0.0, 0.0]  # 0.25 x 4 ms; else left out
    assert out["stall_source"].tolist() == ["records", "none", "none"]
    bare = with_stall(pd.DataFrame({"variant": ["x"]}))  # neither column: no stall
    assert bare["stall_ms"].tolist() == [0.0] and bare["stall_source"].iloc[0] == "none"


def test_prefill_stall_is_taken_out_before_the_fit_and_added_back_undivided():
    # Same decode steps as the module doc, plus a prefill stall S = A·P per output token:
    # baseline c2, c4: A = 0.05, 0.1 per token, P = 4 ms -> S = 0.2, 0.4 ms, measured
    # TPOT = 2 + 0.5·c + S = 3.2, 4.4 (c1: A = 0, S = 0, TPOT 2.5, prefill 3.5 -> τ 0.1).
    # draft c2, c4: A = 0.1, 0.2, P = 5 ms -> S = 0.5, 1.0 ms, TPOT = step/E + S.
    # The curve is a = 2, b = 0.5 exactly again, ρ_i and the predicted steps are those of
    # the module doc, and the prediction is step/E + S (S NOT divided by E).
    prefill = summary_column("server_prefill_time")
    stall = {
        ("baseline", 2): 0.2,
        ("baseline", 4): 0.4,
        ("draft", 2): 0.5,
        ("draft", 4): 1.0,
    }
    rows = [_row("baseline", 1, 2.5, **{prefill: 3.5})]
    rows += [
        _row("baseline", c, 2 + 0.5 * c + stall["baseline", c], **{prefill: 4.0})
        for c in (2, 4)
    ]
    rows += [
        _row("draft", c, MEASURED[c] + stall.get(("draft", c), 0.0), **{prefill: 5.0})
        for c in (1, 2, 4)
    ]
    admissions = {
        ("baseline", 1): 0.0,
        ("baseline", 2): 0.05,
        ("baseline", 4): 0.1,
        ("draft", 1): 0.0,
        ("draft", 2): 0.1,
        ("draft", 4): 0.2,
    }
    batch = pd.DataFrame(
        [(v, f"c{c}", float(c), a, 10) for (v, c), a in admissions.items()],
        columns=[
            "variant",
            "tier",
            "batch_effective",
            "admissions_per_token",
            "requests_count",
        ],
    )
    result = fit_tiers(pd.DataFrame(rows), VARIANTS, "baseline", _acceptance(), batch)
    c = result.curve
    assert (c.a_ms, c.b_ms, c.r2, c.token_ms) == pytest.approx((2.0, 0.5, 1.0, 0.1))
    got = result.rows.set_index("tier")
    assert got["prefill_stall_ms"].tolist() == pytest.approx([0.0, 0.5, 1.0])
    assert got["stall_source"].unique().tolist() == ["records"]
    assert got["implied_overhead_ratio"].tolist() == pytest.approx([1.0, 1.5, 0.5])
    assert got["predicted_step_ms"].tolist() == pytest.approx(PREDICTED_STEP)
    pred = [5.2 / E, 5.65 / E + 0.5, 9.8 / E + 1.0]
    meas = [MEASURED[1], MEASURED[2] + 0.5, MEASURED[4] + 1.0]
    assert got["predicted_tpot_ms"].tolist() == pytest.approx(pred)
    assert got["error_ratio"].tolist() == pytest.approx(
        [p / m - 1 for p, m in zip(pred, meas, strict=True)]
    )
    assert not any("prefill stall S = 0" in n for n in result.notes)


def test_a_variant_with_one_tier_is_not_predicted():
    summary = pd.DataFrame(_rows(False) + [_row("solo", 1, MEASURED[1])])
    variants = {**VARIANTS, "solo": VariantInfo("solo", "draft_target", draft_len=2)}
    result = fit_tiers(summary, variants, "baseline", _acceptance("solo", ("c1",)))
    solo = result.rows[result.rows["variant"] == "solo"].iloc[0]
    assert solo["role"] == "not_predicted"
    assert solo["implied_overhead_ratio"] == pytest.approx(1.0)
    assert pd.isna(solo["predicted_tpot_ms"]) and pd.isna(solo["error_ratio"])
    assert any(n.startswith("solo: cannot predict") for n in result.notes)
    assert "solo" not in error_medians(result.rows)


def test_no_acceptance_table_falls_back_to_tokens_per_response():
    summary = pd.DataFrame(_rows(False))
    tpr = summary_column("tokens_per_response")
    summary[tpr] = [1.0, 1.0, 1.0, E, E, E]
    result = fit_tiers(summary, VARIANTS, "baseline", None)
    assert result.rows["e_source"].unique().tolist() == ["tokens_per_response"]
    assert result.rows["tokens_per_step"].tolist() == pytest.approx([E] * 3)
    assert any("no per-position acceptance" in n for n in result.notes)
    # same E, so the same predictions as with the table
    assert result.rows["predicted_step_ms"].tolist() == pytest.approx(PREDICTED_STEP)


def test_ngram_share_of_drafting_row_steps():
    # 10 requests x 20 decode tokens = 200; 100 row-steps drafted, 60 + 20 accepted:
    # row-steps = 200 - 80 = 120, share s = 100/120, E = 1 + s·(0.6 + 0.2) = 1.6667
    summary = pd.DataFrame(
        [r for r in _rows(False) if r["variant"] == "baseline"]
        + [_row("ng", 1, 2.0), _row("ng", 2, 2.5)]
    )
    acc = pd.DataFrame(
        [
            ("ng", t, "position", k, 100, h, h / 100, "server_per_step")
            for t in ("c1", "c2")
            for k, h in ((1, 60), (2, 20))
        ],
        columns=[c.name for c in ACCEPTANCE_SCHEMA],
    )
    variants = {**VARIANTS, "ng": VariantInfo("ng", "ngram", draft_len=2)}
    rows = fit_tiers(summary, variants, "baseline", acc).rows.set_index("tier")
    s = 100 / 120
    assert rows.loc["c1", "tokens_per_step"] == pytest.approx(1 + s * 0.8)
    # two tiers: c2 takes the ρ c1 implies (leave-one-out), ρ = (2.0·E − t(1) − τ·2·s) / t(1);
    # c2: step = (1+ρ)·t(2) + τ·2·2·(1 − (1 − s)^2)
    e = 1 + s * 0.8
    rho = (2.0 * e - 2.5 - 0.1 * 2 * s) / 2.5
    step = (1 + rho) * 3.0 + 0.1 * 4 * (1 - (1 - s) ** 2)
    assert rows.loc["c2", "predicted_tpot_ms"] == pytest.approx(step / e)


def test_plan_from_run_prints_the_tier_table_and_writes_csv(tmp_path):
    root = tmp_path / "run"
    write_summary(root, _rows())
    write_build(root, "baseline", "baseline")
    write_build(root, "draft", "draft_target", draft_len=2)
    write_csv(_acceptance(), RunDir(root).acceptance_csv, ACCEPTANCE_SCHEMA)
    assert load_run(root).variants["draft"].draft_len == 2
    out = CliRunner().invoke(cli, ["plan", "--from-run", str(root)])
    assert out.exit_code == 0, out.output
    text = out.output
    assert "t(B) = 2.000 ms + 0.500 ms x B (R² 1.000, tiers c1, c2, c4)" in text
    assert "τ = 0.100 ms" in text
    line = next(x for x in text.splitlines() if x.split()[:2] == ["draft", "c4"])
    # B = 4 from the concurrency (no records: marked c); ρ implied 0.50, others 1.25
    assert line.split()[2:6] == ["4.00", "c", "-", "predicted"]  # no stall: "-"
    assert "+44.1%" in line and "3.091" in line.split()  # measured 6.8 / 2.2
    assert "0.50" in line.split() and "1.25" in line.split()
    assert "overall 28.5%" in text  # median of 0 %, 28.5 %, 44.1 %
    assert "Target median |error| <= 10%: NOT met" in text
    assert (
        "Excluded (tier not complete): baseline c8 (partial); draft c8 (partial)"
        in text
    )
    csv = pd.read_csv(root / "plan" / "fit_tiers.csv")
    assert csv["error_ratio"].tolist() == pytest.approx(ERRORS)
    assert csv["batch_source"].unique().tolist() == ["concurrency"]
    assert csv["stall_source"].unique().tolist() == ["none"]
    assert csv["prefill_stall_ms"].tolist() == [0.0, 0.0, 0.0]
    assert TPOT  # the TPOT column name is the summary's mean
