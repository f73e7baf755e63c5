"""A/A check of the measurement design: how often two identical variants are called
"significantly" different, interleaved vs sequential, on an idle host, with a CPU burner on
one core the whole time, and with a burner started halfway through the run (a drift).

Usage: .venv/bin/python scripts/aa_check.py [--rounds 18] [--block 3] [--out runs/aa]
       [--designs interleaved,sequential] [--conditions idle,burner,halfway] [--race N]
       [--spec YOUR_SPEC.yaml --twins NAME[,NAME]] [--race-minutes M] [--replay RUN_DIR…]

``--race N`` reads the run's rounds in blocks of N, each replayed as a race of
``loadtest.rounds: auto`` with budget N (``race_readings``): per tier and pair, the class
the race states (better / worse / equivalent / open) and the rounds it used; twins called
better or worse are its false positives (nominal: at most 5 %). ``--race-minutes M`` gives
each race a time budget too (its looks by the share of the budget used, from the block's
cell times); ``--replay RUN_DIR…`` replays finished A/A runs instead of measuring.

Spec: the tiny reference models (scripts/make_tiny_models.py), five variants: twin baselines
``base-a`` / ``base-b``, twin Medusa variants ``medusa-a`` / ``medusa-b`` and ``medusa-slow``
(``handicap: 0.1``, every decode step 10 % longer: about 9 % fewer tokens/s), at concurrency 1
and 4, 16 requests per cell. One ``trtbench run`` per design and condition with ``--rounds``
rounds; its rounds are then cut into blocks of ``--block`` consecutive rounds, each block read
as a run of the demo's size (3 rounds): per block, tier and twin pair, the paired output tok/s
ratio over the block's rounds (``profiling/report/paired.py``) is "significant" when its 95 %
interval excludes 1. In a ``sequential`` run block k pairs passes 3k..3k+2 of one twin with
the same passes of the other, measured a whole variant's run later, as in a sequential run of
the demo. The printed rate is the share of twin comparisons called significant (nominal 5 %,
two-sided), with its 95 % Clopper-Pearson interval; "power" is the share of blocks where
``medusa-slow`` is significantly slower than ``medusa-a`` (a 9 % loss).

``--spec`` builds the A/A spec from a user's own bench spec instead (its models, backends,
servers, traffic and settings): each variant named by ``--twins`` (default: the spec's first
two) runs as twins ``NAME-a`` / ``NAME-b``, and where the first one runs on the reference
engine behind Triton a third copy ``NAME-slow`` with ``handicap: 0.1`` measures the power (no
other stack can slow a variant by a known amount, so elsewhere only twins are measured);
``--tiers`` and ``--requests`` replace the spec's when given. This is how a team measures the
instance spread ``loadtest.instance_sd`` of its own stack (docs/aa_check.md).

Prints one row per design and condition, and writes ``OUT/aa_results.md``. Figures measured
while building trtbench are in docs/aa_check.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from trtbench.core.stacks import REFERENCE, TRITON
from trtbench.profiling.loadtest.stats.decisions import (
    LookSchedule,
    decide_pair,
    next_look_fits,
    recorded_schedule,
)
from trtbench.profiling.report.paired import paired_ratio
from trtbench.spec.bench import PATH_KEYS, load_spec, override_loadtest, resolve_paths

ROOT = Path(__file__).resolve().parents[1]
TWINS = (("base-a", "base-b"), ("medusa-a", "medusa-b"))
TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]
COLUMN = "output_tokens_per_s"
DONE = re.compile(r"tier_pass: .* \(round \d+\): ")
HANDICAP = 0.1


@dataclass(frozen=True)
class Pairs:
    """The comparisons an A/A run reads: twin pairs (identical variants) and the power
    pair (a variant over its ``handicap`` copy; None: no slowed copy)."""

    twins: tuple[tuple[str, str], ...]
    slow: tuple[str, str] | None

    def all(self) -> list[tuple[str, str]]:
        """Twin pairs, then the power pair."""
        return [*self.twins, *([self.slow] if self.slow else [])]


TINY = Pairs(TWINS, ("medusa-a", "medusa-slow"))


def spec_text(
    cache: Path,
    design: str,
    rounds: int,
    tiers: list[int],
    requests: int = 16,
    restart_every: int | None = None,
    instance_sd: float | None = None,
) -> str:
    """The A/A spec (module docstring) as YAML (``requests`` per cell; fresh servers every
    ``restart_every`` rounds; ``instance_sd``: the spec's τ, None: its default)."""
    common = {
        "dtype": "float32",
        "max_batch_size": 8,
        "max_input_len": 256,
        "max_seq_len": 512,
    }
    medusa = {"mode": "medusa", "medusa_choices": TREE, **common}
    variants = [
        {"name": "base-a", "mode": "baseline", **common},
        {"name": "base-b", "mode": "baseline", **common},
        {"name": "medusa-a", **medusa},
        {"name": "medusa-b", **medusa},
        {"name": "medusa-slow", "handicap": 0.1, **medusa},
    ]
    return yaml.safe_dump(
        {
            "name": f"aa-{design}",
            "backend": "reference",
            "models": {k: str(cache / "tiny-models" / k) for k in ("target", "medusa")},
            "variants": variants,
            "deploy": {"ready_timeout_s": 180},
            "loadtest": {
                "design": design,
                "concurrency": tiers,
                "repeats": rounds,
                "requests_per_tier": requests,
                "warmup_requests": 2,
                "input_len_mean": 32,
                "output_len_mean": 48,
                "seed": 0,
                **({"restart_every": restart_every} if restart_every else {}),
                **({"instance_sd": instance_sd} if instance_sd is not None else {}),
            },
        },
        sort_keys=False,
    )


def twin_spec(
    path: Path,
    names: list[str],
    design: str,
    rounds: int,
    tiers: list[int] | None,
    requests: int | None,
    restart_every: int | None = None,
    instance_sd: float | None = None,
) -> tuple[str, Pairs]:
    """The A/A spec built from the user's spec at ``path`` (module docstring) as YAML, and
    the pairs to read: ``names`` twinned (None or empty: the first two variants), a
    ``handicap`` copy of the first where the reference engine behind Triton runs it; the
    loadtest's design, rounds (fixed), tiers and requests per cell replaced.

    Raises:
        SystemExit: the spec does not load (trtbench's one-line message) or names no such
            variant.
    """
    try:
        spec = load_spec(path)
    except Exception as exc:  # ConfigError: its one line
        raise SystemExit(f"--spec {path}: {exc}") from None
    data = resolve_paths(
        yaml.safe_load(path.read_text()), path.resolve().parent, PATH_KEYS
    )
    raws = {raw.get("name"): raw for raw in data["variants"]}
    given = {v.name: (v, raws[v.name]) for v in spec.variants if v.name in raws}
    names = names or list(given)[:2]
    unknown = [n for n in names if n not in given]
    if unknown:
        raise SystemExit(
            f"--twins: {', '.join(unknown)} not a variant of {path}; "
            f"pick from {', '.join(given)}"
        )
    variants, twins = [], []
    for name in names:
        raw = given[name][1]
        variants += [{**raw, "name": f"{name}-a"}, {**raw, "name": f"{name}-b"}]
        twins.append((f"{name}-a", f"{name}-b"))
    first, raw = given[names[0]]
    slow = None
    if spec.backend_of(first) == REFERENCE and first.server == TRITON:
        variants.append({**raw, "name": f"{names[0]}-slow", "handicap": HANDICAP})
        slow = (f"{names[0]}-a", f"{names[0]}-slow")
    fields: dict[str, object] = {"design": design, "rounds": rounds}
    given = {
        "concurrency": tiers,
        "requests_per_tier": requests,
        "restart_every": restart_every,
    }
    fields |= {k: v for k, v in given.items() if v}  # none or 0: the spec's own
    if instance_sd is not None:  # 0 drops the term
        fields["instance_sd"] = instance_sd
    # the CLI's own override: a fixed number of rounds replaces either spelling and drops
    # the budget of rounds: auto
    out = override_loadtest(data, fields)
    out = {**out, "name": f"aa-{design}", "variants": variants}
    return yaml.safe_dump(out, sort_keys=False), Pairs(tuple(twins), slow)


def burner() -> subprocess.Popen:
    """A busy loop on one core (the house's standard noise)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def run_one(spec: Path, out: Path, condition: str, cells: int) -> float:
    """``trtbench run SPEC`` under ``condition``; returns its wall time (s)."""
    cmd = [
        str(ROOT / ".venv" / "bin" / "trtbench"),
        "run",
        str(spec),
        "--out",
        str(out),
    ]
    hog: subprocess.Popen | None = burner() if condition == "burner" else None
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop = threading.Event()

    def halfway() -> None:  # start the burner once half of the cells are done
        nonlocal hog
        log = out / "trtbench.log"
        while not stop.wait(1.0):
            text = log.read_text(errors="replace") if log.is_file() else ""
            if len(DONE.findall(text)) >= cells // 2:
                hog = burner()
                return

    watcher = threading.Thread(target=halfway, daemon=True)
    if condition == "halfway":
        watcher.start()
    try:
        code = proc.wait()
    finally:
        stop.set()
        if hog is not None:
            hog.kill()
            hog.wait()
    if code != 0:
        raise SystemExit(f"trtbench run exited {code}; see {out / 'trtbench.log'}")
    return time.monotonic() - start


def block_readings(
    rounds: pd.DataFrame, block: int, pairs: Pairs = TINY
) -> pd.DataFrame:
    """One row per block × tier × comparison (``pairs``): its ratio, interval and
    verdict."""
    rows = []
    rounds = rounds.assign(block=rounds["round"] // block)
    for b, part in rounds.groupby("block"):
        if part["round"].nunique() < block:
            continue  # a last, short block
        for tier in sorted(part["tier"].unique()):
            for a, c in pairs.all():
                pr = paired_ratio(part, a, c, tier, COLUMN)
                rows.append(
                    {
                        "block": b,
                        "tier": tier,
                        "pair": f"{a}/{c}",
                        "twin": (a, c) in pairs.twins,
                        "ratio": pr.ratio,
                        "significant": bool(
                            pr.low is not None and (pr.low > 1 or pr.high < 1)
                        ),
                        "slower": bool(pr.low is not None and pr.low > 1),
                    }
                )
    return pd.DataFrame(rows)


def round_ends(rounds: pd.DataFrame) -> pd.Series:
    """Round → seconds from the first cell's start to the end of that round's last cell
    (rounds.csv ``started_at`` + ``duration_s``)."""
    start = pd.to_datetime(rounds["started_at"], utc=True)
    end = start + pd.to_timedelta(rounds["duration_s"], unit="s")
    seconds = (end - start.min()).dt.total_seconds()
    return seconds.groupby(rounds["round"]).max()


def time_looks(
    ends: Sequence[float] | None,
    budget: int,
    budget_s: float | None,
    looks: Sequence[int],
) -> list[tuple[int, float]]:
    """The looks a live race with ``budget`` rounds (and ``budget_s`` seconds; None: no
    time budget) makes, from its rounds' end times (``ends[i]``: seconds from the race's
    start to the end of its round i): ``(n, t)`` at each look, ``t = max(n / budget, e /
    budget_s)``, and ``t = 1`` at the look after which the next would not fit (RacePlan's
    rule) or at ``budget``."""
    out, n_last, e_last = [], 0, 0.0
    for k, n in enumerate(looks):
        following = looks[k + 1] if k + 1 < len(looks) else None
        t, ending = n / budget, following is None
        if budget_s is not None and ends is not None and following is not None:
            e = ends[n - 1]
            t = max(t, e / budget_s)
            fits = next_look_fits(n, e, (n_last, e_last), following, budget_s)
            ending = e >= budget_s or not fits
            n_last, e_last = n, e
        out.append((n, 1.0 if ending else round(t, 6)))
        if ending:
            break
    return out


def race_readings(
    rounds: pd.DataFrame,
    budget: int,
    schedule: LookSchedule,
    pairs: Pairs = TINY,
    budget_s: float | None = None,
) -> pd.DataFrame:
    """One row per block of ``budget`` rounds × tier × comparison (``pairs``), each block
    replayed as a
    race of ``rounds: auto`` with that budget: the pair's per-round ratios are decided at
    the race's looks (``schedule``: ``LookSchedule(budget)`` with the run's instance term,
    ``decide_pair``: the code a live race runs) and the first look that decides ends it;
    else the last look's class (budget spent). A race of two variants stops measuring them
    when decided, so the replay of a fixed run gives the class and rounds a live race of
    that pair would have, on the same rounds. With fresh servers every k rounds a block
    starts on a multiple of k when ``budget`` is one (its rounds' instances are its own).
    With ``budget_s``, each race also has that many seconds, counted from its block's
    first cell, and makes its looks at the share of the budget used
    (:func:`time_looks`, on the block's own cell times)."""
    figure = rounds.set_index(["round", "tier", "variant"])[COLUMN]
    rows = []
    first = rounds["round"].min()
    for b in range((rounds["round"].max() - first + 1) // budget):
        block = range(first + b * budget, first + (b + 1) * budget)
        ends = None
        if budget_s is not None:
            ends = round_ends(rounds[rounds["round"].isin(block)]).tolist()
        made = time_looks(ends, budget, budget_s, schedule.looks())
        for tier in sorted(rounds["tier"].unique()):
            for a, c in pairs.all():
                ratios = np.array(
                    [
                        figure.get((r, tier, a), np.nan)
                        / figure.get((r, tier, c), np.nan)
                        for r in block
                    ]
                )
                decision, used, low, high = "open", budget, None, None
                for k, (n, _) in enumerate(made):
                    now = replace(schedule, made=tuple(made[: k + 1]))
                    d = decide_pair(ratios[:n], now, rounds=list(range(n)))
                    decision, low, high, used = d.decision, d.low, d.high, n
                    if decision != "open":
                        break
                rows.append(
                    {
                        "block": b,
                        "tier": tier,
                        "pair": f"{a}/{c}",
                        "twin": (a, c) in pairs.twins,
                        "decision": decision,
                        "rounds_used": used,
                        "low": low,
                        "high": high,
                    }
                )
    return pd.DataFrame(rows)


def instance_sd(
    rounds: pd.DataFrame, every: int, twins: tuple[tuple[str, str], ...] = TWINS
) -> tuple[float, int]:
    """τ, the SD of a twin pair's log ratio between server instances, from a run that
    started fresh servers every ``every`` rounds: per twin pair and tier, the variance of
    the instances' mean log ratios less the part the rounds' own spread explains
    (one-way random-effects ANOVA, method of moments: E[MS_between] = σ² + k τ²),
    pooled over pairs and tiers. Returns (τ, degrees of freedom of MS_between); τ = 0
    where the rounds' spread explains it all."""
    figure = rounds.set_index(["round", "tier", "variant"])[COLUMN]
    between, within, df_b, df_w = 0.0, 0.0, 0, 0
    for tier in sorted(rounds["tier"].unique()):
        for a, c in twins:
            logs = pd.Series(
                {
                    r: np.log(
                        figure.get((r, tier, a), np.nan)
                        / figure.get((r, tier, c), np.nan)
                    )
                    for r in sorted(rounds["round"].unique())
                }
            ).dropna()
            groups = [g.to_numpy() for _, g in logs.groupby(logs.index // every)]
            groups = [g for g in groups if g.size == every]
            if len(groups) < 2:
                continue
            means = np.array([g.mean() for g in groups])
            between += every * means.var(ddof=1) * (len(groups) - 1)
            within += sum(((g - g.mean()) ** 2).sum() for g in groups)
            df_b += len(groups) - 1
            df_w += len(groups) * (every - 1)
    if not df_b or not df_w:
        return float("nan"), 0
    ms_b, ms_w = between / df_b, within / df_w
    return float(np.sqrt(max(0.0, (ms_b - ms_w) / every))), df_b


def race_row(design: str, condition: str, races: pd.DataFrame, wall: float) -> str:
    """A results row for the replayed races: twins called different / equivalent, the 10 %
    loss called worse (``medusa-a`` over ``medusa-slow`` decided better), rounds used."""
    twins, slow = races[races["twin"]], races[~races["twin"]]
    wrong = int(twins["decision"].isin(["better", "worse"]).sum())
    same = int((twins["decision"] == "equivalent").sum())
    seen = int((slow["decision"] == "better").sum())
    used = races["rounds_used"]
    return (
        f"| {design} | {condition} | {rate_text(wrong, len(twins))} | "
        f"{rate_text(same, len(twins))} | {rate_text(seen, len(slow))} | "
        f"{used.median():g} / {used.max():g} | {wall:.0f} |"
    )


def replay(run: Path, budget: int, minutes: float | None, lines: list[str]) -> None:
    """Print the race row of a finished A/A run (``--replay``), its races of ``budget``
    rounds (and ``minutes``), with the instance term the run recorded."""
    table = pd.read_csv(run / "loadtest" / "rounds.csv")
    design = json.loads((run / "run.json").read_text()).get("design")
    recorded = recorded_schedule(design)
    schedule = LookSchedule(
        budget, instance_sd=recorded.instance_sd, restart_every=recorded.restart_every
    )
    budget_s = None if minutes is None else 60.0 * minutes
    races = race_readings(table, budget, schedule, TINY, budget_s)
    row = race_row("replay", run.name, races, 0.0)
    print(row, flush=True)
    lines.append(row)


def rate_text(k: int, n: int) -> str:
    """``k/n = p % [low, high]`` with a 95 % Clopper-Pearson interval."""
    if n == 0:
        return "-"
    low = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
    high = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return f"{k}/{n} = {k / n:.1%} [{low:.1%}, {high:.1%}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=18)
    p.add_argument("--block", type=int, default=3)
    p.add_argument(
        "--tiers",
        default=None,
        help="concurrency tiers (default: 1,4; with --spec: its own)",
    )
    p.add_argument("--designs", default="interleaved,sequential")
    p.add_argument("--conditions", default="idle,burner,halfway")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "aa")
    p.add_argument(
        "--race",
        type=int,
        default=None,
        metavar="N",
        help="replay blocks of N rounds as races of rounds: auto (budget N) instead of "
        "reading blocks of --block rounds at 95 %%",
    )
    p.add_argument(
        "--race-minutes",
        type=float,
        default=None,
        metavar="M",
        help="with --race: each race also has M minutes (its looks by the share of the "
        "budget used, as a live race with loadtest.budget.max_minutes)",
    )
    p.add_argument(
        "--replay",
        type=Path,
        nargs="+",
        default=None,
        metavar="RUN_DIR",
        help="with --race: replay these finished A/A runs instead of measuring",
    )
    p.add_argument(
        "--requests",
        type=int,
        default=None,
        help="requests per cell (default: 16; with --spec: its own)",
    )
    p.add_argument(
        "--restart-every",
        type=int,
        default=None,
        help="fresh servers every K rounds (loadtest.restart_every; interleaved only)",
    )
    p.add_argument(
        "--instance-sd",
        type=float,
        default=None,
        help="the spec's loadtest.instance_sd (default: trtbench's), used by the replay",
    )
    p.add_argument(
        "--spec",
        type=Path,
        default=None,
        help="build the twins from this bench spec (yours) instead of the tiny CPU spec",
    )
    p.add_argument(
        "--twins",
        default="",
        help="variants of --spec to twin, comma-separated (default: its first two)",
    )
    args = p.parse_args()
    cache = Path(os.environ.get("TRTBENCH_CACHE", Path.home() / ".cache" / "trtbench"))
    tiers = [int(t) for t in args.tiers.split(",")] if args.tiers else None
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [
        "| design | condition | twins called significant | median abs log ratio "
        "| handicap 0.1 seen (power) | wall s |",
        "|---|---|---|---|---|---|",
    ]
    if args.race:
        lines = [
            f"| design | condition | twins called different (race, budget {args.race}) "
            "| twins called equivalent | handicap 0.1 called worse (power) "
            "| rounds used, median / max | wall s |",
            "|---|---|---|---|---|---|---|",
        ]
    print(lines[0])
    if args.replay:
        if not args.race:
            p.error("--replay needs --race N")
        for run in args.replay:
            replay(run, args.race, args.race_minutes, lines)
        return
    for design in args.designs.split(","):
        spec = args.out / f"aa-{design}.yaml"
        if args.spec:
            names = [n for n in args.twins.split(",") if n]
            text, pairs = twin_spec(
                args.spec,
                names,
                design,
                args.rounds,
                tiers,
                args.requests,
                args.restart_every,
                args.instance_sd,
            )
        else:
            text, pairs = (
                spec_text(
                    cache,
                    design,
                    args.rounds,
                    tiers or [1, 4],
                    args.requests or 16,
                    args.restart_every,
                    args.instance_sd,
                ),
                TINY,
            )
        spec.write_text(text)
        n_tiers = len(yaml.safe_load(text)["loadtest"].get("concurrency") or [1])
        for condition in args.conditions.split(","):
            out = args.out / f"{design}-{condition}"
            cells = (2 * len(pairs.twins) + bool(pairs.slow)) * n_tiers * args.rounds
            wall = run_one(spec, out, condition, cells)
            if args.race:
                table = pd.read_csv(out / "loadtest" / "rounds.csv")
                recorded = recorded_schedule(
                    json.loads((out / "run.json").read_text()).get("design")
                )
                schedule = LookSchedule(
                    args.race,
                    instance_sd=recorded.instance_sd,
                    restart_every=recorded.restart_every,
                )
                races = race_readings(table, args.race, schedule, pairs)
                if args.restart_every:
                    tau, df = instance_sd(table, args.restart_every, pairs.twins)
                    print(f"instance SD from {df} df: {tau:.4f}", flush=True)
                    lines.append(
                        f"<!-- {design}-{condition}: instance SD {tau:.4f}, {df} df -->"
                    )
                row = race_row(design, condition, races, wall)
                print(row, flush=True)
                lines.append(row)
                races.to_csv(out / "aa_races.csv", index=False)
                continue
            readings = block_readings(
                pd.read_csv(out / "loadtest" / "rounds.csv"), args.block, pairs
            )
            twins = readings[readings["twin"]]
            slow = readings[~readings["twin"]]
            row = (
                f"| {design} | {condition} | "
                f"{rate_text(int(twins['significant'].sum()), len(twins))} | "
                f"{np.median(np.abs(np.log(twins['ratio']))):.3f} | "
                f"{rate_text(int(slow['slower'].sum()), len(slow))} | {wall:.0f} |"
            )
            print(row, flush=True)
            lines.append(row)
            readings.to_csv(out / "aa_blocks.csv", index=False)
    (args.out / "aa_results.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / 'aa_results.md'}")


if __name__ == "__main__":
    main()
