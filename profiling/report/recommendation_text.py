"""The Recommendation section of ``report.md`` and ``recommendation.json`` (pure: records in,
text / JSON-ready dict out).

``recommendation.json`` fields (units as in the CSVs; null: not available):

* ``schema_version`` (1), ``objective`` {name, column, higher_is_better, label, unit},
  ``baseline``, ``winner`` (the speculative variant the config is for; null: serve without
  speculation), ``winner_reason``, ``answer`` (the one-line answer).
* ``tiers``: per measured tier {tier, concurrency, best, value, runner_up, over_baseline,
  excluded}; a margin is {over, ratio (> 1: better), low, high (95 % bounds), significant
  (null: no interval), basis}.
* ``crossovers``: per speculative variant {variant, pays_up_to, stops_at, estimate, low,
  high, basis} (concurrencies).
* ``memory``: per variant {extra_weights_bytes, extra_peak_bytes, peak_source,
  kv_blocks_speculation, kv_pool_speculation_bytes, max_concurrency_unqueued, queue_note}.
* ``excluded``: tiers not used (partial, failed, interrupted), with their reason.
* ``policy``: {variant, mode, draft_len, max_concurrency, schedule [[batch, K], …], notes}.
* ``snippets``: {target, language, text, config, notes} for the trtbench variant, each
  TensorRT-LLM LLM-API version, vLLM and the engine path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from trtbench.profiling.report.recommendation import Margin, Recommendation
from trtbench.profiling.report.recommendation_config import Policy, Snippet
from trtbench.units import format_bytes

SCHEMA_VERSION = 1


def _c(v: float | None) -> str:
    return "-" if v is None else f"{v:g}"


def _margin(m: Margin | None) -> str:
    if m is None or m.ratio != m.ratio:  # no margin, or a zero figure (NaN ratio)
        return "-"
    pct = f"{(m.ratio - 1) * 100:+.1f} % over `{m.over}`"
    if m.low is not None and m.high is not None:
        pct += f" [{(m.low - 1) * 100:+.1f}, {(m.high - 1) * 100:+.1f}]"
    if m.significant is None:
        return pct + " (no interval)"
    return (
        pct
        + ("; significant" if m.significant else "; not significant")
        + f" ({m.basis})"
    )


def _unjudged(rec: Recommendation) -> list[str]:
    """Why some margins have no interval, once per reason."""
    reasons = [m.basis for t in rec.tiers for m in (t.runner_up, t.over_baseline)
               if m is not None and m.significant is None]  # fmt: skip
    return [
        f"Margins marked (no interval): {r.removeprefix('no interval: ')}."
        for r in dict.fromkeys(reasons)
    ]


def answer(rec: Recommendation, policy: Policy | None) -> str:
    """The one-line answer: which variant, up to which concurrency."""
    if policy is None:
        return f"Serve without speculation: {rec.winner_reason}."
    cross = next((c for c in rec.crossovers if c.variant == policy.variant), None)
    where = "at every measured concurrency"
    mine = [t.over_baseline for t in rec.tiers
            if t.best == policy.variant and t.over_baseline is not None]  # fmt: skip
    if mine and all(m.significant is False for m in mine):
        # best by point value only: say so rather than claim it pays everywhere
        return (f"Serve `{policy.variant}` where the table below names it best, by point "
                f"value only: {rec.winner_reason}; at none of those tiers is its margin "
                "over the baseline significant (95 % intervals over passes): measure "
                "more repeats before acting on it.")  # fmt: skip
    if policy.max_concurrency is not None:
        where = f"up to concurrency {policy.max_concurrency}, speculation off above"
        if cross is not None and cross.estimate is not None:
            bounds = f" [{_c(cross.low)}, {_c(cross.high) if cross.high else '>'}]"
            where += f" (crossover ≈ {cross.estimate:.1f}{bounds if cross.low else ''})"
    return f"Serve `{policy.variant}` {where}; {rec.winner_reason}."


def _bytes(v: float | None) -> str:
    return "not measured" if v is None else format_bytes(v, signed=True)


def _mem(rec: Recommendation) -> list[str]:
    out = []
    for m in rec.memory:
        if m.variant == rec.baseline:
            continue
        w = _bytes(m.extra_weights_bytes)
        p = _bytes(m.extra_peak_bytes) + (
            f" ({m.peak_source})" if m.peak_source else ""
        )
        pool = m.kv_pool_speculation_bytes
        if m.kv_blocks_speculation is not None:
            kv = f"{m.kv_blocks_speculation:g} draft KV blocks"
            kv += f" ({format_bytes(pool)})" if pool is not None else ""
        elif pool is not None:
            kv = f"{format_bytes(pool)}, its share of the target's blocks"
        else:
            kv = "no draft-model KV pool"
        unq = (
            _c(m.max_concurrency_unqueued)
            if m.max_concurrency_unqueued
            else m.queue_note
        )
        out.append(f"- `{m.variant}`: extra weights {w}, extra peak {p}; "
                   f"draft-model KV: {kv} (verification blocks: the KV section); "
                   f"largest concurrency without queueing: {unq}.")  # fmt: skip
    return out or ["- memory not measured (no memory_breakdown.csv)"]


def recommendation_lines(
    rec: Recommendation, policy: Policy | None, snippets: Sequence[Snippet]
) -> list[str]:
    """Markdown lines of the Recommendation section (heading included)."""
    o = rec.objective
    lines = ["## Recommendation", "",
             f"**{answer(rec, policy)}**", "",
             f"Objective: {o.label} ({'higher' if o.higher_is_better else 'lower'} is better; "
             "spec `report.objective`, or `trtbench report RUN --objective`).", "",
             "| tier | best | " + o.label + " | margin over runner-up | margin over baseline |",
             "|---|---|---|---|---|"]  # fmt: skip
    for t in rec.tiers:
        lines.append(f"| {t.tier} | `{t.best}` | {t.value:.4g} {o.unit} | "
                     f"{_margin(t.runner_up)} | {_margin(t.over_baseline)} |")  # fmt: skip
    lines += ["", *_unjudged(rec), ""]
    for c in rec.crossovers:
        est = "-" if c.estimate is None else f"{c.estimate:.1f}"
        between = (f"interval [{_c(c.low)}, {_c(c.high) if c.high else 'above the top tier'}]"
                   if c.low is not None or c.high is not None else "")  # fmt: skip
        how = ("by point value" if c.basis.startswith("no interval")
               else "significantly (95 % interval)")  # fmt: skip
        run = (f"beats the baseline {how} at every tier from the lowest up to "
               f"{_c(c.pays_up_to)}" if c.pays_up_to is not None
               else f"does not beat the baseline {how} at the lowest tier")  # fmt: skip
        first = (
            f", first tier where it does not: {_c(c.stops_at)}" if c.stops_at else ""
        )
        lines.append(f"- Crossover of `{c.variant}`: {run}{first}; its point margin over the "
                     f"baseline crosses 1 at ≈ {est}{', ' + between if between else ''} "
                     f"({c.basis}).")  # fmt: skip
    lines += ["", "Memory each choice costs (vs the baseline):", "", *_mem(rec)]
    if rec.excluded:
        lines += ["", "Not used (not complete tiers): " + "; ".join(rec.excluded) + "."]
    if policy is not None:
        lines += ["", "### The config that implements it", ""]
        lines += [f"- {n}" for n in policy.notes]
        for s in snippets:
            lines += ["", f"{s.target}:", "", f"```{s.language}", s.text, "```"]
            lines += [f"- {n}" for n in s.notes]
    return lines


def _clean(v: Any) -> Any:
    """NaN → None, recursively (JSON has no NaN)."""
    if isinstance(v, float) and v != v:
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def recommendation_json(
    rec: Recommendation, policy: Policy | None, snippets: Sequence[Snippet]
) -> dict[str, Any]:
    """``recommendation.json`` (module docstring for the fields)."""
    data = dataclasses.asdict(rec)
    obj = data.pop("objective")
    keep = ("name", "column", "higher_is_better", "label", "unit")
    return _clean(
        {
            "schema_version": SCHEMA_VERSION,
            "objective": {k: obj[k] for k in keep},
            "answer": answer(rec, policy),
            **data,
            "policy": None if policy is None else dataclasses.asdict(policy),
            "snippets": [dataclasses.asdict(s) for s in snippets],
        }
    )
