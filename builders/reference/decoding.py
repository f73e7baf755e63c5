"""Greedy decoding strategies of the reference engine: baseline, draft-target and Medusa.

Each decoder owns its :class:`ModelRunner` caches and the sequence so far. ``start(prompt)``
prefills and returns the first token; ``step()`` returns one decode step as a
:class:`Proposal` ``(tokens, proposed, accepted)`` where ``tokens`` are ``accepted`` draft
tokens followed by one token of the target's own (the bonus token), so
``len(tokens) == accepted + 1``. The caller (the engine) truncates at limits.

Losslessness: every emitted token is the target's greedy choice given the tokens before it —
a draft token is kept only when it equals the target's argmax at its parent position — so the
output equals baseline greedy decoding up to floating-point differences between a one-token
step and a batched verification step (see ``tests/unit/test_reference_engine.py``).

Sources: draft-target verification (Leviathan et al. 2023, arXiv 2211.17192, greedy case);
Medusa tree verification (Cai et al. 2024, arXiv 2401.10774; FasterDecoding
``medusa_model.py``): head k's top-k at the last accepted token's hidden state proposes the
token k+2 places ahead, a node's token is ``topk[depth-1][path[-1]]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from trtbench.builders.medusa_tree import MedusaTree
from trtbench.builders.reference.runner import ModelRunner


@dataclass(frozen=True)
class Proposal:
    """One decode step before truncation: ``tokens`` = accepted draft tokens + bonus token."""

    tokens: tuple[int, ...]
    proposed: int
    accepted: int


@dataclass(frozen=True)
class Greedy:
    """Greedy choice with ``eos_id`` forbidden for output indices below ``min_tokens``.

    Args:
        eos_id: the end token to suppress (None: nothing to suppress).
        min_tokens: outputs with index ``< min_tokens`` (0-based) cannot be ``eos_id``.
    """

    eos_id: int | None = None
    min_tokens: int = 0

    def pick(self, logits: torch.Tensor, indices: Sequence[int]) -> list[int]:
        """Argmax of each row of ``logits [q, vocab]``; row i is output index ``indices[i]``."""
        if self.eos_id is not None and min(indices) < self.min_tokens:
            logits = logits.clone()
            rows = [i for i, n in enumerate(indices) if n < self.min_tokens]
            logits[rows, self.eos_id] = float("-inf")
        return logits.argmax(dim=-1).tolist()


class BaselineDecoder:
    """One target forward per token."""

    proposed_per_step = 0

    def __init__(self, target: ModelRunner) -> None:
        self.target = target
        self.seq: list[int] = []
        self.emitted = 0

    def runners(self) -> tuple[ModelRunner, ...]:
        return (self.target,)

    def step_lengths(self) -> dict[str, tuple[int, ...]]:
        """Step lengths (tokens per forward) each runner sees after the prefill."""
        return {"target": (1,)}

    def start(self, prompt: Sequence[int], greedy: Greedy) -> Proposal:
        """Prefill ``prompt`` and return the first generated token."""
        logits, hidden = self.target.prefill(prompt)
        token = greedy.pick(logits, [0])[0]
        self._after_prefill(prompt, hidden[-1])
        self.seq = [*prompt, token]
        self.emitted = 1
        return Proposal((token,), 0, 0)

    def _after_prefill(self, prompt: Sequence[int], last_hidden: torch.Tensor) -> None:
        """Hook for decoders with more state to fill after the target's prefill."""

    def step(self, greedy: Greedy) -> Proposal:
        """Feed the last token, emit the next."""
        logits, _ = self.target.forward(self.seq[-1:])
        return self._emit(greedy.pick(logits, [self.emitted]), 0, 0)

    def _emit(self, tokens: list[int], proposed: int, accepted: int) -> Proposal:
        self.seq.extend(tokens)
        self.emitted += len(tokens)
        return Proposal(tuple(tokens), proposed, accepted)


class DraftTargetDecoder(BaselineDecoder):
    """The draft proposes K tokens one by one; the target verifies K+1 positions at once.

    Args:
        target: the target model runner.
        draft: the draft model runner (same vocabulary).
        k: draft tokens per step (``max_draft_len``).
    """

    def __init__(self, target: ModelRunner, draft: ModelRunner, k: int) -> None:
        super().__init__(target)
        self.draft = draft
        self.k = k
        self.proposed_per_step = k

    def runners(self) -> tuple[ModelRunner, ...]:
        return (self.target, self.draft)

    def step_lengths(self) -> dict[str, tuple[int, ...]]:
        return {"target": (self.k + 1,), "draft": (1, 2)}

    def _after_prefill(self, prompt: Sequence[int], last_hidden: torch.Tensor) -> None:
        self.draft.prefill(prompt)

    def _propose(self, greedy: Greedy) -> list[int]:
        """Catch the draft up with the sequence (1 or 2 tokens, one forward), then draft K."""
        logits, _ = self.draft.forward(self.seq[self.draft.length :])
        drafts = greedy.pick(logits[-1:], [self.emitted])
        for i in range(1, self.k):
            logits, _ = self.draft.forward(drafts[-1:])
            drafts += greedy.pick(logits, [self.emitted + i])
        return drafts

    def step(self, greedy: Greedy) -> Proposal:
        """Draft K, verify ``[last, d1..dK]``, keep the matching prefix and the bonus token.

        Both caches end holding the sequence without its newest token: the target is cropped
        to ``L + 1 + accepted``; the draft, which holds ``last, d1..d_{K-1}``, to at most that
        (after a full accept it lacks ``dK`` and catches up on the next step).
        """
        start = self.target.length
        drafts = self._propose(greedy)
        logits, _ = self.target.forward([self.seq[-1], *drafts])
        preds = greedy.pick(logits, range(self.emitted, self.emitted + self.k + 1))
        accepted = 0
        while accepted < self.k and drafts[accepted] == preds[accepted]:
            accepted += 1
        keep = start + 1 + accepted
        self.target.crop(keep)
        self.draft.crop(min(self.draft.length, keep))
        return self._emit([*drafts[:accepted], preds[accepted]], self.k, accepted)


class MedusaDecoder(BaselineDecoder):
    """Candidates from the heads' top-k along a tree, verified in one tree-masked forward.

    Args:
        target: the target model runner.
        heads: a sequence of head modules, head d mapping hidden ``[hidden]`` to
            ``[vocab]`` logits for depth d + 1
            (:class:`trtbench.builders.reference.medusa_heads.MedusaHeads`).
        tree: the tree (``build_tree``); its depth must not exceed the number of heads.
    """

    def __init__(self, target: ModelRunner, heads: nn.Module, tree: MedusaTree) -> None:
        super().__init__(target)
        self.heads = heads
        self.tree = tree
        self.proposed_per_step = tree.num_nodes
        device = target.device
        self._mask = torch.from_numpy(tree.attention_mask.copy())
        self._depth_index = torch.tensor(
            [len(c) - 1 for c in tree.choices], device=device
        )
        self._rank_index = torch.tensor([c[-1] for c in tree.choices], device=device)
        self._children: list[list[int]] = [[] for _ in range(tree.num_nodes + 1)]
        for node, parent in enumerate(tree.parents):
            if parent >= 0:
                self._children[parent].append(node)
        self._candidates: list[int] = []

    def step_lengths(self) -> dict[str, tuple[int, ...]]:
        return {"target": (self.tree.num_nodes + 1,)}

    @torch.inference_mode()
    def _propose_from(self, hidden: torch.Tensor) -> list[int]:
        """Tree node tokens (node 1..N) from the heads at one hidden state ``[hidden]``."""
        # Only the heads the tree reaches (head d proposes depth d + 1).
        logits = torch.stack([self.heads[d](hidden) for d in range(self.tree.depth)])
        topk = logits.topk(max(self.tree.topk_per_depth), dim=-1).indices
        return topk[self._depth_index, self._rank_index].tolist()

    def _after_prefill(self, prompt: Sequence[int], last_hidden: torch.Tensor) -> None:
        self._candidates = self._propose_from(last_hidden)

    def step(self, greedy: Greedy) -> Proposal:
        """Verify ``[last] + candidates`` in one pass and walk the longest matching path.

        The cache keeps the root and the accepted nodes only (``ModelRunner.keep``); the
        next candidates come from the hidden state of the last accepted node, whose target
        logits also gave the bonus token.
        """
        start = self.target.length
        nodes = [self.seq[-1], *self._candidates]
        logits, hidden = self.target.forward(
            nodes, self.tree.position_offsets, self._mask
        )
        indices = [self.emitted + d for d in self.tree.position_offsets]
        preds = greedy.pick(logits, indices)
        path, cur = [], 0
        while True:
            match = [c for c in self._children[cur] if nodes[c] == preds[cur]]
            if not match:
                break
            cur = match[0]  # siblings hold distinct top-k tokens: at most one matches
            path.append(cur)
        self._candidates = self._propose_from(hidden[cur])
        self.target.keep(start, [0, *path])
        tokens = [nodes[c] for c in path] + [preds[cur]]
        return self._emit(tokens, self.tree.num_nodes, len(path))
