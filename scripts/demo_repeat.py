"""Run the demo (``scripts/demo.sh``) several times in a row and print whether its answer holds.

Usage: .venv/bin/python scripts/demo_repeat.py [--times 5] [--burner] [--out runs/repeat]
       [--spec examples/tiny-cpu.yaml]

Each run goes to ``OUT/runN`` (removed first). ``--burner`` keeps one core busy with
``python -c 'while True: pass'`` for the whole series (the standard busy-host check of
docs/aa_check.md). Per run it prints the exit status, minutes, the recommended variant, each
tier's best variant (``*`` where its margin over the runner-up is significant, i.e. the run
claims the order), how many of the comparisons the answer rests on (each tier's best over
the baseline and over the runner-up, once where the runner-up is the baseline) were decided
and in how many rounds (``rounds: auto``), and the follow-up's verdict with its ratios; then
whether every run exited 0 and whether every tier whose best was called significantly ahead
named the same variant in every run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DECIDED = ("better", "worse", "equivalent")
"""recommendation.json margin decisions that settle a comparison (the rest: open)."""


def summarize(run: Path) -> dict:
    """Winner, per-tier best (with significance) and the follow-up of one demo run."""
    out: dict = {"winner": None, "tiers": {}, "verdict": None, "ratios": {}}
    out |= {"decided": 0, "comparisons": 0, "rounds": None}
    rec = run / "recommendation.json"
    if rec.is_file():
        doc = json.loads(rec.read_text())
        out["winner"] = doc.get("winner")
        for t in doc.get("tiers") or []:
            runner = t.get("runner_up") or {}
            out["tiers"][t["tier"]] = (t.get("best"), bool(runner.get("significant")))
            settled = {  # the comparisons the answer rests on, each once (the
                # runner-up may be the baseline), and whether each is settled
                m.get("over"): m.get("decision") in DECIDED
                for m in (t.get("over_baseline"), runner or None)
                if m
            }
            out["comparisons"] += len(settled)
            out["decided"] += sum(settled.values())
    design = run / "run.json"
    if design.is_file():
        stopping = json.loads(design.read_text()).get("design", {}).get("stopping")
        out["rounds"] = (stopping or {}).get("rounds_run")
    check = run / "follow-up" / "check.json"
    if check.is_file():
        doc = json.loads(check.read_text())
        out["verdict"] = doc.get("verdict")
        out["ratios"] = {  # an unchecked tier has no ratio: "-"
            t["tier"]: "-" if ratio is None else round(ratio, 2)
            for t in doc.get("tiers") or []
            for ratio in [(t.get("first") or {}).get("ratio")]
        }
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--times", type=int, default=5)
    p.add_argument("--burner", action="store_true")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "repeat")
    p.add_argument(
        "--spec", type=Path, default=None, help="the demo's spec (default: demo.sh's)"
    )
    args = p.parse_args()
    spec = [str(args.spec.resolve())] if args.spec else []
    burner = None
    if args.burner:
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # noqa: S603
    rows = []
    try:
        for i in range(1, args.times + 1):
            run = args.out / f"run{i}"
            shutil.rmtree(run, ignore_errors=True)
            start = time.monotonic()
            log = args.out / f"run{i}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("w") as fh:
                code = subprocess.call(  # noqa: S603 - our own script
                    ["bash", str(ROOT / "scripts" / "demo.sh"), str(run), *spec],
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    cwd=ROOT,
                )
            row = {"run": i, "exit": code, "minutes": (time.monotonic() - start) / 60}
            row.update(summarize(run))
            rows.append(row)
            tiers = " ".join(
                f"{k}:{b}{'*' if s else ''}" for k, (b, s) in row["tiers"].items()
            )
            ratios = " ".join(f"{k} {r}" for k, r in row["ratios"].items())
            print(
                f"run {i}: exit {code}, {row['minutes']:.1f} min, winner {row['winner']}; "
                f"best {tiers}; decided {row['decided']}/{row['comparisons']} "
                f"in {row['rounds']} rounds; follow-up {row['verdict']} ({ratios})",
                flush=True,
            )
    finally:
        if burner is not None:
            burner.kill()
    claimed: dict[str, set[str]] = {}
    for row in rows:
        for tier, (best, significant) in row["tiers"].items():
            if significant:
                claimed.setdefault(tier, set()).add(best)
    exits = sum(r["exit"] == 0 for r in rows)
    split = {t: sorted(b) for t, b in claimed.items() if len(b) > 1}
    print(
        f"exit 0: {exits}/{len(rows)}; winners: {[r['winner'] for r in rows]}; "
        f"tiers with a significant best: {sorted(claimed)}; "
        f"a significant best that changed between runs: {split or 'none'}"
    )
    return 0 if exits == len(rows) and not split else 1


if __name__ == "__main__":
    raise SystemExit(main())
