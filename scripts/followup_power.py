"""Power of ``trtbench follow-up``: how often it fails a recommended config that is slower than
the best fixed variant by a known amount.

Usage: .venv/bin/python scripts/followup_power.py RUN_DIR [--handicap 0.1] [--trials 5]
       [--rounds 8]

RUN_DIR is a finished run with a recommendation (e.g. ``runs/tiny-cpu`` from
``scripts/demo.sh``). Each trial copies it, adds ``handicap: H`` to the recommendation's
``trtbench variant`` snippet (the reference engine then waits H × each step's duration after
it: every step (1 + H) times as long, about H / (1 + H) fewer tokens/s) and runs
``trtbench follow-up`` on the copy. It prints per trial the verdict, the tiers suspect in
stage 1 and those failed (confirmed), with each tier's ratio recommended / best; then the
share of tiers failed (per-tier power) and of checks failed (power of the whole check).
With ``--handicap 0`` the recommended config is the one the run recommended: an A/A of the
check wherever it equals the best fixed variant. Figures: docs/aa_check.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNIPPET = "trtbench variant"


def slowed_copy(run: Path, into: Path, handicap: float) -> Path:
    """``run`` copied to ``into`` without its follow-up, the snippet's variant handicapped."""
    shutil.copytree(run, into, ignore=shutil.ignore_patterns("follow-up"))
    path = into / "recommendation.json"
    doc = json.loads(path.read_text())
    snippet = next(s for s in doc["snippets"] if s["target"] == SNIPPET)
    if handicap > 0:
        snippet["config"]["variants"][0]["handicap"] = handicap
    path.write_text(json.dumps(doc))
    return into


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path)
    p.add_argument("--handicap", type=float, default=0.1)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--rounds", type=int, default=8)
    args = p.parse_args()
    trtbench = ROOT / ".venv" / "bin" / "trtbench"
    tiers_failed = tiers_total = checks_failed = 0
    for trial in range(args.trials):
        with tempfile.TemporaryDirectory(prefix="fu-power-") as tmp:
            copy = slowed_copy(args.run, Path(tmp) / "run", args.handicap)
            start = time.monotonic()
            proc = subprocess.run(  # noqa: S603 - our own CLI
                [str(trtbench), "follow-up", str(copy), "--rounds", str(args.rounds)],
                capture_output=True,
                text=True,
                check=False,
            )
            wall = time.monotonic() - start
            check_path = copy / "follow-up" / "check.json"
            if not check_path.is_file():
                raise SystemExit(f"trial {trial}: no check.json\n{proc.stderr[-2000:]}")
            check = json.loads(check_path.read_text())
        cells = []
        for t in check["tiers"]:
            first, confirm = t["first"], t["confirm"]
            text = f"{first['ratio']:.2f}" if first["ratio"] is not None else "-"
            if confirm is not None:
                text += f"/{confirm['ratio']:.2f}"
            cells.append(f"{t['tier']} {text} {t['status']}")
        failed = len(check["failed"])
        tiers_failed += failed
        tiers_total += len(check["tiers"])
        checks_failed += check["verdict"] == "fail"
        suspect, failed_tiers = check["confirmed"] or "-", check["failed"] or "-"
        print(
            f"trial {trial}: {check['verdict']} ({wall:.0f} s); suspect {suspect}, "
            f"failed {failed_tiers}; " + "; ".join(cells),
            flush=True,
        )
    print(
        f"handicap {args.handicap:g}, {args.rounds} rounds: tiers failed "
        f"{tiers_failed}/{tiers_total}, checks failed {checks_failed}/{args.trials}"
    )


if __name__ == "__main__":
    main()
