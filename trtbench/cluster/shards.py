"""The benchmark matrix cut into shards (pure).

Nodes of a cluster differ, so a shard never leans on another shard's figures: every shard
measures the spec's baseline beside its own variant(s), interleaved as ``trtbench run``
does on one machine, and its speedups are ratios over that baseline (within-shard). In the
merged run the baseline's rows of shard ``sK`` are named ``<baseline>@sK``
(:func:`shard_label`), so each shard's reference stays visible beside the variants it
served as the reference for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trtbench.core.errors import ConfigError


@dataclass(frozen=True)
class Shard:
    """One Slurm array task: a ``trtbench run`` of ``variants`` on one node.

    Attributes:
        index: the array task id (0-based).
        variants: the variants it measures, spec order, the baseline first.
    """

    index: int
    variants: tuple[str, ...]

    @property
    def name(self) -> str:
        """``s<index>``: the shard's folder under ``RUN/shards/`` and its label."""
        return f"s{self.index}"


def plan_shards(
    variants: Sequence[str], baseline: str | None, per_shard: int
) -> list[Shard]:
    """Cut ``variants`` into shards of ``per_shard`` non-baseline variants, each with the
    baseline.

    Args:
        variants: the selected variant names, spec order.
        baseline: the baseline variant among them.
        per_shard: non-baseline variants per shard (≥ 1).

    Returns:
        ``ceil(n / per_shard)`` shards (``n`` = non-baseline variants; one shard of the
        baseline alone when there is none), indexes 0, 1, …; variants keep spec order.

    Raises:
        ConfigError: no baseline among ``variants`` (nothing to compare within a shard), or
            ``per_shard`` < 1.
    """
    if per_shard < 1:
        raise ConfigError(
            f"--variants-per-shard is {per_shard}; give 1 or more (non-baseline "
            "variants measured beside the baseline in each shard)"
        )
    if baseline is None or baseline not in variants:
        raise ConfigError(
            "--executor slurm needs a variant with mode: baseline among the variants "
            "run: each shard measures it beside its own variants (add one to the spec, "
            "or pass it with --variant)"
        )
    others = [v for v in variants if v != baseline]
    if not others:
        return [Shard(0, (baseline,))]
    chunks = [others[i : i + per_shard] for i in range(0, len(others), per_shard)]
    return [Shard(i, (baseline, *chunk)) for i, chunk in enumerate(chunks)]


def shard_label(variant: str, shard: Shard, baseline: str) -> str:
    """The variant's name in the merged run: ``<baseline>@sK`` for the baseline measured by
    shard ``sK``; every other variant (measured by one shard only) keeps its name."""
    return f"{variant}@{shard.name}" if variant == baseline else variant


def shard_of_variant(shards: Sequence[Shard], variant: str) -> Shard | None:
    """The shard that measures the non-baseline ``variant`` (None: none does)."""
    return next((s for s in shards if variant in s.variants[1:]), None)
