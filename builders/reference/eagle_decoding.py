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
step. A row not in ``allow`` drafts with the others; it feeds its drafts too (the shape is the
batch's) but accepts none, so its bonus token is the target's pick at its last token.

Static shapes: the pending lists are one buffer ``[slots, W, n * H]`` with a count per row;
with ``static_shapes`` the catch-up always feeds ``W = K + 1`` positions per row (more only
after plain steps left more pending), the chain one per row, the verification ``K + 1``;
drafts and acceptance stay on the device until one copy to the host at the end of the step.
So every shape of a drafting step depends on (K, rows) only, never on what was accepted, no
operation runs per row, and the draft's forwards can be captured as CUDA graphs per (rows, W)
and (rows, 1) as the target's are (``step_lengths``). ``static_shapes`` is on by default
where the draft has captured graphs; eager (CPU) the catch-up is only as wide as the most
pending positions (the same operations on fewer positions).
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
    LM head (``Eagle3Draft.logits``) to the positions it needs. On CUDA its steps are
    captured like the target's, the hidden states being one more static input.
    """

    def __init__(self, draft: Eagle3Draft, max_cache_len: int, slots: int = 1) -> None:
        super().__init__(draft, max_cache_len, slots)
        self._hidden_in: torch.Tensor | None = None

    def forward_with(
        self,
        rows: Sequence[Sequence[int]] | torch.Tensor,
        hidden: Sequence[torch.Tensor] | torch.Tensor,
        counts: Sequence[int] | None = None,
    ) -> torch.Tensor:
        """:meth:`ModelRunner.forward` of ``rows`` with their hidden states.

        Args:
            rows: token lists, or an int64 tensor ``[b, q]`` (then ``counts`` as for
                :meth:`ModelRunner.forward`).
            hidden: a tensor ``[b, q, H]``, or per row ``[len(rows[r]), H]`` (padded here).

        Returns the pre-norm output ``[b, q, H]``; shorter rows are padded (padding is past
        the row's length, never seen)."""
        if isinstance(hidden, torch.Tensor):
            self._hidden_in = hidden.to(self.dtype)
        else:
            q = max(len(t) for t in rows)
            width = hidden[0].shape[-1]
            padded = torch.zeros(
                len(rows), q, width, dtype=self.dtype, device=self.device
            )
            for r, h in enumerate(hidden):
                padded[r, : h.shape[0]] = h
            self._hidden_in = padded
        return self.forward(rows, counts=counts)[1]

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

    def _static_extra(self, b: int, q: int) -> torch.Tensor:
        width = self.model.config.hidden_size
        self._hidden_in = torch.zeros(b, q, width, dtype=self.dtype, device=self.device)
        return self._hidden_in

    def _extra_input(self) -> torch.Tensor:
        return self._hidden_in

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
        self._pending: torch.Tensor | None = None  # [slots, W, n * H]
        self._count = [0] * target.slots  # pending positions per row
        self.static_shapes: bool | None = None  # None: where the draft has graphs

    def runners(self) -> tuple[ModelRunner, ...]:
        return (self.target, self.draft)

    def step_lengths(self) -> dict[str, tuple[int, ...]]:
        """Target: the verification lengths; draft: the catch-up widths ``K + 1`` and
        the chain's 1."""
        draft = {n + 1 for n in self.policy.lengths()} | {1}
        return {"target": self.verify_lengths(), "draft": tuple(sorted(draft))}

    def _fuse(self, aux: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self.draft.model.fc(aux)

    def _widen(self, width: int, features: int) -> None:
        """Make the pending buffer at least ``width`` positions wide (kept contents)."""
        old = self._pending
        if old is not None and old.shape[1] >= width:
            return
        new = torch.zeros(
            self.target.slots,
            width,
            features,
            dtype=self.target.dtype,
            device=self.target.device,
        )
        if old is not None:
            new[:, : old.shape[1]] = old
        self._pending = new

    def _after_prefill(self, slot: int, row: Row, last_hidden: torch.Tensor) -> None:
        aux = self.target.aux[0]  # [L, n * H]: every context position
        length = len(row.seq) - 1
        self.draft.prefill_with(slot, row.seq[1:length], self._fuse(aux[: length - 1]))
        self._widen(self.k + 1, aux.shape[-1])
        self._pending[slot, 0] = aux[length - 1]
        self._count[slot] = 1

    def retire(self, index: int) -> None:
        last = len(self.rows) - 1
        if index != last:
            self._pending[index] = self._pending[last]
            self._count[index] = self._count[last]
        self._count[last] = 0
        super().retire(index)

    def clear(self) -> None:
        super().clear()
        self._count = [0] * self.target.slots

    def _plain_step(self) -> list[Proposal]:
        out, _ = self._plain()
        aux = self.target.aux  # [b, 1, n * H]
        b = len(self.rows)
        self._widen(max(self._count[:b]) + 1, aux.shape[-1])
        cols = torch.tensor(self._count[:b], device=aux.device)
        self._pending[torch.arange(b, device=aux.device), cols] = aux[:, 0]
        for i in range(b):
            self._count[i] += 1
        return out

    def _propose(self, k: int) -> torch.Tensor:
        """Catch every row's draft up with its pending states (one forward, padded to the
        most pending positions, at least ``k + 1`` with static shapes), then chain k drafts:
        ``[b, k]`` on the device."""
        b = len(self.rows)
        counts = self._count[:b]
        static = self.static_shapes
        if static is None:
            static = bool(self.draft.graph_shapes)
        width = max(k + 1 if static else 1, *counts)
        starts = [self.draft.lengths[i] + 1 for i in range(b)]
        catch = torch.tensor(
            [
                [*r.seq[s : s + n], *[0] * (width - n)]
                for r, s, n in zip(self.rows, starts, counts, strict=True)
            ],
            device=self.target.device,
        )
        self._widen(width, self._pending.shape[-1])
        hidden = self._fuse(self._pending[:b, :width])
        out = self.draft.forward_with(catch, hidden, counts)
        last = torch.tensor([n - 1 for n in counts], device=out.device)
        rows = torch.arange(b, device=out.device)
        hidden = out[rows, last]
        head = self.draft.model.logits
        with torch.inference_mode():
            drafts = [self._pick_tensor(head(hidden)[:, None], [0])]
            for i in range(1, k):
                out = self.draft.forward_with(drafts[-1], hidden[:, None])
                drafts.append(self._pick_tensor(head(out), [i]))
                hidden = out[:, 0]
        return torch.cat(drafts, dim=1)

    def step(self, allow: Sequence[bool] | None = None) -> list[Proposal]:
        """Draft K per row, verify ``[last, d1..dK]`` of all rows in one forward (module
        docstring); a row not in ``allow`` accepts no draft."""
        k = self.policy.draft_len(len(self.rows))
        allow = [True] * len(self.rows) if allow is None else list(allow)
        if k == 0 or not any(allow):
            return self._plain_step()
        b, device = len(self.rows), self.target.device
        starts = self.target.lengths[:b]
        drafts = self._propose(k)
        last = torch.tensor([[r.seq[-1]] for r in self.rows], device=device)
        logits, _ = self.target.forward(torch.cat([last, drafts], dim=1))
        preds = self._pick_tensor(logits, range(k + 1))
        match = (drafts == preds[:, :k]) & torch.tensor(allow, device=device)[:, None]
        accepted = match.to(torch.int64).cumprod(dim=1).sum(dim=1)
        self._pending[:b, : k + 1] = self.target.aux[:, : k + 1]
        host = torch.cat([accepted[:, None], drafts, preds], dim=1).tolist()
        out = []
        for i, row in enumerate(self.rows):
            n, d, p = host[i][0], host[i][1 : k + 1], host[i][k + 1 :]
            self.target.crop(i, starts[i] + 1 + n)
            self.draft.crop(i, starts[i])
            self._count[i] = n + 1
            proposed = k if allow[i] else 0
            out.append(self._emit(row, [*d[:n], p[n]], proposed, n))
        return out
