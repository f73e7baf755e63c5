"""The cluster run's ``report.md`` and ``recommendation.json`` (pure: shard views and the
merged summary in, text and a JSON document out).

Speedups and the recommendation use the shards' own within-shard ratios only (each
variant over the baseline measured in its shard: same node, interleaved rounds), never a
figure of one shard divided by one of another. A variant of another shard is compared by
its within-shard speedup, and the report says so. A run with a missing shard is marked
partial in the title, the answer and ``recommendation.json`` (``partial``), and names the
shard, its Slurm state and the last lines of its log.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from trtbench.cluster.gather import ShardView
from trtbench.cluster.shards import shard_label

RECOMMENDATION_SCHEMA_VERSION = 1
SPEEDUP = "output_token_throughput_speedup_ratio"
TPOT_SPEEDUP = "tpot_speedup_ratio"
BASIS = (
    "output tok/s over the baseline measured in the same shard (same node, interleaved "
    "rounds); 95 % interval over the shard's paired rounds where it has 3 or more"
)


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def _fmt(value: Any, digits: int = 2, suffix: str = "") -> str:
    v = _num(value)
    return "-" if v is None else f"{v:.{digits}f}{suffix}"


def missing_lines(views: Sequence[ShardView], rerun: str) -> list[str]:
    """Per shard not done: its variants, job, Slurm state, log and its last lines."""
    lines = []
    for v in views:
        if v.done:
            continue
        what = ", ".join(v.shard.variants[1:]) or v.shard.variants[0]
        lines.append(
            f"- **{v.shard.name}** ({what}): job {v.job or '-'} {v.state} ({v.phase}); "
            f"log `{v.log or '-'}`"
        )
        if v.tail:
            lines += ["", "  ```", *(f"  {t}" for t in v.tail), "  ```"]
    if lines:
        lines += ["", f"Resubmit only these: `{rerun}` (with the same Slurm options)."]
    return lines


def gpu_warning(views: Sequence[ShardView]) -> str | None:
    """A warning when the finished shards ran on different GPU models (None otherwise)."""
    models = {v.host.gpu_models for v in views if v.done and v.host.gpu_models}
    if len(models) <= 1:
        return None
    kinds = "; ".join(sorted(", ".join(m) for m in models))
    return (
        f"The shards ran on different GPU models ({kinds}): each speedup is over its own "
        "shard's baseline, but absolute figures (TPOT, tok/s) of different shards are not "
        "comparable."
    )


def interference_warning(summary: pd.DataFrame) -> str | None:
    """A warning when some tiers were measured while other processes used the host (the
    shards' ``interference_rounds``; None when none was, or the column is absent)."""
    if summary.empty or "interference_rounds" not in summary.columns:
        return None
    rounds = pd.to_numeric(summary["interference_rounds"], errors="coerce").fillna(0)
    hit = summary[rounds > 0]
    if hit.empty:
        return None
    names = ", ".join(f"`{v}`" for v in dict.fromkeys(hit["variant"]))
    return (
        f"{len(hit)} of {len(summary)} (variant, tier) rows were measured while other "
        f"processes used the host ({names}): their figures may read slow; each shard's "
        "report says which rounds."
    )


def best_per_tier(
    summary: pd.DataFrame, views: Sequence[ShardView], baseline: str
) -> list[dict[str, Any]]:
    """Per complete tier the speculative variant with the highest within-shard output tok/s
    speedup (:data:`SPEEDUP`), its shard and interval; the baseline when none is above 1.

    Returns:
        ``[{tier, best, shard, speedup, low, high, significant}]`` in tier order.
    """
    if summary.empty:
        return []
    shard_of = {
        name: v.shard.name for v in views if v.done for name in v.shard.variants[1:]
    }
    rows = summary[summary["variant"].isin(list(shard_of))]
    if "tier_status" in rows:
        rows = rows[rows["tier_status"].fillna("complete") == "complete"]
    out = []
    for tier in dict.fromkeys(summary["tier"]):
        here = rows[rows["tier"] == tier].copy()
        here["_s"] = pd.to_numeric(here.get(SPEEDUP), errors="coerce")
        here = here.dropna(subset=["_s"])
        if here.empty:
            continue
        top = here.loc[here["_s"].idxmax()]
        low = _num(top.get(f"{SPEEDUP}_ci95_low"))
        high = _num(top.get(f"{SPEEDUP}_ci95_high"))
        win = top["_s"] > 1.0
        out.append(
            {
                "tier": str(tier),
                "best": str(top["variant"]) if win else baseline,
                "shard": shard_of[str(top["variant"])],
                "speedup": float(top["_s"]),
                "over": str(top["variant"]) if not win else baseline,
                "low": low,
                "high": high,
                "significant": None
                if low is None
                else bool(low > 1.0 or (high is not None and high < 1.0)),
            }
        )
    return out


def recommendation(
    tiers: list[dict[str, Any]], baseline: str, partial: bool, missing: Sequence[str]
) -> dict[str, Any]:
    """``recommendation.json`` of a cluster run (``partial`` and the missing shards said)."""
    if not tiers:
        answer = "No complete tier with a speedup: nothing to recommend."
    else:
        bests = sorted({t["best"] for t in tiers})
        parts = [f"{t['tier']}: {t['best']}" for t in tiers]
        answer = (
            f"Serve `{bests[0]}` at every measured concurrency"
            if len(bests) == 1
            else "Best per tier: " + ", ".join(parts)
        ) + " (by within-shard output tok/s speedup over the baseline)."
    if partial:
        answer = f"PARTIAL RUN (missing {', '.join(missing)}): " + answer
    return {
        "schema_version": RECOMMENDATION_SCHEMA_VERSION,
        "executor": "slurm",
        "objective": {
            "name": "output_tok_s_speedup",
            "column": SPEEDUP,
            "basis": BASIS,
        },
        "answer": answer,
        "baseline": baseline,
        "partial": partial,
        "missing_shards": list(missing),
        "tiers": tiers,
    }


def comparison_lines(
    summary: pd.DataFrame, views: Sequence[ShardView], baseline: str
) -> list[str]:
    """The merged table: per finished shard its baseline row then its variants', per tier."""
    head = [
        "| variant | shard | tier | status | TPOT ms | output tok/s | TPOT speedup "
        "| tok/s speedup [≥ 95 % CI] | acceptance length | lossless |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    body = []
    for v in views:
        if not v.done:
            continue
        for variant in v.shard.variants:
            label = shard_label(variant, v.shard, baseline)
            for _, r in summary[summary["variant"] == label].iterrows():
                low, high = (
                    r.get(f"{SPEEDUP}_ci95_low"),
                    r.get(f"{SPEEDUP}_ci95_high"),
                )
                ci = (
                    f" [{_fmt(low)}, {_fmt(high)}]"
                    if _num(low) is not None and _num(high) is not None
                    else ""
                )
                body.append(
                    f"| {label} | {v.shard.name} | {r['tier']} | "
                    f"{r.get('tier_status', '')} | "
                    f"{_fmt(r.get('time_per_output_token_mean_ms'))} | "
                    f"{_fmt(r.get('output_token_throughput_tokens_per_s'), 1)} | "
                    f"{_fmt(r.get(TPOT_SPEEDUP), 2, 'x')} | "
                    f"{_fmt(r.get(SPEEDUP), 2, 'x')}{ci} | "
                    f"{_fmt(r.get('acceptance_length_tokens'))} | "
                    f"{r.get('lossless_status', '') if isinstance(r.get('lossless_status'), str) else '-'} |"
                )
    return head + body


def shard_table(views: Sequence[ShardView]) -> list[str]:
    """Which shard measured what, where: job, state, node, GPUs, driver, image."""
    lines = [
        "| shard | variants | job | state | node | GPUs | driver | image |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in views:
        gpus = ", ".join(f"{g[0]} ({g[1]})" for g in v.host.gpus) or "-"
        drivers = ", ".join(sorted({g[2] for g in v.host.gpus})) or "-"
        lines.append(
            f"| {v.shard.name} | {', '.join(v.shard.variants)} | {v.job or '-'} | "
            f"{v.state} | {v.host.node or v.host.host or '-'} | {gpus} | {drivers} | "
            f"{v.host.container_image or '-'} |"
        )
    return lines


def render(
    name: str,
    summary: pd.DataFrame,
    views: Sequence[ShardView],
    baseline: str,
    doc: dict[str, Any],
    rerun: str,
) -> str:
    """report.md of the cluster run (module docstring)."""
    partial = bool(doc["partial"])
    title = f"# trtbench report: {name} (Slurm, {len(views)} shards)"
    if partial:
        title += " — PARTIAL"
    lines = [
        title,
        "",
        f"Baseline: `{baseline}`, measured in every shard as `{baseline}@s<K>`. Every "
        "speedup is within its shard: the variant over the baseline measured on the same "
        "node, side by side in the shard's interleaved rounds; no figure of one shard is "
        "divided by one of another.",
        "",
    ]
    if partial:
        lines += [
            "**Partial run**: the shards below did not finish; their variants are "
            "missing from every table and figure here.",
            "",
            *missing_lines(views, rerun),
            "",
        ]
    lines += ["## Recommendation", "", doc["answer"], ""]
    for t in doc["tiers"]:
        ci = (
            f" [{_fmt(t['low'])}, {_fmt(t['high'])}]"
            if t["low"] is not None and t["high"] is not None
            else ""
        )
        if t["best"] == baseline:
            lines.append(
                f"- {t['tier']}: `{baseline}`: no speculative variant is faster; the "
                f"top one, `{t['over']}` ({t['shard']}), is at {t['speedup']:.2f}x{ci}"
            )
        else:
            sure = {True: "", False: " (the interval includes 1: not significant)"}
            lines.append(
                f"- {t['tier']}: `{t['best']}` ({t['shard']}) at {t['speedup']:.2f}x{ci} "
                "output tok/s over its shard's baseline"
                + sure.get(t["significant"], " (no interval: fewer than 3 rounds)")
            )
    lines += ["", "## Shards", "", *shard_table(views), ""]
    for warning in (gpu_warning(views), interference_warning(summary)):
        if warning:
            lines += [f"**Warning**: {warning}", ""]
    lines += [
        "## Comparison (within-shard speedups)" + (" — partial" if partial else ""),
        "",
        *comparison_lines(summary, views, baseline),
        "",
        "## Shard reports",
        "",
    ]
    lines += [
        f"- {v.shard.name}: `shards/{v.shard.name}/report.md`" for v in views if v.done
    ]
    return "\n".join(lines) + "\n"
