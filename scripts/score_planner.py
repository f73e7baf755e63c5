"""Score ``trtbench plan`` against published results and write the table into docs/planner.md.

Usage:
  python scripts/score_planner.py            print the scored table (Markdown) and its medians
  python scripts/score_planner.py --fit      also refit the machinery term on the fit rows and
                                             print the coefficients beside the shipped ones
  python scripts/score_planner.py --write    replace docs/planner.md's scored section
  python scripts/score_planner.py --check    exit 1 when docs/planner.md's section is stale
                                             (tests/unit/plan/test_anchors.py runs it)

The rows are ``trtbench/plan/data/anchors.csv``; the definitions (error, fit, band) are
``trtbench/plan/anchors.py``'s.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from trtbench.plan.anchors import (
    FIT,
    HOLDOUT,
    SPEEDUP,
    TOKENS,
    fit_machinery,
    median_abs_error,
    read_anchors,
    score,
)
from trtbench.plan.overheads import Machinery
from trtbench.plan.planner import make_plan
from trtbench.plan.settings import PlanSettings, plan_inputs

DOC = Path(__file__).resolve().parents[1] / "docs" / "planner.md"
START, END = "<!-- scored-table:start -->", "<!-- scored-table:end -->"


def _pct(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:+.0%}"


def _figure(row: pd.Series) -> str:
    unit = "x" if row["metric"] == SPEEDUP else " tok/s"
    low, high = row["published"], row["published_high"]
    text = f"{low:g}" if pd.isna(high) else f"{low:g}–{high:g}"
    return text + unit


def _crossover(alpha: float) -> int | None:
    """The draft-target crossover of docs/planner.md's opening example at ``alpha``."""
    settings = PlanSettings(
        model="llama-3.1-70b",
        gpu="h100-sxm",
        tp=8,
        draft="llama-3.2-1b",
        alpha=alpha,
        concurrency=(1,),
    )
    return make_plan(plan_inputs(settings)).crossover["draft_target"]


def markdown(scored: pd.DataFrame) -> str:
    """The section between the markers: medians, the table, sources and assumptions."""
    unit = {SPEEDUP: "speedup", TOKENS: "tok/s per user"}
    lines = [
        START,
        "",
        "Written by `python scripts/score_planner.py --write` from "
        "`trtbench/plan/data/anchors.csv`; do not edit by hand.",
        "",
        "| rows | planner (defaults) | pure roofline |",
        "|---|---|---|",
    ]
    for metric in (SPEEDUP, TOKENS):
        for role in (HOLDOUT, FIT):
            n = int(((scored["metric"] == metric) & (scored["role"] == role)).sum())
            mine = median_abs_error(scored, metric, role)
            roof = median_abs_error(scored, metric, role, "roofline_error_ratio")
            lines.append(
                f"| {unit[metric]}, {role} ({n}) | median abs. error {mine:.1%} | "
                f"{roof:.1%} |"
            )
    lines += [
        "",
        f"Crossover of the opening example (Llama-3.1-70B, 8 x H100, tp 8, Llama-3.2-1B "
        f"draft, γ 4): B = {_crossover(0.8)} at α 0.8, B = {_crossover(0.7)} at α 0.7.",
        "",
        "| id | role | method | B | published | planner | error | roofline | error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in scored.iterrows():
        lines.append(
            f"| {r['id']} | {r['role']} | {r['method']} | {r['concurrency']} | "
            f"{_figure(r)} | {r['predicted']:.3g} | {_pct(r['error_ratio'])} | "
            f"{r['roofline_predicted']:.3g} | {_pct(r['roofline_error_ratio'])} |"
        )
    lines += ["", "Sources and what each row assumes:", ""]
    lines += [
        f"- **{r['id']}**: {r['source']}. Assumed: {r['assumed']}."
        for _, r in scored.iterrows()
    ]
    return "\n".join([*lines, "", END])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--fit", action="store_true")
    group.add_argument("--write", action="store_true")
    group.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    anchors = read_anchors()
    section = markdown(score(anchors))
    text = DOC.read_text(encoding="utf-8")
    if START not in text or END not in text:
        print(f"{DOC} lacks the markers {START} … {END}", file=sys.stderr)
        return 2
    head, rest = text.split(START, 1)
    new = head + section + rest.split(END, 1)[1]
    if args.check:
        if new != text:
            print(f"{DOC} is stale: run python scripts/score_planner.py --write")
            return 1
        return 0
    if args.write:
        DOC.write_text(new, encoding="utf-8")
        print(f"wrote {DOC}")
        return 0
    print(section)
    if args.fit:
        fitted = fit_machinery(anchors)
        print(
            f"\nfitted on the {FIT} rows: {fitted}; shipped: {Machinery()}"
            f"\nwith the fitted values: holdout speedup median abs. error "
            f"{median_abs_error(score(anchors, fitted), SPEEDUP):.1%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
