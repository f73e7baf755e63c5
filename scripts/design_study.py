"""Which measurement design resolves the most per minute of host time (issue: rounds by
need, "less noise per minute")?

Usage: .venv/bin/python scripts/design_study.py [--requests 8,16,32] [--rounds 9]
       [--tiers 1,4] [--burner] [--out runs/design-study]

For each cell size (``requests_per_tier``) one ``trtbench run`` of the A/A spec of
``scripts/aa_check.py`` (twin baselines, twin Medusa variants, a Medusa slowed by
``handicap: 0.1``) in ``--rounds`` fixed interleaved rounds. From its rounds.csv:

* ``cell s``: the median cell duration; ``round s``: the measuring time of one round (the
  span of the run's cells over the rounds, in seconds per round, gaps between cells
  included);
* ``s``: the round-to-round SD of the twins' log output tok/s ratio (pooled over the twin
  pairs and tiers: the noise a paired comparison sees);
* ``half-width per budget``: the half-width t · s / √n of a fixed design's 95 % interval
  of a log ratio after ``n`` rounds, where ``n`` is what 1, 2 and 4 minutes of measuring
  buy at this cell size; smaller is better: it is what the design can tell apart in that
  time.

Prints one row per cell size and writes ``OUT/design_study.md``.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aa_check import COLUMN, TWINS, burner, run_one, spec_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def twin_sd(rounds: pd.DataFrame) -> float:
    """Pooled SD of the twins' per-round log ratio (each pair and tier its own mean)."""
    figure = rounds.set_index(["round", "tier", "variant"])[COLUMN]
    devs, dof = 0.0, 0
    for tier in rounds["tier"].unique():
        for a, b in TWINS:
            logs = np.array(
                [
                    math.log(figure[(r, tier, a)] / figure[(r, tier, b)])
                    for r in sorted(rounds["round"].unique())
                    if (r, tier, a) in figure and (r, tier, b) in figure
                ]
            )
            if logs.size >= 2:
                devs += float(((logs - logs.mean()) ** 2).sum())
                dof += logs.size - 1
    return math.sqrt(devs / dof) if dof else math.nan


def half_width(s: float, round_s: float, minutes: float) -> float:
    """t · s / √n of a 95 % interval after what ``minutes`` of measuring buy (n ≥ 2)."""
    n = max(2, int(60 * minutes // round_s))
    return float(stats.t.ppf(0.975, n - 1) * s / math.sqrt(n))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", default="8,16,32")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--tiers", default="1,4")
    p.add_argument("--burner", action="store_true")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "design-study")
    args = p.parse_args()
    cache = Path(os.environ.get("TRTBENCH_CACHE", Path.home() / ".cache" / "trtbench"))
    tiers = [int(t) for t in args.tiers.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [
        "| requests per cell | cell s | round s | s (twins) | half-width after 1 / 2 / 4 "
        "min of measuring | wall s |",
        "|---|---|---|---|---|---|",
    ]
    print(lines[0], flush=True)
    hog: subprocess.Popen | None = burner() if args.burner else None
    try:
        for requests in (int(r) for r in args.requests.split(",")):
            spec = args.out / f"study-{requests}.yaml"
            spec.write_text(
                spec_text(cache, "interleaved", args.rounds, tiers, requests)
            )
            out = args.out / f"r{requests}"
            cells = 5 * len(tiers) * args.rounds
            wall = run_one(spec, out, "idle", cells)
            rounds = pd.read_csv(out / "loadtest" / "rounds.csv")
            span = float((rounds["start_s"] + rounds["duration_s"]).max())
            round_s = span / rounds["round"].nunique()
            s = twin_sd(rounds)
            widths = " / ".join(
                f"{100 * half_width(s, round_s, m):.1f} %" for m in (1, 2, 4)
            )
            row = (
                f"| {requests} | {rounds['duration_s'].median():.2f} | {round_s:.1f} | "
                f"{s:.3f} | {widths} | {wall:.0f} |"
            )
            print(row, flush=True)
            lines.append(row)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    (args.out / "design_study.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / 'design_study.md'}")


if __name__ == "__main__":
    main()
