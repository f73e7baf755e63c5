"""``trtbench run`` end to end on the small real models: build → deploy → tiers → CSVs.

Three variants (baseline, draft-target, Medusa) on the reference backend, each served by its
own tritonserver, two concurrency tiers of a few fixed-length requests.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil

import pandas as pd
import pytest

from tests.support.run_specs import reference_run_spec, write_spec
from trtbench.cli import main
from trtbench.triton_repo.ports import port_in_use

pytestmark = pytest.mark.integration

OUTPUT_TOKENS = 12
REQUESTS = 4


@pytest.fixture(scope="module")
def finished_run(tiny_models, tmp_path_factory):
    """Run the spec once for the module; return (run dir, exit code, stdout, stderr)."""
    root = tmp_path_factory.mktemp("run")
    spec = reference_run_spec(
        "pipeline-test",
        tiny_models,
        [
            {"name": "base", "mode": "baseline"},
            {"name": "dt", "mode": "draft_target", "max_draft_len": 3},
            {"name": "med", "mode": "medusa", "medusa_choices": [[0], [0, 0], [1]]},
        ],
        max_batch_size=4,
        deploy={"ready_timeout_s": 120},
        profile={"memory_interval_ms": 50, "metrics_interval_ms": 200},
        requests=REQUESTS,
        output_tokens=OUTPUT_TOKENS,
        slo_ttft_ms=60000,
    )
    spec_path = write_spec(root, spec)
    out = root / "out"
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            main(["run", str(spec_path), "--out", str(out)])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return out, code, stdout.getvalue(), stderr.getvalue()


def test_run_writes_a_summary_row_per_variant_and_tier(finished_run, capsys):
    out, code, _, _ = finished_run
    assert code == 0
    summary = pd.read_csv(out / "loadtest" / "summary.csv")
    assert list(zip(summary["variant"], summary["tier"], strict=True)) == [
        (v, t) for v in ("base", "dt", "med") for t in ("c1", "c2")
    ]
    assert (summary["error_count"] == 0).all()
    assert (summary["request_count"] == REQUESTS).all()
    # Fixed lengths (min tokens = max tokens): every request returns exactly 12 tokens.
    assert (summary["output_sequence_length_mean_tokens"] == OUTPUT_TOKENS).all()
    assert (summary["osl_mismatch_count"] == 0).all()
    base = summary[summary["variant"] == "base"]
    assert (base["tpot_speedup_ratio"] == 1.0).all()
    assert (base["output_token_throughput_speedup_ratio"] == 1.0).all()
    spec_rows = summary[summary["variant"] != "base"]
    assert spec_rows["tpot_speedup_ratio"].notna().all()
    # The speculative variants report draft counts: 0 ≤ rate ≤ 1, acceptance length ≥ 1.
    assert spec_rows["draft_acceptance_rate_per_request_mean_ratio"].between(0, 1).all()
    assert (spec_rows["acceptance_length_per_request_mean_tokens"] >= 1).all()
    assert spec_rows["draft_acceptance_rate_ratio"].between(0, 1).all()
    assert (spec_rows["acceptance_length_tokens"] >= 1).all()
    assert (spec_rows["spec_decode_counts_source"] == "server_per_step").all()
    assert base["spec_decode_counts_source"].isna().all()  # nothing proposed
    # acceptance.csv: position rates j = 1..K for every speculative variant and tier.
    acc = pd.read_csv(out / "loadtest" / "acceptance.csv")
    pos = acc[acc["kind"] == "position"]
    assert set(zip(pos["variant"], pos["tier"], strict=True)) == {
        (v, t) for v in ("dt", "med") for t in ("c1", "c2")
    }
    assert pos["value_ratio"].between(0, 1).all()
    assert (pos.groupby(["variant", "tier"])["draft_position"].min() == 1).all()
    # A generous TTFT SLO: every request is good.
    assert (summary["good_request_fraction_ratio"] == 1.0).all()


def test_terminal_shows_stages_and_results_while_info_goes_to_the_run_log(finished_run):
    out, code, _, err = finished_run
    assert code == 0
    assert "INFO" not in err  # no log records below WARNING on the terminal
    # Off a terminal each stage ends with one line; 3 variants × 2 tiers × 1 round = 6 cells.
    for line in (
        "build: 3 of 3 variants in ",
        "deploy: 3 of 3 servers in ",
        "load test: 6 of 6 cells in ",
    ):
        assert re.search(rf"^{re.escape(line)}\d+:\d\d$", err, re.M), err
    log = (out / "trtbench.log").read_text()
    assert log.startswith("=== ") and "trtbench run" in log.splitlines()[0]
    for name, mode in (("base", "baseline"), ("dt", "draft_target"), ("med", "medusa")):
        assert f"built {name}: reference {mode}" in log
        assert re.search(
            rf"INFO \S+: {name}: serving ensemble at \S+:\d+ \(ready after", log
        )
    # one line per cell with what it measured
    cells = re.findall(
        rf"tier_pass: (\w+) (c[12]): {REQUESTS} requests, 0 failed, complete; "
        r"[\d.]+ out tok/s, [\d.]+ s wall$",
        log,
        re.M,
    )
    assert sorted(cells) == [
        (v, t) for v in ("base", "dt", "med") for t in ("c1", "c2")
    ]
    assert (
        "INFO trtbench.core.managed_process: starting" in log
    )  # the tritonserver launch
    assert f"model repository {out / 'model_repo' / 'med'} written" in log


def test_run_writes_profiles_and_run_json(finished_run):
    out, _, _, _ = finished_run
    memory = pd.read_csv(out / "memory.csv")
    assert set(memory["variant"]) == {"base", "dt", "med"}
    assert {"load", "warmup", "tier:c1", "tier:c2"} <= set(memory["phase"])
    metrics = pd.read_csv(out / "server_metrics.csv")
    assert "tier:c2" in set(metrics["phase"])
    assert metrics["family"].str.startswith("nv_inference").any()
    breakdown = pd.read_csv(out / "memory_breakdown.csv")
    assert list(breakdown["variant"]) == ["base", "dt", "med"]
    run = json.loads((out / "run.json").read_text())
    assert run["run"]["variants"]["med"]["tiers_done"] == ["c1", "c2"]
    assert run["run"]["interrupted"] is False
    requests = pd.read_csv(out / "loadtest" / "requests.csv")
    assert set(requests["output_token_source"]) == {"output_ids"}
    assert set(requests["input_token_source"]) == {"tokenizer"}
    # The same prompts went to every variant.
    by_variant = requests.groupby("variant")["input_tokens"].apply(list)
    assert by_variant["base"] == by_variant["dt"] == by_variant["med"]


def test_run_ends_with_the_report(finished_run):
    out, _, _, _ = finished_run
    report = (out / "report.md").read_text()
    # The report is titled after the run directory and names the spec's baseline variant.
    assert report.startswith(f"# trtbench report: {out.name}\n")
    assert "Baseline: `base`." in report
    # One comparison-matrix row per variant, with its mode.
    for row in ("| base | baseline |", "| dt | draft_target |", "| med | medusa |"):
        assert row in report
    # What the data allows: latency and throughput always; a baseline gives speedups; the
    # speculative variants give tokens per step; memory_breakdown.csv gives memory bars.
    # No trace was recorded, so no launch-overhead plot.
    plots = {p.name for p in (out / "plots").glob("*.png")}
    assert plots == {
        "ttft.png",
        "tpot.png",
        "throughput.png",
        "speedup.png",
        "acceptance.png",
        "memory.png",
    }
    assert all((out / "plots" / name).stat().st_size > 1000 for name in plots)
    # The run prints where the report and the plots went, in one line.
    _, _, stdout, _ = finished_run
    (wrote,) = [line for line in stdout.splitlines() if line.startswith("wrote ")]
    assert f", {out / 'report.md'}, {len(plots)} plots in {out / 'plots'}/" in wrote


def test_every_server_was_stopped(finished_run):
    out, _, _, _ = finished_run
    for variant in ("base", "dt", "med"):
        log = (out / "server" / f"{variant}.log").read_text()
        ports = [
            int(p) for p in re.findall(r"GRPCInferenceService at [\d.]+:(\d+)", log)
        ]
        assert ports, f"no gRPC port in the {variant} server log"
        assert not port_in_use(ports[0])


def test_every_output_is_recorded_and_equals_the_baseline(finished_run):
    """Greedy draft-target and Medusa over float32 must reproduce the baseline exactly."""
    out, _, _, err = finished_run
    outputs = pd.read_csv(
        out / "loadtest" / "outputs.csv", dtype={"output_token_ids": str}
    )
    assert len(outputs) == 3 * 2 * REQUESTS  # variants × tiers × requests, none failed
    assert set(outputs["output_kind"]) == {"ids"}
    lengths = outputs["output_token_ids"].str.split().str.len()
    assert (lengths == OUTPUT_TOKENS).all() and (
        outputs["output_tokens"] == lengths
    ).all()
    # Independent check: the same request index gives the same ids in every variant/tier.
    assert outputs.groupby("request_index")["output_token_ids"].nunique().eq(1).all()
    summary = pd.read_csv(out / "loadtest" / "summary.csv").set_index("variant")
    assert (summary.loc["base", "lossless_status"] == "baseline").all()
    spec = summary.loc[["dt", "med"]]
    assert (spec["lossless_status"] == "ok").all()
    assert (spec["lossless_compared_count"] == REQUESTS).all()
    assert (spec["lossless_match_ratio"] == 1.0).all()
    assert "lossless gate" not in err
    report = (out / "report.md").read_text()
    assert "## Lossless gate" in report
    assert "Every compared output equals the baseline's." in report


def test_a_corrupted_output_is_reported_as_a_mismatch_at_its_index(
    finished_run, tmp_path
):
    out, _, _, _ = finished_run
    copy = tmp_path / out.name
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("model_repo", "server"))
    path = copy / "loadtest" / "outputs.csv"
    outputs = pd.read_csv(path, dtype={"output_token_ids": str, "output_digest": str})
    row = outputs.index[(outputs["variant"] == "dt") & (outputs["tier"] == "c2")][1]
    ids = outputs.at[row, "output_token_ids"].split()
    ids[5] = str(int(ids[5]) + 1)  # one id changed at output index 5
    outputs.at[row, "output_token_ids"] = " ".join(ids)
    # the digest is left as it was: the ids decide
    outputs.to_csv(path, index=False)
    code = main_exit_code(["report", str(copy)])
    assert code == 0
    report = (copy / "report.md").read_text()
    section = report.split("### Lossless gate", 1)[1].split("\n### ", 1)[0]
    assert (
        f"| dt | c2 | {REQUESTS} | {REQUESTS - 1} | 75.0 | 5 / 5 | **BELOW 100 %** |"
        in section
    )
    assert f"| dt | c1 | {REQUESTS} | {REQUESTS} | 100.0 | - | ok |" in section


def main_exit_code(argv: list[str]) -> int:
    """Run the CLI in-process; its exit status."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_a_server_that_does_not_start_is_recorded_in_the_log_and_run_json(
    tiny_models, tmp_path, capsys
):
    """The terminal's error line is also what trtbench.log and run.json keep: a server
    given 0.05 s to be ready (it needs seconds) fails its start."""
    spec = reference_run_spec(
        "no-start",
        tiny_models,
        [{"name": "base", "mode": "baseline"}],
        max_batch_size=2,
        deploy={"ready_timeout_s": 0.05},
        profile={},
        requests=2,
        output_tokens=4,
    )
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(write_spec(tmp_path, spec)), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_.value.code == 2, err
    assert err.startswith("trtbench: error: ") and "was not ready after 0.05 s" in err
    message = err.removeprefix("trtbench: error: ")
    failure = json.loads((out / "run.json").read_text())["run"]["failure"]
    assert failure == {"error": "ServerStartError", "message": message}
    log = (out / "trtbench.log").read_text().splitlines()
    assert log[-1].endswith(f"ERROR trtbench: error: {message} (exit 2)"), log[-1]
