"""Greedy decoding strategies of the reference engine, over a batch of sequences.

A decoder owns its :class:`ModelRunner` caches and one :class:`Row` per active sequence
(row ``r`` lives in cache slot ``r`` of every runner; :meth:`BaselineDecoder.retire` keeps
the rows dense by moving the last row into the freed slot). ``admit(prompt)`` prefills a new
row alone and returns its first token; ``step()`` runs one decode step for all rows together
— ONE batched target forward — and returns one :class:`Proposal` ``(tokens, proposed,
accepted)`` per row, where ``tokens`` are ``accepted`` draft tokens followed by one token of
the target's own (the bonus token), so ``len(tokens) == accepted + 1``. The caller (the
batcher) truncates at limits. A speculative decoder's ``policy`` (``adaptive.py``) sets how
many drafts a step makes from the number of active rows; 0 makes it a plain decode step.
The n-gram (prompt lookup) decoder lives in ``ngram.py``.

Losslessness: every emitted token is the target's greedy choice given the tokens before it —
a draft token is kept only when it equals the target's argmax at its parent position — so the
output equals baseline greedy decoding up to floating-point differences between step shapes
(one token vs a verification of several, one row vs a batch; see
``tests/unit/test_reference_engine.py`` and ``tests/unit/test_batching.py``).

Sources: draft-target verification (Leviathan et al. 2023, arXiv 2211.17192, greedy case);
Medusa tree verification (Cai et al. 2024, arXiv 2401.10774; FasterDecoding
``medusa_model.py``): head k's top-k at the last accepted token's hidden state proposes the
token k+2 places ahead, a node's token is ``topk[depth-1][path[-1]]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from trtbench.builders.medusa_tree import MedusaTree
from trtbench.builders.reference.adaptive import DraftLenPolicy
from trtbench.builders.reference.runner import ModelRunner
from trtbench.builders.reference.tree_accept import TreeTables, accept_tree


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

    def suppresses(self, indices: Sequence[int]) -> bool:
        """Whether any of these output indices must not be ``eos_id``."""
        return self.eos_id is not None and min(indices) < self.min_tokens

    def pick(self, logits: torch.Tensor, indices: Sequence[int]) -> list[int]:
        """Argmax of each row of ``logits [q, vocab]``; row i is output index ``indices[i]``."""
        if self.suppresses(indices):
            logits = logits.clone()
            rows = [i for i, n in enumerate(indices) if n < self.min_tokens]
            logits[rows, self.eos_id] = float("-inf")
        return logits.argmax(dim=-1).tolist()


@dataclass
class Row:
    """One active sequence: its owner's tag, tokens so far and decoding state."""

    tag: object
    greedy: Greedy
    seq: list[int]
    emitted: int = 0
    candidates: list[int] = field(default_factory=list)  # Medusa: next tree's tokens


class BaselineDecoder:
    """One target forward per token for every row."""

    proposed_per_step = 0

    def __init__(self, target: ModelRunner) -> None:
        self.target = target
        self.rows: list[Row] = []

    @property
    def slots(self) -> int:
        """Rows decoded together at most (the cache's batch slots)."""
        return self.target.slots

    def runners(self) -> tuple[ModelRunner, ...]:
        return (self.target,)

    def step_lengths(self) -> dict[str, tuple[int, ...]]:
        """Step lengths (tokens per row and forward) each runner sees after the prefill."""
        return {"target": (1,)}

    def admit(
        self,
        tag: object,
        prompt: Sequence[int],
        greedy: Greedy,
        generated: Sequence[int] = (),
    ) -> Proposal:
        """Prefill ``prompt`` + ``generated`` into the next free slot (alone) and return
        the next token (the first output token, or after a preemption the one following
        the ``generated`` tokens already delivered: a recomputation).

        Raises:
            ValueError: every slot is taken.
        """
        slot = len(self.rows)
        if slot >= self.slots:
            raise ValueError(f"all {self.slots} slots are taken; retire a row first")
        context = [*prompt, *generated]
        logits, hidden = self.target.prefill(slot, context)
        token = greedy.pick(logits[None], [len(generated)])[0]
        row = Row(tag, greedy, [*context, token], emitted=len(generated) + 1)
        self._after_prefill(slot, row, hidden)
        self.rows.append(row)
        return Proposal((token,), 0, 0)

    def _after_prefill(self, slot: int, row: Row, last_hidden: torch.Tensor) -> None:
        """Hook for decoders with more state to fill after the target's prefill."""

    def retire(self, index: int) -> None:
        """Drop row ``index``; the last row moves into its slot (indices above shift)."""
        last = len(self.rows) - 1
        if index != last:
            for runner in self.runners():
                runner.move(last, index)
            self.rows[index] = self.rows[last]
        self.rows.pop()

    def clear(self) -> None:
        """Drop every row (after a failed step: their cache state is unknown)."""
        self.rows.clear()

    def verify_tokens(self, batch_size: int) -> int:
        """Tokens per row a step at this batch size feeds (1: a plain step); the KV pool
        reserves their blocks (``kv_blocks.py``)."""
        return 1

    def step(self, allow: Sequence[bool] | None = None) -> list[Proposal]:
        """Feed each row's last token in one forward; emit the next token of each.

        ``allow`` (speculative decoders): per row, whether it may verify drafts this step
        (False: the row drafts nothing, its KV blocks could not be had); None: all."""
        return self._plain()[0]

    def _plain(self) -> tuple[list[Proposal], torch.Tensor]:
        """A plain decode step (no drafts) of every row: its proposals and the target's
        hidden states ``[b, 1, hidden]`` (speculative decoders use it when they do not
        draft this step)."""
        logits, hidden = self.target.forward([r.seq[-1:] for r in self.rows])
        picks = self._pick(logits, [0])
        rows = zip(self.rows, picks, strict=True)
        return [self._emit(r, p, 0, 0) for r, p in rows], hidden

    def _pick(self, logits: torch.Tensor, offsets: Sequence[int]) -> list[list[int]]:
        """Greedy tokens of ``logits [b, q, vocab]``; column j of row r is that row's output
        index ``emitted + offsets[j]`` (for its end-token suppression)."""
        picks = logits.argmax(dim=-1).tolist()
        for r, row in enumerate(self.rows):
            indices = [row.emitted + o for o in offsets]
            if row.greedy.suppresses(indices):
                picks[r] = row.greedy.pick(logits[r], indices)
        return picks

    def _pick_tensor(
        self, logits: torch.Tensor, offsets: Sequence[int]
    ) -> torch.Tensor:
        """:meth:`_pick` as an int64 tensor ``[b, q]`` on the logits' device, without a
        copy to the host unless a row must suppress its end token this step (then the
        per-row rule of :meth:`_pick` applies)."""
        if any(
            row.greedy.suppresses([row.emitted + o for o in offsets])
            for row in self.rows
        ):
            return torch.tensor(self._pick(logits, offsets), device=logits.device)
        return logits.argmax(dim=-1)

    @staticmethod
    def _emit(row: Row, tokens: list[int], proposed: int, accepted: int) -> Proposal:
        row.seq.extend(tokens)
        row.emitted += len(tokens)
        return Proposal(tuple(tokens), proposed, accepted)


class ChainDecoder(BaselineDecoder):
    """A decoder that drafts a chain of up to ``k`` tokens per row, how many by batch size
    (``policy``: ``adaptive.py``; default always ``k``); verification feeds K + 1 tokens."""

    def __init__(
        self, target: ModelRunner, k: int, policy: DraftLenPolicy | None = None
    ) -> None:
        super().__init__(target)
        self.k = k
        self.policy = policy or DraftLenPolicy(k)
        self.proposed_per_step = k

    def verify_lengths(self) -> tuple[int, ...]:
        """The target's step lengths: K + 1 per scheduled K, and 1 when steps may be plain."""
        verify = {n + 1 for n in self.policy.lengths()}
        if self.policy.adaptive:
            verify.add(1)
        return tuple(sorted(verify))

    def verify_tokens(self, batch_size: int) -> int:
        return self.policy.draft_len(batch_size) + 1


class DraftTargetDecoder(ChainDecoder):
    """The draft proposes K tokens per row (K batched draft forwards); the target verifies
    K+1 positions per row in one batched forward.

    Args:
        target: the target model runner.
        draft: the draft model runner (same vocabulary, same slots).
        k: draft tokens per step at most (``max_draft_len``).
        policy: draft tokens per step by batch size (``adaptive.py``; default: always
            ``k``). A step that drafts 0 is a plain decode step; the draft's cache catches
            up with the skipped tokens at the next drafting step.
    """

    def __init__(
        self,
        target: ModelRunner,
        draft: ModelRunner,
        k: int,
        policy: DraftLenPolicy | None = None,
    ) -> None:
        super().__init__(target, k, policy)
        self.draft = draft

    def runners(self) -> tuple[ModelRunner, ...]:
        return (self.target, self.draft)

    def step_lengths(self) -> dict[str, tuple[int, ...]]:
        return {"target": self.verify_lengths(), "draft": (1, 2)}

    def _after_prefill(self, slot: int, row: Row, last_hidden: torch.Tensor) -> None:
        self.draft.prefill(slot, row.seq[:-1])

    def _propose(self, k: int) -> list[list[int]]:
        """Catch each row's draft up with its sequence (1 or 2 tokens, more after plain
        steps; one forward for all rows, shorter rows padded), then draft k tokens per row."""
        catch = [r.seq[self.draft.lengths[i] :] for i, r in enumerate(self.rows)]
        logits, _ = self.draft.forward(catch)
        last = torch.tensor([len(c) - 1 for c in catch], device=logits.device)
        logits = logits[torch.arange(len(catch), device=logits.device), last]
        drafts = self._pick(logits[:, None], [0])
        for i in range(1, k):
            logits, _ = self.draft.forward([d[-1:] for d in drafts])
            for d, p in zip(drafts, self._pick(logits, [i]), strict=True):
                d.extend(p)
        return drafts

    def step(self, allow: Sequence[bool] | None = None) -> list[Proposal]:
        """Draft K per row, verify ``[last, d1..dK]`` of all rows in one forward; each row
        keeps its matching prefix and its bonus token. A row not in ``allow`` feeds its
        last token alone (the forward pads it) and proposes nothing.

        Both caches of a row end holding its sequence without the newest token: the target
        is cropped to ``L + 1 + accepted``; the draft, which holds ``last, d1..d_{K-1}``, to
        at most that (after a full accept it lacks ``dK`` and catches up on the next step).
        """
        k = self.policy.draft_len(len(self.rows))
        allow = [True] * len(self.rows) if allow is None else list(allow)
        if k == 0 or not any(allow):
            return self._plain()[0]
        starts = self.target.lengths[: len(self.rows)]
        drafts = self._propose(k)
        drafts = [d if ok else [] for d, ok in zip(drafts, allow, strict=True)]
        logits, _ = self.target.forward(
            [[r.seq[-1], *d] for r, d in zip(self.rows, drafts, strict=True)]
        )
        preds = self._pick(logits, range(k + 1))
        out = []
        for i, (row, d, p) in enumerate(zip(self.rows, drafts, preds, strict=True)):
            accepted = 0
            while accepted < len(d) and d[accepted] == p[accepted]:
                accepted += 1
            keep = starts[i] + 1 + accepted
            self.target.crop(i, keep)
            self.draft.crop(i, keep)
            tokens = [*d[:accepted], p[accepted]]
            out.append(self._emit(row, tokens, len(d), accepted))
        return out


class MedusaDecoder(BaselineDecoder):
    """Candidates from the heads' top-k along a tree, verified in one tree-masked forward
    over all rows (each row its own tree, same shape and mask, positions from its length).

    Args:
        target: the target model runner.
        heads: a sequence of head modules, head d mapping hidden ``[..., hidden]`` to
            ``[..., vocab]`` logits for depth d + 1
            (:class:`trtbench.builders.reference.medusa_heads.MedusaHeads`).
        tree: the tree (``build_tree``); its depth must not exceed the number of heads.
        max_concurrency: verify no tree in a step while more rows than this are active
            (a plain decode step; the heads still propose from its hidden states).
    """

    def __init__(
        self,
        target: ModelRunner,
        heads: nn.Module,
        tree: MedusaTree,
        max_concurrency: int | None = None,
    ) -> None:
        super().__init__(target)
        self.heads = heads
        self.tree = tree
        self.policy = DraftLenPolicy(tree.num_nodes, max_concurrency)
        self.proposed_per_step = tree.num_nodes
        self._mask = torch.from_numpy(tree.attention_mask.copy())
        self._tables = TreeTables.build(tree, target.device)
        self._depth_index = torch.tensor(
            [len(c) - 1 for c in tree.choices], device=target.device
        )
        self._rank_index = torch.tensor(
            [c[-1] for c in tree.choices], device=target.device
        )

    def step_lengths(self) -> dict[str, tuple[int, ...]]:
        plain = (1,) if self.policy.adaptive else ()
        return {"target": (*plain, self.tree.num_nodes + 1)}

    @torch.inference_mode()
    def _propose_tensor(self, hidden: torch.Tensor) -> torch.Tensor:
        """Tree node tokens (nodes 1..N) per row, ``[b, N]`` int64 on the device, from
        hidden states ``[b, hidden]``."""
        # Only the heads the tree reaches (head d proposes depth d + 1): [depth, b, vocab].
        logits = torch.stack([self.heads[d](hidden) for d in range(self.tree.depth)])
        topk = logits.topk(max(self.tree.topk_per_depth), dim=-1).indices
        return topk[self._depth_index, :, self._rank_index].T

    def _propose_from(self, hidden: torch.Tensor) -> list[list[int]]:
        """:meth:`_propose_tensor` as lists (one per row)."""
        return self._propose_tensor(hidden).tolist()

    def _after_prefill(self, slot: int, row: Row, last_hidden: torch.Tensor) -> None:
        row.candidates = self._propose_from(last_hidden[None])[0]

    def verify_tokens(self, batch_size: int) -> int:
        return 1 if self.policy.draft_len(batch_size) == 0 else self.tree.num_nodes + 1

    def step(self, allow: Sequence[bool] | None = None) -> list[Proposal]:
        """Verify ``[last] + candidates`` of every row in one pass; accept each row's longest
        matching path (``tree_accept.py``: tensor operations for all rows, no per-row loop
        on the device; one copy to the host at the end).

        A row's cache keeps the root and its accepted nodes only (``ModelRunner.keep_paths``,
        one copy per layer for all rows); its
        next candidates come from the hidden state of its last accepted node, whose target
        logits also gave the bonus token. A row not in ``allow`` keeps its root only (its
        tree is computed with the others' but proposes and accepts nothing: the target's
        token at the root, as a plain step).
        """
        every = allow is None or all(allow)
        allow = [True] * len(self.rows) if allow is None else list(allow)
        if self.policy.draft_len(len(self.rows)) == 0 or not any(allow):
            out, hidden = self._plain()
            for row, candidates in zip(
                self.rows, self._propose_from(hidden[:, 0]), strict=True
            ):
                row.candidates = candidates
            return out
        device = self.target.device
        starts = self.target.lengths[: len(self.rows)]
        nodes = torch.tensor(
            [[r.seq[-1], *r.candidates] for r in self.rows], device=device
        )
        offsets = self.tree.position_offsets
        logits, hidden = self.target.forward(nodes, offsets, self._mask)
        preds = self._pick_tensor(logits, offsets)
        allowed = None if every else torch.tensor(allow, device=device)
        result = accept_tree(self._tables, nodes, preds, allowed)
        self.target.keep_paths(starts, result.path)
        ends = result.end.view(-1, 1, 1).expand(-1, 1, hidden.shape[-1])
        candidates = self._propose_tensor(hidden.gather(1, ends)[:, 0])
        host = torch.cat(
            [result.accepted[:, None], result.tokens, candidates], dim=1
        ).tolist()  # the step's one copy to the host
        out = []
        for i, row in enumerate(self.rows):
            accepted, *rest = host[i]
            self.target.lengths[i] = starts[i] + accepted + 1
            row.candidates = rest[self.tree.depth + 1 :]
            proposed = self.tree.num_nodes if allow[i] else 0
            out.append(self._emit(row, rest[: accepted + 1], proposed, accepted))
        return out
