"""The cluster report and recommendation: hand-worked summaries."""

from __future__ import annotations

import pandas as pd

from trtbench.cluster.gather import ShardHost, ShardView
from trtbench.cluster.report import (
    best_per_tier,
    gpu_warning,
    interference_warning,
    recommendation,
    render,
)
from trtbench.cluster.shards import Shard

S0 = Shard(0, ("base", "dt"))
S1 = Shard(1, ("base", "med"))


def view(shard: Shard, done: bool = True, gpus=(), state="COMPLETED") -> ShardView:
    host = ShardHost("h", "n", tuple(gpus), "")
    return ShardView(
        shard,
        f"7_{shard.index}",
        state,
        "done" if done else "failed",
        host,
        None,
        (4, 4),
        done,
        () if done else ("boom",),
    )


SUMMARY = pd.DataFrame(
    {
        "variant": ["base@s0", "dt", "base@s1", "med"] * 2,
        "tier": ["c1"] * 4 + ["c8"] * 4,
        "tier_status": ["complete"] * 8,
        "output_token_throughput_speedup_ratio": [
            1.0,
            1.3,
            1.0,
            1.2,
            1.0,
            0.8,
            1.0,
            0.9,
        ],
        "output_token_throughput_speedup_ratio_ci95_low": [
            1,
            1.1,
            1,
            0.9,
            1,
            0.7,
            1,
            0.8,
        ],
        "output_token_throughput_speedup_ratio_ci95_high": [
            1,
            1.5,
            1,
            1.4,
            1,
            0.9,
            1,
            1.0,
        ],
    }
)


def test_the_best_per_tier_is_by_within_shard_speedup():
    tiers = best_per_tier(SUMMARY, [view(S0), view(S1)], "base")
    assert [(t["tier"], t["best"], t["shard"], t["speedup"]) for t in tiers] == [
        ("c1", "dt", "s0", 1.3),
        # c8: both are slower than their shard's baseline; the top one is med at 0.9.
        ("c8", "base", "s1", 0.9),
    ]
    assert tiers[0]["significant"] is True  # [1.1, 1.5] excludes 1
    assert tiers[1]["over"] == "med" and tiers[1]["significant"] is False  # [0.8, 1.0]


def test_a_missing_shard_s_variants_are_left_out_and_the_answer_marked():
    views = [view(S0, done=False, state="FAILED"), view(S1)]
    tiers = best_per_tier(SUMMARY, views, "base")
    assert [t["best"] for t in tiers] == ["med", "base"]
    doc = recommendation(tiers, "base", True, ["s0"])
    assert doc["partial"] is True and doc["answer"].startswith(
        "PARTIAL RUN (missing s0)"
    )
    text = render("r", SUMMARY, views, "base", doc, "trtbench run x")
    assert text.splitlines()[0] == "# trtbench report: r (Slurm, 2 shards) — PARTIAL"
    assert "- **s0** (dt): job 7_0 FAILED (failed)" in text
    assert "  boom" in text
    assert "| dt |" not in text  # no figure of the missing shard


def test_different_gpu_models_are_warned_about():
    h200 = [("NVIDIA H200", "GPU-1", "570")]
    h100 = [("NVIDIA H100 80GB HBM3", "GPU-2", "570")]
    assert gpu_warning([view(S0, gpus=h200), view(S1, gpus=h200)]) is None
    warning = gpu_warning([view(S0, gpus=h200), view(S1, gpus=h100)])
    assert "NVIDIA H100 80GB HBM3; NVIDIA H200" in warning


def test_the_report_says_which_best_is_significant():
    views = [view(S0), view(S1)]
    tiers = best_per_tier(SUMMARY, views, "base")
    text = render(
        "r", SUMMARY, views, "base", recommendation(tiers, "base", False, []), "x"
    )
    assert (
        "- c1: `dt` (s0) at 1.30x [1.10, 1.50] output tok/s over its shard's baseline\n"
        in text
    )
    assert (
        "- c8: `base`: no speculative variant is faster; the top one, `med` (s1)"
        in text
    )
    assert "PARTIAL" not in text and "| med | s1 | c8 | complete |" in text


def test_interference_in_any_shard_is_warned_about():
    """A fresh user's shards were all measured on a busy host: each shard's report said so,
    the merged one did not."""
    summary = pd.DataFrame(
        {
            "variant": ["base@s0", "a", "base@s1", "b", "b"],
            "tier": ["c1", "c1", "c1", "c1", "c2"],
            "interference_rounds": [0, 0, 2, 1, 3],
        }
    )
    assert interference_warning(summary) == (
        "3 of 5 (variant, tier) rows were measured while other processes used the host "
        "(`base@s1`, `b`): their figures may read slow; each shard's report says which "
        "rounds."
    )
    assert interference_warning(summary.assign(interference_rounds=0)) is None
    assert interference_warning(summary.drop(columns="interference_rounds")) is None
