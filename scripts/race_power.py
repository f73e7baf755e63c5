"""What a race can decide: the chance that a comparison is decided within a budget of rounds.

A comparison whose true log ratio is ``d``, measured in paired rounds with a round-to-round
SD ``s`` of the log ratio and a server-instance SD ``τ`` (fresh servers every
``restart_every`` rounds), is simulated as a race of up to ``N`` rounds and decided by
trtbench's own rule (``LookSchedule`` + ``decide_pair``: a look every 3 rounds, α spent at
``n / N``, half of it kept for the last look; docs/aa_check.md, "Rounds by need"). The
answer: the share of simulated races in which the comparison was decided (better, worse or
equivalent within the margin) by round ``N``. No time budget enters: ``N`` is what the
minutes would hold.

    scripts/race_power.py --diff 3,5.5 --sd 0.06,0.09 --rounds 18,36,60
        a table: P(decided) per difference, spread and budget
    scripts/race_power.py --from RUN_DIR [RUN_DIR ...] [--target 0.8] [--sims 1000]
        for each comparison a finished run left open (recommendation.json): its difference
        and spread as measured (the mean and the pooled within-instance SD of its log
        ratios, rounds.csv), the chance that the rounds it had decide it, and the rounds
        that would decide it in ``--target`` of runs were the difference what it measured

The difference a run measured is itself uncertain (its interval is in the report), so the
rounds "needed" are a guide to the size of the budget, not a promise.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trtbench.profiling.loadtest.stats.decisions import (  # noqa: E402
    DEFAULT_EQUIVALENCE_MARGIN,
    LOOK_EVERY,
    LookSchedule,
    decide_pair,
    recorded_schedule,
)
from trtbench.profiling.report.paired import round_values  # noqa: E402
from trtbench.spec.design import INSTANCE_SD  # noqa: E402 (loadtest.instance_sd's default)

MOST_ROUNDS = 300


def race_schedule(
    rounds: int, instance_sd: float, restart_every: int | None
) -> LookSchedule:
    """The looks of a race of up to ``rounds`` rounds without a time budget: every
    ``LOOK_EVERY`` rounds and at ``rounds``, at the share ``n / rounds``."""
    looks = sorted({*range(LOOK_EVERY, rounds + 1, LOOK_EVERY), rounds})
    return LookSchedule(
        rounds,
        instance_sd=instance_sd,
        restart_every=restart_every,
        made=tuple((n, n / rounds) for n in looks),
    )


def chance_decided(
    diff: float,
    sd: float,
    rounds: int,
    *,
    instance_sd: float = INSTANCE_SD,
    restart_every: int | None = 3,
    margin: float = DEFAULT_EQUIVALENCE_MARGIN,
    runs: int = 1000,
    seed: int = 0,
) -> float:
    """The share of ``runs`` simulated races decided by round ``rounds`` (module docstring).

    Args:
        diff: the true log ratio (0.03: about 3 %).
        sd: the round-to-round SD of the log ratio within one set of servers (≥ 0).
        rounds: the budget ``N`` (≥ 3).
        instance_sd: τ, drawn afresh for each set of servers (and the race's intervals
            carry it, as trtbench's do).
        restart_every: rounds per set of servers (None: one set).
        margin: the equivalence margin.
        runs: simulated races.
        seed: of numpy's generator.

    Returns:
        A share in [0, 1].
    """
    schedule = race_schedule(rounds, instance_sd, restart_every)
    rng = np.random.default_rng(seed)
    index = np.arange(rounds)
    blocks = index // restart_every if restart_every else np.zeros(rounds, dtype=int)
    looks = [n for n, _ in schedule.made]
    decided = 0
    for _ in range(runs):
        logs = (
            diff
            + rng.normal(0.0, instance_sd, blocks.max() + 1)[blocks]
            + rng.normal(0.0, sd, rounds)
        )
        ratios = np.exp(logs)
        for n in looks:
            if decide_pair(ratios[:n], schedule, margin, index[:n]).decided:
                decided += 1
                break
    return decided / runs


def pooled_within_sd(logs: np.ndarray, blocks: np.ndarray) -> float:
    """The pooled SD of ``logs`` around their own block's mean (blocks of one value add
    nothing); the plain SD when no block holds two."""
    frame = pd.DataFrame({"x": logs, "b": blocks})
    dev = frame["x"] - frame.groupby("b")["x"].transform("mean")
    dof = len(frame) - frame["b"].nunique()
    if dof < 1:
        return float(np.std(logs, ddof=1))
    return float(math.sqrt((dev**2).sum() / dof))


def open_comparisons(run: Path) -> list[dict]:
    """The comparisons ``run``'s recommendation left open, each with its measured log
    ratios: ``{tier, a, b, logs, rounds}`` (A: the tier's best)."""
    rec = json.loads((run / "recommendation.json").read_text())
    column = rec["objective"]["column"]
    higher = rec["objective"]["higher_is_better"]
    rounds = pd.read_csv(run / "loadtest" / "rounds.csv")
    seen, out = set(), []
    for tier in rec["tiers"]:
        for key in ("runner_up", "over_baseline"):
            m = tier.get(key)
            pair = (tier["tier"], tier["best"], (m or {}).get("over"))
            if not m or m.get("decision") != "open" or pair in seen:
                continue
            seen.add(pair)
            va = round_values(rounds, pair[1], pair[0], column)
            vb = round_values(rounds, pair[2], pair[0], column)
            both = va.index.intersection(vb.index)
            logs = np.log((va[both] / vb[both]).to_numpy(dtype=float))
            out.append(
                {
                    "tier": pair[0],
                    "a": pair[1],
                    "b": pair[2],
                    "logs": logs if higher else -logs,
                    "rounds": np.asarray(both, dtype=int),
                }
            )
    return out


def rounds_needed(
    chance: Callable[[int], float], target: float, start: int
) -> tuple[int | None, float]:
    """The smallest budget (a multiple of 3 on a doubling-then-halving search from
    ``start``, at most :data:`MOST_ROUNDS`) at which ``chance`` (rounds → the share of races
    decided, :func:`chance_decided` cached) reaches ``target``, with that share; (None,
    the share at the most) when none does."""
    n, low = max(LOOK_EVERY, start), None
    while chance(n) < target:
        if n >= MOST_ROUNDS:
            return None, chance(n)
        low, n = n, min(MOST_ROUNDS, 2 * n)
    lo = low or n
    while n - lo > LOOK_EVERY:
        mid = (lo + n) // 2 // LOOK_EVERY * LOOK_EVERY
        if chance(mid) >= target:
            n = mid
        else:
            lo = mid
    return n, chance(n)


def from_runs(runs: list[Path], target: float, sims: int) -> None:
    print(
        "| run | tier | comparison | rounds | difference | s (within) | P(decided) then "
        f"| rounds for {target:.0%} |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for run in runs:
        design = json.loads((run / "run.json").read_text()).get("design")
        schedule = recorded_schedule(design)
        kw = {
            "instance_sd": schedule.instance_sd,
            "restart_every": schedule.restart_every,
            "runs": sims,
        }
        for c in open_comparisons(run):
            blocks = np.array([schedule.instance_of(int(r)) for r in c["rounds"]])
            diff, n = float(c["logs"].mean()), len(c["logs"])
            sd = pooled_within_sd(c["logs"], blocks)
            chance = functools.cache(functools.partial(chance_decided, diff, sd, **kw))
            now = chance(n)
            need, p = rounds_needed(chance, target, n)
            need_text = f"{need} ({p:.0%})" if need else f"> {MOST_ROUNDS} ({p:.0%})"
            print(
                f"| {run} | {c['tier']} | {c['a']} / {c['b']} | {n} | "
                f"{math.expm1(diff):+.1%} | {sd:.3f} | {now:.0%} | {need_text} |"
            )


def grid(diffs: list[float], sds: list[float], budgets: list[int], args) -> None:
    print("| difference | s | " + " | ".join(f"N = {n}" for n in budgets) + " |")
    print("|---|---|" + "---|" * len(budgets))
    for d in diffs:
        for s in sds:
            cells = [
                chance_decided(
                    math.log1p(d / 100),
                    s,
                    n,
                    instance_sd=args.instance_sd,
                    restart_every=args.restart_every,
                    margin=args.margin,
                    runs=args.sims,
                    seed=args.seed,
                )
                for n in budgets
            ]
            print(
                f"| {d:g} % | {s:g} | " + " | ".join(f"{c:.0%}" for c in cells) + " |"
            )


def numbers(text: str, kind=float) -> list:
    return [kind(x) for x in text.split(",") if x.strip()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--from", dest="run_dirs", nargs="+", type=Path, help="finished runs"
    )
    p.add_argument("--target", type=float, default=0.8)
    p.add_argument("--diff", default="3,5.5", help="true differences, per cent")
    p.add_argument(
        "--sd", default="0.06,0.09", help="round-to-round SDs of the log ratio"
    )
    p.add_argument("--rounds", default="18,36,60", help="budgets N in rounds")
    p.add_argument("--instance-sd", type=float, default=INSTANCE_SD)
    p.add_argument("--restart-every", type=int, default=3)
    p.add_argument("--margin", type=float, default=DEFAULT_EQUIVALENCE_MARGIN)
    p.add_argument("--sims", type=int, default=1000, help="simulated races per figure")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.run_dirs:
        from_runs(args.run_dirs, args.target, args.sims)
        return
    grid(numbers(args.diff), numbers(args.sd), numbers(args.rounds, int), args)


if __name__ == "__main__":
    main()
