"""n-gram (prompt lookup) speculation: drafts copied from the request's own tokens.

:func:`propose_ngram` looks for the last ``n`` tokens of a sequence (prompt + output so far)
earlier in that same sequence, for ``n`` from ``max_n`` down to ``min_n``; the first ``n``
that occurs gives the draft: up to ``k`` tokens that followed that occurrence. No model
proposes anything, so a sequence whose suffix occurs nowhere earlier drafts nothing.

Which occurrence when several match (the rule stated, both engines read):

- vLLM 0.32 (``vllm/v1/spec_decode/ngram_proposer.py``,
  ``_find_longest_matched_ngram_and_propose_tokens``): the longest ``n`` in
  ``[prompt_lookup_min, prompt_lookup_max]`` wins, and among its occurrences the EARLIEST in
  the sequence (the oldest); fewer than ``k`` tokens are drafted when the occurrence is close
  to the end. This module's default (``use_oldest=True``) is that rule.
- TensorRT-LLM's NGram drafter (``tensorrt_llm/_torch/speculative/ngram.py``,
  ``NGramPoolManager``): patterns of ``max_matching_ngram_size`` down to 1 tokens, the
  longest found wins; ``is_use_oldest`` (default True) takes the oldest stored match, False
  the newest (``use_oldest=False`` here: the most recent earlier occurrence). Differences
  not reproduced: TensorRT-LLM has no minimum size (it always goes down to 1, i.e.
  ``min_n = 1``); its pool keeps, per pattern, only the longest continuations seen
  (``is_keep_all`` False keeps one), is updated lazily from a start index, and by default
  is shared by all requests (``is_public_pool``), so drafts may come from another request's
  text. Here every request looks only at its own tokens, at every step.

Verification is draft-target's (greedy): one target forward over ``[last, d1..dm]``, the
longest prefix of drafts equal to the target's argmax is kept plus the target's own next
token, so the output is baseline's (lossless).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trtbench.builders.reference.adaptive import DraftLenPolicy
from trtbench.builders.reference.decoding import ChainDecoder, Proposal, Row
from trtbench.builders.reference.runner import ModelRunner


@dataclass(frozen=True)
class NgramSettings:
    """The lookup window: suffix sizes ``min_n..max_n`` (``1 <= min_n <= max_n``), and
    which occurrence wins when several match (``use_oldest``: the earliest, as vLLM)."""

    min_n: int = 1
    max_n: int = 2
    use_oldest: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.min_n <= self.max_n:
            raise ValueError(
                f"n-gram sizes need 1 <= min_n <= max_n, got {self.min_n}..{self.max_n}"
            )


def propose_ngram(tokens: Sequence[int], settings: NgramSettings, k: int) -> list[int]:
    """Up to ``k`` draft tokens for ``tokens`` (prompt + output so far), or ``[]``.

    For ``n = max_n`` down to ``min_n``: the suffix ``tokens[-n:]`` is searched at every
    start ``i`` with ``i + n < len(tokens)`` (an occurrence that ends before the last token,
    so at least one token follows it; it may overlap the suffix); the first ``n`` with an
    occurrence wins, the earliest ``i`` (``use_oldest``) or the latest, and the draft is
    ``tokens[i + n : i + n + k]``.

    Example: ``[5, 6, 7, 8, 5, 6]``, sizes 1..2, ``k = 3``: the suffix ``[5, 6]`` occurs
    at 0, so the draft is ``[7, 8, 5]``.
    """
    total = len(tokens)
    if k <= 0:
        return []
    seq = list(tokens)
    for n in range(min(settings.max_n, total - 1), settings.min_n - 1, -1):
        suffix = seq[total - n :]
        starts = (
            range(total - n) if settings.use_oldest else range(total - n - 1, -1, -1)
        )
        for i in starts:
            if seq[i : i + n] == suffix:
                return seq[i + n : i + n + k]
    return []


class LookupDecoder(ChainDecoder):
    """Drafts looked up per row (no model forward), verified for all rows in one batched
    target forward; a subclass says what a row drafts (:meth:`propose`).

    Rows draft different counts (0..K; a row with no match feeds its last token alone and
    the forward pads it); a step where no row drafts is a plain decode step.

    Args:
        target: the target model runner.
        k: drafts per step at most (``max_draft_len``).
        policy: drafts per step by batch size (default: always ``k``).
    """

    def propose(self, row: Row, k: int) -> list[int]:
        """Up to ``k`` draft tokens for ``row`` (its prompt + output so far in ``seq``)."""
        raise NotImplementedError

    def step_lengths(self) -> dict[str, tuple[int, ...]]:
        # a step where no row finds a match is plain, whatever the policy
        return {"target": tuple(sorted({1, *self.verify_lengths()}))}

    def step(self, allow: Sequence[bool] | None = None) -> list[Proposal]:
        """Look up each row's drafts and verify ``[last, *drafts]`` of every row at once;
        each row keeps its matching prefix and the target's next token. A row not in
        ``allow`` (its KV blocks could not be had) drafts nothing."""
        k = self.policy.draft_len(len(self.rows))
        allow = [True] * len(self.rows) if allow is None else list(allow)
        drafts = [
            self.propose(r, k) if ok else []
            for r, ok in zip(self.rows, allow, strict=True)
        ]
        if not any(drafts):
            return self._plain()[0]
        starts = self.target.lengths[: len(self.rows)]
        q = max(len(d) for d in drafts) + 1
        if (len(self.rows), k + 1) in self.target.graph_shapes:
            q = k + 1  # pad to the captured shape: padding is cropped, never seen
        rows = [[r.seq[-1], *d] for r, d in zip(self.rows, drafts, strict=True)]
        logits, _ = self.target.forward([t + [0] * (q - len(t)) for t in rows])
        preds = self._pick(logits, range(q))
        out = []
        for i, (row, d, p) in enumerate(zip(self.rows, drafts, preds, strict=True)):
            accepted = 0
            while accepted < len(d) and d[accepted] == p[accepted]:
                accepted += 1
            self.target.crop(i, starts[i] + 1 + accepted)
            out.append(self._emit(row, [*d[:accepted], p[accepted]], len(d), accepted))
        return out


class NgramDecoder(LookupDecoder):
    """Prompt-lookup drafts per row (:func:`propose_ngram`).

    Args:
        target: the target model runner.
        k: drafts per step at most (``max_draft_len``).
        settings: the lookup window (:class:`NgramSettings`).
        policy: drafts per step by batch size (default: always ``k``).
    """

    def __init__(
        self,
        target: ModelRunner,
        k: int,
        settings: NgramSettings,
        policy: DraftLenPolicy | None = None,
    ) -> None:
        super().__init__(target, k, policy)
        self.settings = settings

    def propose(self, row: Row, k: int) -> list[int]:
        """The lookup's drafts for ``row`` (:func:`propose_ngram`)."""
        return propose_ngram(row.seq, self.settings, k)
