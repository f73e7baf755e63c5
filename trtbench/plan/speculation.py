"""Speculative-decoding arithmetic: expected tokens per step, speedup, optimal γ, Medusa trees.

Sources: Leviathan et al. 2023 (arXiv 2211.17192) for the expected tokens per target step of
a draft chain (i.i.d. acceptance α), the wall-time gain (Thm 3.8) and the optimal γ (that gain
maximised over integer γ; their Fig. 3 plots the optimum); the Medusa paper (Cai et al. 2024,
arXiv 2401.10774, App. C) for the greedy tree construction.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from trtbench.builders.medusa_tree import Choices
from trtbench.core.errors import ConfigError


def expected_tokens_per_step(alpha: float, draft_len: int) -> float:
    """Expected tokens per target step, ``(1 - α^(γ+1)) / (1 - α)``; ``γ+1`` at α = 1.

    Raises:
        ConfigError: α outside [0, 1] or γ < 0.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"acceptance alpha must lie in [0, 1], got {alpha}")
    if draft_len < 0:
        raise ConfigError(f"draft length must be >= 0, got {draft_len}")
    if alpha == 1.0:
        return float(draft_len + 1)
    return (1.0 - alpha ** (draft_len + 1)) / (1.0 - alpha)


def leviathan_speedup(
    alpha: float, draft_len: int, cost_ratio: float, verify_ratio: float = 1.0
) -> float:
    """Wall-time gain ``E[N] / (γ c + v)`` (Leviathan Thm 3.8; v generalises the 1)."""
    return expected_tokens_per_step(alpha, draft_len) / (
        draft_len * cost_ratio + verify_ratio
    )


def optimal_draft_len(
    alpha: float, cost_ratio: float, max_draft_len: int = 64
) -> tuple[int, float]:
    """The integer γ in 1..max that maximises :func:`leviathan_speedup`, and that gain."""
    return max(
        (
            (g, leviathan_speedup(alpha, g, cost_ratio))
            for g in range(1, max_draft_len + 1)
        ),
        key=lambda item: item[1],
    )


def fit_alpha(tokens_per_step: float, draft_len: int) -> float:
    """Invert :func:`expected_tokens_per_step` (bisection): α from a measured acceptance length.

    Raises:
        ConfigError: the length lies outside [1, γ+1] (impossible for a chain of γ).
    """
    if not 1.0 <= tokens_per_step <= draft_len + 1 + 1e-9:
        raise ConfigError(
            f"acceptance length {tokens_per_step:.3f} is outside [1, {draft_len + 1}] for "
            f"draft length {draft_len}; check the run's max_draft_len"
        )
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (
            (mid, hi)
            if expected_tokens_per_step(mid, draft_len) < tokens_per_step
            else (lo, mid)
        )
    return (lo + hi) / 2


def greedy_medusa_tree(
    accuracies: Sequence[Sequence[float]], num_nodes: int
) -> Choices:
    """Best-first tree of ``num_nodes`` paths by path probability (Medusa App. C).

    Starts from ``(0,)``; each round adds, among every node's next sibling and first child
    (depth ≤ number of heads, rank < ranks given), the one with the largest product of
    per-rank accuracies. Returns the paths in insertion order.
    """
    heads = len(accuracies)

    def prob(path: tuple[int, ...]) -> float:
        out = 1.0
        for head, rank in enumerate(path):
            out *= accuracies[head][rank]
        return out

    def valid(path: tuple[int, ...]) -> bool:
        return len(path) <= heads and path[-1] < len(accuracies[len(path) - 1])

    if not heads or not accuracies[0]:
        raise ConfigError("medusa accuracies are empty; give at least head 1, rank 0")
    chosen: list[tuple[int, ...]] = []
    frontier = [(-prob((0,)), (0,))]
    while frontier and len(chosen) < num_nodes:
        _, path = heapq.heappop(frontier)
        chosen.append(path)
        for nxt in (path[:-1] + (path[-1] + 1,), path + (0,)):
            if valid(nxt):
                heapq.heappush(frontier, (-prob(nxt), nxt))
    return tuple(chosen)
