"""EAGLE-3 decoding: an :class:`~trtbench.builders.reference.eagle3.Eagle3Draft` drafts a chain.

Per row, positions follow vLLM 0.32's EAGLE proposer (``vllm/v1/spec_decode/
llm_base_proposer.py``): draft position ``p`` holds the token at ``p + 1`` with the target's
fused aux states of position ``p`` (``fc(aux_p)``), so it predicts the token at ``p + 2``. A
row whose sequence is ``x_0..x_L`` (``x_L`` newest, not yet fed to the target) has the
target's cache at ``L`` tokens; the draft's cache holds positions ``0..D-1`` and the target's
aux states of positions ``D..L-1`` wait in the row's *pending* list (always at least one:
``D + len(pending) == L``).

A drafting step (K drafts):

1. catch-up — one batched draft forward over each row's pending positions (tokens
   ``x_{D+1}..x_L``, hidden ``fc(pending)``; rows of different counts are padded); the last
   position's logits give ``d_1`` and its pre-norm output ``h``;
2. chain — K - 1 batched draft forwards of ``(d_i, h)`` at the next positions, each giving
   ``d_{i+1}`` and the next ``h`` (the draft's own output replaces the target's states);
3. verify — one batched target forward over ``[x_L, d_1..d_K]`` (K + 1 tokens, like
   draft-target) that also yields the aux states of those positions; each row keeps the
   longest prefix of drafts equal to the target's argmax plus the target's own next token
   (lossless, as ``decoding.py``). The target is cropped to ``L + 1 + accepted``; the draft
   to ``L`` (its chain entries were made from its own states, not the target's, and are
   recomputed from the target's states at the next catch-up); the pending list becomes the
   aux states of positions ``L..L + accepted``.

A plain step (draft length 0 by the adaptive policy, or no row allowed) feeds one token per
row and appends its aux state to the pending list; the draft catches up at the next drafting
step. A row not in ``allow`` drafts with the others but verifies its last token only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from trtbench.builders.reference.adaptive import DraftLenPolicy
from trtbench.builders.reference.decoding import ChainDecoder, Proposal, Row
from trtbench.builders.reference.eagle3 import Eagle3Draft
from trtbench.builders.reference.runner import ModelRunner


class Eagle3Runner(ModelRunner):
    """A :class:`ModelRunner` over an :class:`Eagle3Draft` (its own slot KV cache, 1 layer).

    Each forward takes, with the tokens, one hidden state ``[H]`` per token (the fused target
    states or the draft's own) and returns the pre-norm output only: the caller applies the
    LM head (``Eagle3Draft.logits``) to the positions it needs. Always eager (no CUDA graph:
    the target's verification is the captured step).
    """

    def __init__(self, draft: Eagle3Draft, max_cache_len: int, slots: int = 1) -> None:
        super().__init__(draft, max_cache_len, slots)
        self._hidden_in: torch.Tensor | None = None

    def forward_with(
        self, rows: Sequence[Sequence[int]], hidden: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """:meth:`ModelRunner.forward` of ``rows`` with ``hidden[r]`` ``[len(rows[r]), H]``.

        Returns the pre-norm output ``[b, q, H]``; shorter rows are padded (padding is past
        the row's length, never seen)."""
        q = max(len(t) for t in rows)
        width = hidden[0].shape[-1]
        padded = torch.zeros(len(rows), q, width, dtype=self.dtype, device=self.device)
        for r, h in enumerate(hidden):
            padded[r, : h.shape[0]] = h
        self._hidden_in = padded
        return self.forward(rows)[1]

    def prefill_with(
        self, row: int, tokens: Sequence[int], hidden: torch.Tensor
    ) -> None:
        """Fill ``row`` with ``tokens`` and their hidden states ``[len(tokens), H]``
        (nothing when there are none: the row is then empty)."""
        if not tokens:
            self.lengths[row] = 0
            return
        self._hidden_in = hidden[None].to(self.dtype)
        self.prefill(row, tokens)

    @torch.inference_mode()
    def _eager(self, ids, positions, slots, mask, *, first, last=False):
        cache = self.cache
        cache.first, cache.positions = first, slots
        cache.rows = torch.arange(ids.shape[0], device=self.device).view(-1, 1)
        out = self.model.trunk(ids, self._hidden_in, positions, mask, cache)
        out = out[:, -1:] if last else out
        return out, out  # no LM head here (the caller's positions only)


class Eagle3Decoder(ChainDecoder):
    """EAGLE-3 chain drafts for every row, verified in one batched target forward.

    Args:
        target: the target's runner, made with ``aux_layers = draft.layer_ids``.
        draft: the draft's runner (same slots).
        k: drafts per step at most (``max_draft_len``).
        policy: drafts per step by batch size (default: always ``k``).
    """

    def __init__(
        self,
        target: ModelRunner,
        draft: Eagle3Runner,
        k: int,
        policy: DraftLenPolicy | None = None,
    ) -> None:
        super().__init__(target, k, policy)
        self.draft = draft
        self._pending: list[torch.Tensor] = []

    def runners(self) -> tuple[ModelRunner, ...]:
        return (self.target, self.draft)

    def step_lengths(self) -> dict[str, tuple[int, ...]]:
        return {"target": self.verify_lengths()}

    def _fuse(self, aux: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self.draft.model.fc(aux)

    def _after_prefill(self, slot: int, row: Row, last_hidden: torch.Tensor) -> None:
        aux = self.target.aux[0]  # [L, n * H]: every context position
        length = len(row.seq) - 1
        self.draft.prefill_with(slot, row.seq[1:length], self._fuse(aux[: length - 1]))
        self._pending.append(aux[length - 1 : length].clone())

    def retire(self, index: int) -> None:
        last = len(self.rows) - 1
        if index != last:
            self._pending[index] = self._pending[last]
        self._pending.pop()
        super().retire(index)

    def clear(self) -> None:
        super().clear()
        self._pending.clear()

    def _plain_step(self) -> list[Proposal]:
        out, _ = self._plain()
        aux = self.target.aux
        for i in range(len(self.rows)):
            self._pending[i] = torch.cat([self._pending[i], aux[i, :1]])
        return out

    def _propose(self, k: int) -> list[list[int]]:
        """Catch every row's draft up with its pending states, then chain k drafts."""
        rows = range(len(self.rows))
        catch = [self.rows[i].seq[self.draft.lengths[i] + 1 :] for i in rows]
        out = self.draft.forward_with(catch, [self._fuse(p) for p in self._pending])
        last = torch.tensor([len(c) - 1 for c in catch], device=out.device)
        hidden = out[torch.arange(len(catch), device=out.device), last]
        head = self.draft.model.logits
        with torch.inference_mode():
            drafts = self._pick(head(hidden)[:, None], [0])
            for i in range(1, k):
                out = self.draft.forward_with(
                    [d[-1:] for d in drafts], [h[None] for h in hidden]
                )
                for d, p in zip(drafts, self._pick(head(out), [i]), strict=True):
                    d.extend(p)
                hidden = out[:, 0]
        return drafts

    def step(self, allow: Sequence[bool] | None = None) -> list[Proposal]:
        """Draft K per row, verify ``[last, d1..dK]`` of all rows in one forward (module
        docstring); a row not in ``allow`` verifies its last token alone."""
        k = self.policy.draft_len(len(self.rows))
        allow = [True] * len(self.rows) if allow is None else list(allow)
        if k == 0 or not any(allow):
            return self._plain_step()
        starts = self.target.lengths[: len(self.rows)]
        drafts = self._propose(k)
        drafts = [d if ok else [] for d, ok in zip(drafts, allow, strict=True)]
        logits, _ = self.target.forward(
            [[r.seq[-1], *d] for r, d in zip(self.rows, drafts, strict=True)]
        )
        aux = self.target.aux
        preds = self._pick(logits, range(k + 1))
        out = []
        for i, (row, d, p) in enumerate(zip(self.rows, drafts, preds, strict=True)):
            accepted = 0
            while accepted < len(d) and d[accepted] == p[accepted]:
                accepted += 1
            self.target.crop(i, starts[i] + 1 + accepted)
            self.draft.crop(i, starts[i])
            self._pending[i] = aux[i, : accepted + 1].clone()
            out.append(self._emit(row, [*d[:accepted], p[accepted]], len(d), accepted))
        return out
