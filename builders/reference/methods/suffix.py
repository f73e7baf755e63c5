"""Suffix decoding on the reference engine: drafts from suffix trees, verified greedily.

Two trees per row, as Snowflake's ``arctic-inference`` (``SuffixDecodingCache``, the
implementation vLLM's ``method: suffix`` calls; Oliaro et al. 2024, arXiv 2411.04975): a
tree of the request's own tokens (prompt + output so far) and a global tree of the
responses of the last ``max_cached_requests`` requests (running ones included: a response
streams in as it is generated; the oldest is evicted first; 0: no global tree). A
:class:`SuffixTree` holds every substring of its sequences up to ``max_depth`` tokens with
its number of occurrences.

A step's draft (:func:`speculate`, arctic's path speculation): the context is the row's last
``max_depth`` tokens; for each match length ``m = 1 .. len(context) - 1`` whose suffix of the
context occurs in the tree, follow from it the most frequent continuation (on a tie, the
token seen first), multiplying the estimated probability by ``count(child) / count(node)``;
stop before a token whose probability falls below ``min_token_prob``, after
``min(K, int(max_spec_factor × m))`` tokens, or at the tree's depth. The draft's score is
the sum of its tokens' probabilities; the best score wins (a longer match on a tie), and the
request's own tree wins a tie with the global one. Verification is n-gram's
(``builders/reference/ngram.py``, :class:`LookupDecoder`): the longest prefix equal to the
target's greedy tokens is kept plus the target's own next token, so the output is the
baseline's (lossless).

Difference from arctic, stated: ties between equally frequent continuations go to the token
seen first (arctic orders siblings of equal count by its list updates). Cross-checked
against arctic-inference 0.3.0 (its ``SuffixTree`` and ``SuffixDecodingCache`` built from
the sdist): one tree, 297 of 300 random sequences drafted alike; the cache, 6 requests in a
row each over 40 random settings, 2748 of 2772 steps alike; every difference passed a tie.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trtbench.builders.reference.adaptive import DraftLenPolicy
from trtbench.builders.reference.decoding import BaselineDecoder, Greedy, Proposal, Row
from trtbench.builders.reference.methods.parts import DecoderParts
from trtbench.builders.reference.ngram import LookupDecoder
from trtbench.builders.reference.runner import ModelRunner


@dataclass(frozen=True)
class SuffixSettings:
    """The ``suffix_decoding_*`` fields of a variant (vLLM's defaults; module docstring)."""

    max_tree_depth: int = 24
    max_cached_requests: int = 10000
    max_spec_factor: float = 1.0
    min_token_prob: float = 0.1

    @classmethod
    def of(cls, variant: Mapping[str, Any]) -> SuffixSettings:
        """From a built variant (build.json's ``variant``); absent fields default."""
        given = {
            name: variant[f"suffix_decoding_{name}"]
            for name in cls.__dataclass_fields__
            if variant.get(f"suffix_decoding_{name}") is not None
        }
        return cls(**given)


@dataclass(eq=False)
class _Node:
    depth: int
    count: int = 0
    children: dict[int, _Node] = field(default_factory=dict)


class SuffixTree:
    """Every substring of up to ``max_depth`` tokens of the sequences added, with its
    number of occurrences (a node's ``count``); sequences grow token by token."""

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.root = _Node(0)

    def extend(self, active: list[_Node], token: int, sign: int = 1) -> list[_Node]:
        """Append ``token`` to a sequence whose substrings ending at its last token (of
        fewer than ``max_depth`` tokens) are the nodes ``active``; ``sign`` -1 takes the
        occurrences away again (eviction). Returns the new ``active``."""
        grown = []
        for node in [self.root, *active]:
            child = node.children.get(token)
            if child is None:
                child = node.children[token] = _Node(node.depth + 1)
            child.count += sign
            if child.count <= 0:
                del node.children[token]
            elif child.depth < self.max_depth:
                grown.append(child)
        return grown

    def add(self, tokens: Sequence[int], sign: int = 1) -> list[_Node]:
        """Add (``sign`` -1: remove) a whole sequence; returns its ``active`` nodes."""
        active: list[_Node] = []
        for token in tokens:
            active = self.extend(active, token, sign)
        return active

    def find(self, pattern: Sequence[int]) -> _Node | None:
        """The node of ``pattern`` (None: it does not occur)."""
        node: _Node | None = self.root
        for token in pattern:
            node = node.children.get(token) if node is not None else None
        return node


def speculate(
    tree: SuffixTree, context: Sequence[int], k: int, settings: SuffixSettings
) -> tuple[list[int], float]:
    """``(drafts, score)`` of ``tree`` for ``context`` (module docstring), at most ``k``.

    Example: the tree of ``[1, 2, 3, 1, 2]``, factor 1.0, ``k = 4``: match ``[2]`` (2
    occurrences, one followed by 3) drafts ``[3]`` (p 0.5, score 0.5); match ``[1, 2]``
    drafts ``[3, 1]`` (p 0.5, 0.5: score 1.0); longer matches end the sequence and draft
    nothing; so ``([3, 1], 1.0)``.
    """
    context = list(context)[-tree.max_depth :]
    best: tuple[list[int], float] = ([], 0.0)
    for m in range(1, len(context)):
        node = tree.find(context[len(context) - m :])
        if node is None:
            break
        limit = min(k, int(m * settings.max_spec_factor + 1e-6))
        drafts, prob, score = [], 1.0, 0.0
        while len(drafts) < limit and node.children:
            token, child = max(node.children.items(), key=lambda kv: kv[1].count)
            prob *= child.count / node.count
            if prob < settings.min_token_prob:
                break
            drafts.append(token)
            score += prob
            node = child
        if score >= best[1]:
            best = (drafts, score)
    return best


@dataclass(eq=False)
class _Request:
    """An active request: its own tree, where it stands, and its response in the global
    tree (None: not cached, or evicted)."""

    tree: SuffixTree
    active: list[_Node]
    seen: int
    response: list[int] | None
    global_active: list[_Node] = field(default_factory=list)


class SuffixCache:
    """The trees of suffix decoding, as arctic's ``SuffixDecodingCache``: one per active
    request (its prompt + output so far) and a global one of the responses of the last
    ``max_cached_requests`` requests, running ones included (a request takes its place when
    it starts, the oldest is evicted first; its response streams in as it is generated).

    Args:
        settings: the trees' depth, the global tree's size, the factor and the threshold.
    """

    def __init__(self, settings: SuffixSettings) -> None:
        self.settings = settings
        self.global_tree = SuffixTree(settings.max_tree_depth)
        self.cached: deque[list[int]] = (
            deque()
        )  # responses in the global tree, oldest first
        self._requests: dict[object, _Request] = {}

    def start(self, key: object, prompt: Sequence[int]) -> None:
        """Request ``key`` starts with ``prompt``; what follows it in the sequences given to
        :meth:`propose` is its response."""
        tree = SuffixTree(self.settings.max_tree_depth)
        response: list[int] | None = None
        if self.settings.max_cached_requests > 0:
            response = []
            self.cached.append(response)
            while len(self.cached) > self.settings.max_cached_requests:
                self._evict(self.cached.popleft())
        self._requests[key] = _Request(tree, tree.add(prompt), len(prompt), response)

    def _evict(self, response: list[int]) -> None:
        self.global_tree.add(response, sign=-1)
        for request in self._requests.values():
            if request.response is response:  # still running: it streams no more
                request.response = None

    def propose(self, key: object, seq: Sequence[int], k: int) -> list[int]:
        """Up to ``k`` drafts for request ``key`` whose tokens are now ``seq`` (the trees
        catch up with the tokens since the last call): the better of its own tree's draft
        and the global tree's (its own on a tie).

        Raises:
            KeyError: ``key`` was not started, or was stopped.
        """
        r = self._requests[key]
        for token in seq[r.seen :]:
            r.active = r.tree.extend(r.active, token)
            if r.response is not None:
                r.global_active = self.global_tree.extend(r.global_active, token)
                r.response.append(token)
        r.seen = len(seq)
        own = speculate(r.tree, seq, k, self.settings)
        if not self.cached:
            return own[0]
        other = speculate(self.global_tree, seq, k, self.settings)
        return own[0] if own[1] >= other[1] else other[0]

    def stop(self, key: object) -> None:
        """Request ``key`` ends: its tree goes, its response stays cached until evicted."""
        self._requests.pop(key, None)

    def drop_active(self) -> None:
        """Forget every active request (their responses so far stay cached)."""
        self._requests.clear()


class SuffixDecoder(LookupDecoder):
    """Suffix-tree drafts per row (:class:`SuffixCache`), verified for all rows in one
    batched target forward.

    Args:
        target: the target model runner.
        k: drafts per step at most (``max_draft_len``, vLLM's ``num_speculative_tokens``).
        settings: the ``suffix_decoding_*`` fields.
        policy: drafts per step by batch size (default: always ``k``).
    """

    def __init__(
        self,
        target: ModelRunner,
        k: int,
        settings: SuffixSettings,
        policy: DraftLenPolicy | None = None,
    ) -> None:
        super().__init__(target, k, policy)
        self.cache = SuffixCache(settings)

    def admit(
        self,
        tag: object,
        prompt: Sequence[int],
        greedy: Greedy,
        generated: Sequence[int] = (),
    ) -> Proposal:
        proposal = super().admit(tag, prompt, greedy, generated)
        self.cache.start(id(self.rows[-1]), prompt)
        return proposal

    def propose(self, row: Row, k: int) -> list[int]:
        """The cache's drafts for ``row``."""
        return self.cache.propose(id(row), row.seq, k)

    def retire(self, index: int) -> None:
        """End the row's request in the cache (its response stays), then drop the row."""
        self.cache.stop(id(self.rows[index]))
        super().retire(index)

    def clear(self) -> None:
        self.cache.drop_active()
        super().clear()


def make_decoder(parts: DecoderParts) -> BaselineDecoder:
    """A :class:`SuffixDecoder` with the variant's ``suffix_decoding_*`` settings."""
    return SuffixDecoder(
        parts.runner(parts.target, parts.draft_len + 1),
        parts.draft_len,
        SuffixSettings.of(parts.variant),
        parts.policy,
    )
