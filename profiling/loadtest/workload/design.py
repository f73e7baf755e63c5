"""The measurement design of a run: which (variant, tier) cell is measured when (pure).

A comparison is only as good as its pairing: two variants measured minutes apart on a shared
host differ by whatever changed on the host in between (another process, heat, a clock), and
no interval over one variant's passes contains that. So ``trtbench run`` measures in
**rounds**: in each round every variant runs every tier once, and round r of variant A is
compared with round r of variant B (a randomised complete block design; the blocks are the
rounds, or the round's tier, and the order inside a block is drawn afresh each round, so a
drift lands on no variant systematically). Randomised interleaving is how Google Benchmark
(``--benchmark_enable_random_interleaving``) and asv (interleaved sampling) make repeated
measurements comparable on a noisy machine.

Designs (``loadtest.design``; run.json ``design``):

* ``interleaved``: every variant's server is up at once (``deploy.co_resident``). Round r
  visits the tiers in a shuffled order and, at each tier, the variants in a shuffled order,
  back to back: the two sides of a ratio are measured seconds apart.
* ``rounds``: the variants cannot share the machine (a 70B target per node). Round r serves
  the variants one after another in a shuffled order, each server started, run over every
  tier once (shuffled) and stopped: ``variants × rounds`` server starts.
* ``sequential``: the design before rounds: each variant once, all its passes back to back,
  in spec order. Its ratios pair pass r with pass r by number, not by time, so its intervals
  do not include drift between variants; the report says so.

Shuffles come from ``numpy.random.default_rng([seed, round, salt])``: the same seed gives the
same order, recorded in run.json.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from trtbench.profiling.loadtest.workload.repeats import tier_passes
from trtbench.profiling.loadtest.workload.schedule import Tier

INTERLEAVED, ROUNDS, SEQUENTIAL = "interleaved", "rounds", "sequential"
DESIGNS = (INTERLEAVED, ROUNDS, SEQUENTIAL)
PAIRED_DESIGNS = (INTERLEAVED, ROUNDS)
"""Designs whose round r of every variant is measured within one round (paired in time)."""
_TIER_SALT, _VARIANT_SALT = 1, 2

DESIGN_TEXT = {
    INTERLEAVED: (
        "interleaved: every server up at once; each round runs every (tier, variant) cell "
        "once in a shuffled order, the variants of a tier back to back, and each ratio pairs "
        "round r of one variant with round r of the other, measured seconds apart: its "
        "interval over rounds includes the host's drift"
    ),
    ROUNDS: (
        "rounds: each round serves the variants one after another in a shuffled order "
        "(servers restarted every round) and each ratio pairs round r with round r: its "
        "interval over rounds includes the host's drift between rounds"
    ),
    SEQUENTIAL: (
        "sequential: each variant measured once, all its passes back to back; ratios pair "
        "pass r with pass r by number, not by time, so their intervals do NOT include drift "
        "between variants (a change on the host between two variants reads as a difference)"
    ),
}
"""One sentence per design, for report.md and the terminal."""


@dataclass(frozen=True)
class Cell:
    """One measurement of a run: ``variant`` over ``tier`` in round ``round``.

    Attributes:
        position: 0-based place in the run's order.
        round: 0-based round (the ``repeat`` of the requests it sends).
        tier_index: the tier's position in the spec's tier list (seeds its arrivals).
        tier: the tier.
        variant: the variant's name.
    """

    position: int
    round: int
    tier_index: int
    tier: Tier
    variant: str


def _permutation(n: int, seed: int, r: int, salt: int, k: int = 0) -> list[int]:
    rng = np.random.default_rng([seed, r, salt, k])
    return [int(i) for i in rng.permutation(n)]


def plan_cells(
    design: str,
    variants: Sequence[str],
    tiers: Sequence[Tier],
    rounds: int,
    seed: int,
    tiers_of: Mapping[str, Sequence[str]] | None = None,
) -> list[Cell]:
    """Every cell of a run in the order it is measured (module docstring).

    Args:
        design: one of :data:`DESIGNS`.
        variants: variant names in spec order.
        tiers: the tiers in spec order.
        rounds: rounds (``loadtest.repeats``), ≥ 1.
        seed: the load test's seed.
        tiers_of: variant → the tier labels it measures (default: every tier); a follow-up
            measures each best fixed variant only at the tiers where it was best.

    Returns:
        The cells, ``position`` 0, 1, …; each (variant, tier) once per round.

    Raises:
        ValueError: unknown design, ``rounds`` < 1, no variants or no tiers.
    """
    if design not in DESIGNS:
        raise ValueError(f"unknown design {design!r}; use one of {', '.join(DESIGNS)}")
    if rounds < 1 or not variants or not tiers:
        raise ValueError("a run needs at least one round, one variant and one tier")

    def measures(variant: str, tier: Tier) -> bool:
        return tiers_of is None or tier.label in tiers_of.get(variant, ())

    raw: list[tuple[int, int, str]] = []  # (round, tier index, variant)
    if design == SEQUENTIAL:
        for v in variants:
            raw += [
                (p.repeat, p.index, v)
                for p in tier_passes(tiers, rounds, seed)
                if measures(v, p.tier)
            ]
    for r in range(rounds if design != SEQUENTIAL else 0):
        tier_order = _permutation(len(tiers), seed, r, _TIER_SALT)
        if design == INTERLEAVED:
            for k, t in enumerate(tier_order):
                here = [v for v in variants if measures(v, tiers[t])]
                order = _permutation(len(here), seed, r, _VARIANT_SALT, k + 1)
                raw += [(r, t, here[i]) for i in order]
        else:
            for i in _permutation(len(variants), seed, r, _VARIANT_SALT):
                raw += [
                    (r, t, variants[i])
                    for t in tier_order
                    if measures(variants[i], tiers[t])
                ]
    return [Cell(k, r, t, tiers[t], v) for k, (r, t, v) in enumerate(raw)]


def server_starts(
    design: str, variants: int, rounds: int, restart_every: int | None = None
) -> int:
    """Servers a run starts (at most, for a race that may stop early): one per variant,
    (``rounds``) one per variant per round, or (``interleaved`` with fresh servers every
    ``restart_every`` rounds) one per variant per block of rounds."""
    if design == ROUNDS:
        return variants * rounds
    if restart_every:
        return variants * -(-rounds // restart_every)
    return variants


def order_json(cells: Sequence[Cell]) -> list[list[object]]:
    """The run's order for run.json: ``[[round, tier label, variant], …]``."""
    return [[c.round, c.tier.label, c.variant] for c in cells]


def rounds_of(cells: Sequence[Cell], variant: str) -> dict[int, list[Cell]]:
    """Round → ``variant``'s cells in that round, in run order (the ``rounds`` design
    serves a variant once per round and runs these)."""
    out: dict[int, list[Cell]] = {}
    for c in cells:
        if c.variant == variant:
            out.setdefault(c.round, []).append(c)
    return out
