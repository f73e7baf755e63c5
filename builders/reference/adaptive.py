"""Adaptive speculation: how many draft tokens a decode step proposes at a given batch size.

Two controls, as variant fields ``speculation: {max_concurrency, draft_len_schedule}``:

- ``max_concurrency`` N: no drafting in a step while more than N sequences are active
  (TensorRT-LLM ``DecodingBaseConfig.max_concurrency``, ``Drafter.should_use_spec_decode``:
  speculate iff the scheduled requests are ``<= max_concurrency``; vLLM's former
  ``disable_by_batch_size``, which vLLM 0.32 no longer has).
- ``draft_len_schedule`` ``{batch size: K}``: a step of ``b`` active sequences drafts the
  value of the smallest key ``>= b``, and nothing above the largest key (TensorRT-LLM
  1.4.0rc4 ``get_draft_len_for_batch_size``, PR #10860: ``{4: 4, 8: 2, 32: 1}`` drafts 4 at
  1..4, 2 at 5..8, 1 at 9..32 and 0 beyond).

Both may be given here (the step drafts what both allow; TensorRT-LLM 1.4 accepts only one of
them at a time). A step that drafts 0 is a plain decode step. The decoder reads the batch
size at the start of each step (rows admitted before it, after the retirements of the last).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DraftLenPolicy:
    """Drafts per step by active batch size.

    Args:
        k: the most drafts per step (``max_draft_len``; a Medusa tree's node count).
        max_concurrency: draft only while at most this many sequences are active.
        schedule: ``((batch size, K), …)`` sorted by batch size (see the module docstring).
    """

    k: int
    max_concurrency: int | None = None
    schedule: tuple[tuple[int, int], ...] | None = None

    @classmethod
    def build(
        cls,
        k: int,
        max_concurrency: int | None = None,
        schedule: Mapping[int, int] | None = None,
    ) -> DraftLenPolicy:
        """A policy from the spec's fields (the schedule's keys may be strings, as in
        JSON; they are sorted here).

        Raises:
            ValueError: a schedule value above ``k`` or below 0, or a key below 1.
        """
        items = None
        if schedule:
            items = tuple(sorted((int(b), int(n)) for b, n in schedule.items()))
            bad = [(b, n) for b, n in items if b < 1 or not 0 <= n <= k]
            if bad:
                raise ValueError(
                    f"draft_len_schedule entry {bad[0][0]}: {bad[0][1]} needs a batch size "
                    f">= 1 and a draft length in 0..{k}"
                )
        return cls(k, max_concurrency, items)

    def draft_len(self, batch_size: int) -> int:
        """Drafts per sequence for a step of ``batch_size`` active sequences (0: none)."""
        if self.max_concurrency is not None and batch_size > self.max_concurrency:
            return 0
        if self.schedule is None:
            return self.k
        for limit, n in self.schedule:
            if batch_size <= limit:
                return n
        return 0

    def lengths(self) -> tuple[int, ...]:
        """Every non-zero draft length a step may use (for CUDA-graph capture)."""
        if self.schedule is None:
            return (self.k,)
        return tuple(sorted({n for _, n in self.schedule if n > 0}))

    @property
    def adaptive(self) -> bool:
        """Whether the draft length depends on the batch size."""
        return self.max_concurrency is not None or self.schedule is not None
