"""The planner's terms beyond the roofline, hand-worked: launch cost (CUDA graphs and eager),
achieved bandwidth, speculation machinery, the draft's own tp group, and ``--from-trace``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support.synth_nsys import write_graph_node_export
from trtbench.cli import cli, main
from trtbench.core.errors import ConfigError, DataFileError
from trtbench.core.methods import BASELINE, DRAFT_TARGET
from trtbench.plan.gpus import GPUS
from trtbench.plan.model_shapes import resolve_model
from trtbench.plan.overheads import (
    PURE_ROOFLINE,
    LaunchCost,
    Machinery,
    launch_from_steps,
)
from trtbench.plan.parallel import Parallelism
from trtbench.plan.planner import (
    DraftSetup,
    PlanInputs,
    check_inputs,
    estimate_step,
    forward_pass_cost,
)
from trtbench.profiling.traces.schemas import STEP_SCHEMA

LLAMA8_BYTES = (
    16_060_522_496  # Llama-3-8B BF16 weights (test_plan_cli.py works them out)
)
KV_B1 = 1152 * 131_072  # decode context 1024 + 256/2 tokens x 131,072 B


def test_graph_pass_adds_the_launch_and_a_cost_per_node():
    # 14 x 32 + 8 = 456 kernels; 20 µs + 456 x 0.5 µs = 248 µs on top of the GPU's 5 ms
    assert LaunchCost().pass_s(32, 5e-3) == pytest.approx(5e-3 + 248e-6)


def test_eager_pass_is_paced_by_the_slower_of_host_and_gpu():
    eager = LaunchCost(cuda_graphs=False)
    # 456 launches x 6 µs = 2.736 ms of host time
    assert eager.pass_s(32, 1e-3) == pytest.approx(2.736e-3)  # host-bound
    assert eager.pass_s(32, 5e-3) == pytest.approx(5e-3)  # GPU-bound


LLAMA8_FLOPS_B1 = (
    2 * 7_504_658_432 + 4 * 32 * 4096 * 1152
)  # matmuls + attention, 1 token


def test_default_baseline_step_by_hand():
    """Llama-3-8B BF16 on one H100 at B = 1: bytes at 72 % of 3.35 TB/s, plus the shipped
    default line's not-overlapped share of the FLOP time (at its compute efficiency), the
    248 µs of launches and one sequence's step cost; the kernel floor (456 kernels) stays
    below the memory time."""
    from trtbench.plan.engines import read_engine_terms

    terms = read_engine_terms()["default"]
    args = ["plan", "--model", "llama-3-8b", "--concurrency", "1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    memory_s = (LLAMA8_BYTES + KV_B1) / (3.35e12 * 0.72)
    flops_s = LLAMA8_FLOPS_B1 / (989e12 * terms.compute_efficiency)
    assert 456 * terms.kernel_us * 1e-6 < memory_s
    expected_ms = (
        memory_s
        + terms.serial_share * flops_s
        + 248e-6
        + terms.machinery.sequence_us * 1e-6
    ) * 1e3
    row = next(line for line in result.output.splitlines() if line.startswith("1 "))
    assert row.split()[2] == f"{expected_ms:.4g}"
    assert "launch cost (defaults): 14 kernels per layer + 8 per pass" in result.output
    assert "achieved bandwidth 72% of peak" in result.output


def _inputs(**kw) -> PlanInputs:
    base = dict(
        target=resolve_model("llama-3.1-70b"),
        gpu=GPUS["h100-sxm"],
        input_len=1024,
        output_len=256,
        concurrencies=(4,),
        draft=DraftSetup(resolve_model("llama-3.2-1b"), 4, 0.7),
        parallel=Parallelism(tp=8),
        **PURE_ROOFLINE,
    )
    base.update(kw)
    return PlanInputs(**base)


def test_machinery_is_per_pass_and_per_verified_token_of_a_speculative_step():
    """B = 4, γ = 4 (5 passes, 5 verified tokens per sequence): 10 µs x 5 + 3 µs x 4 x 5 =
    110 µs on the draft step only; 2 µs per sequence on every step (8 µs at B = 4)."""
    plain = _inputs()
    with_machinery = _inputs(machinery=Machinery(10.0, 3.0, 2.0))
    spec = estimate_step(with_machinery, DRAFT_TARGET, 4).step_s
    assert spec - estimate_step(plain, DRAFT_TARGET, 4).step_s == pytest.approx(118e-6)
    assert estimate_step(with_machinery, BASELINE, 4).step_s == pytest.approx(
        estimate_step(plain, BASELINE, 4).step_s + 8e-6
    )


def test_a_draft_on_one_gpu_reads_all_its_weights_and_sends_nothing():
    inputs = _inputs(draft_tp=1)
    draft = inputs.draft
    assert draft is not None
    cost = forward_pass_cost(inputs, draft.model, 1, 1, inputs.draft_parallel)
    assert cost.communication_s == 0.0
    kv = 1152 * draft.model.kv_bytes_per_token(2.0)  # one GPU holds all of its KV
    assert cost.bytes_moved == pytest.approx(draft.model.params * 2.0 + kv)
    on_tp8 = forward_pass_cost(_inputs(), draft.model, 1, 1)
    assert on_tp8.communication_s > 0  # 2 all-reduces per layer over 8 GPUs
    with pytest.raises(ConfigError, match="--draft-tp 16 exceeds the 8 GPU"):
        check_inputs(_inputs(draft_tp=16))


def write_steps(path: Path, rows: list[dict]) -> Path:
    """A steps.csv with the schema's columns; what a row does not give is 0."""
    frame = pd.DataFrame(rows).reindex(columns=[c.name for c in STEP_SCHEMA])
    frame = frame.fillna(0)
    frame["s_name"] = "decode_step"
    frame.to_csv(path, index=False)
    return path


def test_launch_cost_from_a_graph_trace_by_hand(tmp_path):
    """Three graph steps of 900, 900 and 1000 kernels (median 900; 80 layers: 11.25 per
    layer), one graph launch of 30, 40, 35 µs (median 35), idle 450, 540, 600 µs (per
    kernel 0.5, 0.6, 0.6 µs: median 0.6)."""
    steps = [
        dict(step=i, kernels=k, graph_launches=1, launch_calls=1, launch_overhead_ns=o)
        | dict(gpu_idle_ns=idle)
        for i, (k, o, idle) in enumerate(
            [(900, 30_000, 450_000), (900, 40_000, 540_000), (1000, 35_000, 600_000)]
        )
    ]
    launch = launch_from_steps(write_steps(tmp_path / "steps.csv", steps), 80)
    assert launch.cuda_graphs
    assert launch.kernels_per_layer == pytest.approx(11.25)
    assert launch.kernels_per_pass == 0
    assert launch.graph_launch_us == pytest.approx(35.0)
    assert launch.node_us == pytest.approx(0.6)
    # the folder works too
    assert launch_from_steps(tmp_path, 80).kernels_per_layer == pytest.approx(11.25)


def test_launch_cost_from_an_eager_trace_by_hand(tmp_path):
    """Eager steps of 500 launches taking 3.0 and 4.0 ms of host time (6 and 8 µs each:
    median 7)."""
    steps = [
        dict(step=i, kernels=500, launch_calls=500, launch_overhead_ns=ns)
        for i, ns in enumerate([3_000_000, 4_000_000])
    ]
    launch = launch_from_steps(write_steps(tmp_path / "steps.csv", steps), 32)
    assert not launch.cuda_graphs
    assert launch.launch_us == pytest.approx(7.0)
    assert launch.kernels(32) == pytest.approx(500)


def test_bad_traces_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        launch_from_steps(tmp_path / "nowhere", 32)
    with pytest.raises(ConfigError, match="no steps.csv there"):
        launch_from_steps(tmp_path, 32)
    # the top folder of `analyze` over several ranks: one folder per rank, named
    ranks = tmp_path / "ranks"
    for rank in ("report_rank0", "report_rank1"):
        (ranks / rank).mkdir(parents=True)
        write_steps(ranks / rank / "steps.csv", [dict(step=0)])
    with pytest.raises(
        ConfigError,
        match=r"per-rank analysis of 2 trace\(s\); give one rank's folder, e.g. "
        r".*report_rank0 \(ranks: report_rank0, report_rank1\)",
    ):
        launch_from_steps(ranks, 32)
    whole = [dict(step=0, kernels=64, launch_calls=64, launch_overhead_ns=13_198_375)]
    frame = write_steps(tmp_path / "whole.csv", whole)
    text = frame.read_text().replace("decode_step", "whole_trace")
    frame.write_text(text)
    with pytest.raises(ConfigError, match="no decode steps"):
        launch_from_steps(frame, 32)
    with pytest.raises(ConfigError, match="no step launched a kernel"):
        launch_from_steps(write_steps(tmp_path / "steps.csv", [dict(step=0)]), 32)
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DataFileError):
        launch_from_steps(tmp_path / "other.csv", 32)


def test_plan_from_the_steps_that_analyze_nsys_wrote(tmp_path, capsys):
    """From steps.csv and from steps.parquet (``--format parquet``). The synthetic export's
    two steps: eager (2 kernels, 2 launches, 40 ns of host time)
    and one graph launch (3 nodes, 50 ns): medians 2.5 kernels, 0.5 graph launches (eager),
    (20 + 50) / 2 = 35 ns per call; over Llama-3-8B's 32 layers 0.078125 kernels a layer."""
    export = write_graph_node_export(tmp_path / "graph.sqlite")
    out = tmp_path / "trace"
    done = CliRunner().invoke(cli, ["analyze", "nsys", str(export), "--out", str(out)])
    assert done.exit_code == 0, done.output
    args = ["plan", "--model", "llama-3-8b", "--concurrency", "1", "--from-trace"]
    result = CliRunner().invoke(cli, [*args, str(out)])
    assert result.exit_code == 0, result.output
    assert f"launch cost ({out / 'steps.csv'}): 0.078125 kernels per layer" in (
        result.output
    )
    assert "eager: 0.035 µs per launch" in result.output
    parquet = tmp_path / "parquet"
    done = CliRunner().invoke(
        cli,
        ["analyze", "nsys", str(export), "--out", str(parquet), "--format", "parquet"],
    )
    assert done.exit_code == 0, done.output
    result = CliRunner().invoke(cli, [*args, str(parquet)])
    assert result.exit_code == 0, result.output
    assert (
        f"launch cost ({parquet / 'steps.parquet'}): 0.078125 kernels" in result.output
    )
    with pytest.raises(SystemExit) as exit_info:
        main([*args, str(tmp_path / "nowhere")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "does not exist" in err and "\n" not in err


def test_a_draft_on_one_gpu_holds_all_its_weights_and_kv_there():
    """--draft-tp 1: the GPU that runs the 1B draft holds all its BF16 weights and all its
    KV heads (8 of 8), not an eighth of them."""
    from trtbench.plan.memory import estimate_memory

    draft = resolve_model("llama-3.2-1b")
    on_one = estimate_memory(_inputs(draft_tp=1), DRAFT_TARGET, 1)
    split = estimate_memory(_inputs(), DRAFT_TARGET, 1)
    assert on_one.extra_weights_bytes == pytest.approx(draft.params * 2.0)
    assert split.extra_weights_bytes == pytest.approx(draft.params * 2.0 / 8)
    seq = 1024 + 256 + 4
    draft_kv = draft.kv_bytes_per_token(2.0) * seq  # every KV head on the one GPU
    target_kv = resolve_model("llama-3.1-70b").kv_bytes_per_token(2.0) / 8 * seq
    assert on_one.kv_per_sequence_bytes == pytest.approx(target_kv + draft_kv)


def test_the_pure_roofline_says_so_and_quotes_its_own_band():
    args = "plan --model llama-3-8b --draft llama-3.2-1b --no-overheads --concurrency 1"
    result = CliRunner().invoke(cli, args.split())
    assert result.exit_code == 0, result.output
    assert "pure roofline (--no-overheads)" in result.output
    assert "fitted to published results" not in result.output
    assert "80th percentile of |error| of the pure roofline's speedups" in result.output
