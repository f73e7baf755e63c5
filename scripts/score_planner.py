"""Score ``trtbench plan`` against published results and write the table into docs/planner.md.

Usage:
  python scripts/score_planner.py            print the scored section (Markdown)
  python scripts/score_planner.py --fit      refit every stack's terms on the fit rows, write
                                             trtbench/plan/data/engines.csv, print them
  python scripts/score_planner.py --write    replace docs/planner.md's scored section
  python scripts/score_planner.py --check    exit 1 when docs/planner.md's section is stale
                                             (tests/unit/plan/test_anchors.py runs it)

The rows are ``trtbench/plan/data/anchors.csv`` (their ``role`` column is the fit / held-out
split); the definitions are ``trtbench/plan/anchors.py`` (error), ``anchor_fit.py`` (the fit)
and ``bands.py`` (bands and their coverage).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from trtbench.plan.anchor_fit import fit_engine_terms
from trtbench.plan.anchors import (
    FIT,
    HOLDOUT,
    SPEEDUP,
    TOKENS,
    median_abs_error,
    read_anchors,
    score,
)
from trtbench.plan.bands import LEVEL, coverage
from trtbench.plan.engines import read_engine_terms, write_engine_terms
from trtbench.plan.planner import make_plan
from trtbench.plan.settings import PlanSettings, plan_inputs

DOC = Path(__file__).resolve().parents[1] / "docs" / "planner.md"
START, END = "<!-- scored-table:start -->", "<!-- scored-table:end -->"
OPENING_ENGINES = ("default", "vllm-v0", "vllm", "sglang", "trtllm-pytorch")


def _pct(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:+.0%}"


def _abs(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.1%}"


def _figure(row: pd.Series) -> str:
    unit = "x" if row["metric"] == SPEEDUP else " tok/s"
    low, high = row["published"], row["published_high"]
    text = f"{low:.4g}" if pd.isna(high) else f"{low:g}–{high:g}"
    return text + unit


def _crossover(engine: str, alpha: float = 0.8) -> int | None:
    """The draft-target crossover of docs/planner.md's opening example on ``engine``."""
    settings = PlanSettings(
        model="llama-3.1-70b",
        gpu="h100-sxm",
        tp=8,
        draft="llama-3.2-1b",
        alpha=alpha,
        concurrency=(1,),
        engine=engine,
    )
    return make_plan(plan_inputs(settings)).crossover["draft_target"]


def summary(scored: pd.DataFrame, checked: pd.DataFrame) -> list[str]:
    """The headline table: medians and coverage, held out and fit."""
    held = checked
    big = held[held["concurrency"] >= 16]
    stacks = ", ".join(sorted(set(held["engine"])))
    lines = [
        "| rows | n | median abs. error | B >= 16 | band coverage | pure roofline |",
        "|---|---|---|---|---|---|",
        f"| speedup, held out | {len(held)} | **{_abs(held['error_ratio'].abs().median())}** "
        f"| {_abs(big['error_ratio'].abs().median())} ({len(big)} rows) | "
        f"**{held['inside'].mean():.0%}** ({int(held['inside'].sum())}/{len(held)}) | "
        f"{_abs(median_abs_error(scored, SPEEDUP, HOLDOUT, 'roofline_error_ratio'))} |",
    ]
    for metric, role, name in (
        (SPEEDUP, FIT, "speedup, fit"),
        (TOKENS, HOLDOUT, "tok/s per user, held out"),
        (TOKENS, FIT, "tok/s per user, fit"),
    ):
        part = scored[(scored["metric"] == metric) & (scored["role"] == role)]
        lines.append(
            f"| {name} | {len(part)} | {_abs(median_abs_error(scored, metric, role))} | "
            f"— | — | {_abs(median_abs_error(scored, metric, role, 'roofline_error_ratio'))} |"
        )
    return [
        *lines,
        "",
        f"Held-out speedup rows span {held['engine'].nunique()} stacks ({stacks}), "
        f"B = {int(held['concurrency'].min())} to {int(held['concurrency'].max())}.",
    ]


def per_stack(checked: pd.DataFrame) -> list[str]:
    """Held-out median and coverage per stack."""
    lines = [
        "| stack | held-out speedups | median abs. error | inside band |",
        "|---|---|---|---|",
    ]
    for engine, part in checked.groupby("engine"):
        lines.append(
            f"| {engine} | {len(part)} | {_abs(part['error_ratio'].abs().median())} | "
            f"{int(part['inside'].sum())}/{len(part)} |"
        )
    return lines


def terms_table() -> list[str]:
    """The shipped terms of every stack and the rows they were fitted on."""
    lines = [
        "| stack | compute eff. | not overlapped | kernel ≥ µs | µs / pass | µs / token / seq. "
        "| µs / seq. / step | fitted on |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, t in read_engine_terms().items():
        m = t.machinery
        rows = "every stack's fit rows" if name == "default" else ", ".join(t.fitted_on)
        lines.append(
            f"| {name} | {t.compute_efficiency:.3g} | {t.serial_share:.3g} | "
            f"{t.kernel_us:g} | {m.pass_us:g} | {m.token_us:g} | {m.sequence_us:g} | {rows} |"
        )
    return lines


def markdown(scored: pd.DataFrame) -> str:
    """The section between the markers: medians, coverage, terms, the table, sources."""
    checked = coverage(scored)
    band = checked.set_index("id")
    crossings = ", ".join(f"{e} B = {_crossover(e)}" for e in OPENING_ENGINES)
    lines = [
        START,
        "",
        "Written by `python scripts/score_planner.py --write` from "
        "`trtbench/plan/data/anchors.csv` and `engines.csv`; do not edit by hand.",
        "",
        *summary(scored, checked),
        "",
        *per_stack(checked),
        "",
        f"Bands: the {LEVEL:.0%} quantile of |error| of the other held-out rows of the same "
        "kind (leave one out); coverage: the share of held-out rows inside their band.",
        "",
        "Terms per stack (`trtbench/plan/data/engines.csv`, `--fit`):",
        "",
        *terms_table(),
        "",
        "Crossover of the opening example (Llama-3.1-70B, 8 x H100, tp 8, Llama-3.2-1B "
        f"draft, γ 4, α 0.8) by stack: {crossings}.",
        "",
        "| id | role | stack | method | B | published | planner | error | band | roofline "
        "| error |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in scored.iterrows():
        b = f"±{band.loc[r['id'], 'band']:.0%}" if r["id"] in band.index else ""
        lines.append(
            f"| {r['id']} | {r['role']} | {r['engine']} | {r['method']} | "
            f"{r['concurrency']} | {_figure(r)} | {r['predicted']:.3g} | "
            f"{_pct(r['error_ratio'])} | {b} | {r['roofline_predicted']:.3g} | "
            f"{_pct(r['roofline_error_ratio'])} |"
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
    if args.fit:
        terms = fit_engine_terms(anchors)
        path = write_engine_terms(terms)
        for t in terms.values():
            print(f"{t.engine}: {t.describe()}")
        print(f"wrote {path}")
        return 0
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
