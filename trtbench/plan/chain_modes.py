"""Chain drafting for the planner (EAGLE-3, MTP, n-gram, suffix decoding): acceptance chains
and draft costs.

Every chain method proposes a chain of K tokens per step, verified in one target pass of
K+1 tokens. Expected tokens per step from per-position acceptance rates ``a_1..a_K`` (``a_j``:
the chance position j is accepted once 1..j-1 were)::

    E = 1 + Σ_{j=1..K} Π_{i<=j} a_i        (a_i = α gives Leviathan's (1-α^(K+1))/(1-α))

Draft cost per drafted token (a roofline pass over a "head" shape,
``planner.forward_pass_cost``), by the kind of drafter the method declares (``chain_kinds``):

* an EAGLE-3 head (``eagle3``): ``layers`` (default 1) decoder layer(s) of the target's size
  + the fusion fc (3H -> H) + its own LM head (H x draft vocab, default the target's
  vocabulary) — EAGLE-3 (Li et al. 2025, arXiv 2503.01840). Its weights and its layers' KV
  cache add to memory.
* MTP modules (``mtp``): one MTP module per drafted token — a decoder layer of the target's
  size + the projection (2H -> H) — and the target's shared LM head (read again, no extra
  memory); ``num_nextn_predict_layers`` modules (default 1) sit in memory with their KV cache, reused in
  turn when K exceeds them (DeepSeek-V3 tech report, arXiv 2412.19437, §2.2).
* a lookup (every ``free`` method: ``ngram``'s prompt lookup, ``suffix``'s suffix trees): no
  model; a CPU lookup of ``lookup_s`` per sequence per step (default 10 µs, an assumption).

On a mixture-of-experts target an MTP module is a MoE layer (DeepSeek-V3's is): its pass
reads the experts its tokens touch (``moe_shapes``); an EAGLE-3 head is a dense layer the
size of the target's active layer.

**EAGLE trees** (EAGLE-2 / EAGLE-3 dynamic trees, SGLang's ``speculative_eagle_topk`` and
``speculative_num_draft_tokens``): ``depth`` drafting passes, the first over one token per
sequence, each later one over the ``topk`` candidates it expands; the verify carries the
``tokens`` best drafted tokens + 1. Tokens per step come from a tree-acceptance model: at
depth j the draft's rank-r candidate is the target's token with probability ``a_j (1 -
a_j)^r`` (each further candidate catches the same share of what the better ones missed: an
assumption; top-1 gives the chain's ``a_j``), the tree keeps the ``tokens`` nodes of highest
path probability — the greedy construction of the Medusa paper (Cai et al. 2024, arXiv
2401.10774, App. C), which EAGLE-2 (Li et al. 2024, arXiv 2406.16858, §4) applies to the
draft's own confidence — and ``E = 1 + Σ_nodes Π a(rank)`` (``medusa_tree``). A published
acceptance length replaces the model: rates given as ``E@K`` (``2.82@3``: E = 2.82 with K =
3 drafts or tree depth 3) set tokens per step to E (a chain's α solved from E).

Default rates (each method's own ``Method.default_rates``; override with ``--eagle3``,
``--mtp``, ``--ngram``, ``--suffix`` followed by rates): EAGLE-3 ``0.8,0.7,0.6`` (K = 3 as TensorRT-LLM's EAGLE-3 examples, E = 2.70: an assumption of the
order of published chain acceptance); MTP ``0.85`` (DeepSeek-V3 §5.4.3: the second token is
accepted 85-90 % of the time); n-gram ``0.5,0.4,0.3`` (E = 1.76: an assumption; prompt lookup
depends on how much of the output copies the prompt); suffix decoding the same ``0.5,0.4,0.3``
(n-gram's assumption).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trtbench.builders.medusa_tree import expected_acceptance_length
from trtbench.core import methods
from trtbench.core.errors import ConfigError
from trtbench.core.methods import CHAIN_METHODS
from trtbench.plan.model_shapes import ModelShape
from trtbench.plan.speculation import fit_alpha, greedy_medusa_tree

CHAIN_MODES = CHAIN_METHODS  # every method whose Method.planner is "chain"
DEFAULT_RATES: dict[str, tuple[float, ...]] = methods.DEFAULT_RATES  # each method's own
DEFAULT_LOOKUP_S = 10e-6


def option_flag(mode: str) -> str:
    """The ``trtbench plan`` option of a chain method's rates: ``--`` + its name, ``_`` as
    ``-`` (``--eagle3``); its kind's options follow as ``--eagle3-topk``."""
    return "--" + mode.replace("_", "-")


def chain_tokens_per_step(rates: tuple[float, ...]) -> float:
    """``E = 1 + Σ_j Π_{i<=j} a_i`` (module doc).

    Raises:
        ConfigError: a rate outside [0, 1].
    """
    total, run = 1.0, 1.0
    for a in rates:
        if not 0.0 <= a <= 1.0:
            raise ConfigError(f"acceptance rates must lie in [0, 1], got {a}")
        run *= a
        total += run
    return total


def published_length(text: str) -> tuple[float, int] | None:
    """``"E@K"`` → (E, K): a published acceptance length E with K drafts (None: not that
    form).

    Raises:
        ConfigError: E or K not numbers, or E outside [1, K + 1].
    """
    if "@" not in text:
        return None
    e_text, _, k_text = text.strip().partition("@")
    try:
        e, k = float(e_text), int(k_text)
    except ValueError:
        raise ConfigError(
            f"{text!r} is not an acceptance length 'E@K' like '2.82@3'"
        ) from None
    if k < 1 or not 1.0 <= e <= k + 1:
        raise ConfigError(
            f"{text!r}: an acceptance length E with K = {k} drafts lies in [1, {k + 1}]"
        )
    return e, k


def parse_rates(text: str, mode: str) -> tuple[float, ...]:
    """``"0.8,0.7,0.6"``, ``"0.8x4"`` (α repeated K times), ``"E@K"`` (the α whose chain
    of K gives E) or ``"default"``.

    Raises:
        ConfigError: not numbers, a rate outside [0, 1], or an empty chain.
    """
    key = text.strip().lower()
    if key == "default":
        return DEFAULT_RATES[mode]
    if (length := published_length(key)) is not None:
        e, k = length
        return (fit_alpha(e, k),) * k
    try:
        if "x" in key:
            alpha, _, count = key.partition("x")
            rates = (float(alpha),) * int(count)
        else:
            rates = tuple(float(v) for v in key.split(",") if v.strip())
    except ValueError:
        raise ConfigError(
            f"{text!r} is not 'default', per-position rates like "
            "'0.8,0.7,0.6' or 'ALPHAxK' like '0.8x4'"
        ) from None
    if not rates:
        raise ConfigError(f"{option_flag(mode)} {text!r} gives no acceptance rates")
    chain_tokens_per_step(rates)
    return rates


@dataclass(frozen=True)
class ChainSetup:
    """One chain-drafting mode (EAGLE-3, MTP, n-gram, suffix decoding: :data:`CHAIN_MODES`).

    Attributes:
        mode: the chain method's name.
        rates: per-position acceptance a_1..a_K (K = draft length).
        head: the shape one drafted token's pass reads (None: a lookup, no model).
        extra_params: weights the mode adds to memory.
        kv_layers: layers of KV cache the mode adds (the target's KV width per layer).
        lookup_s: CPU time per sequence per step (a lookup).
        tree_topk: candidates each tree node expands (1: a chain).
        tree_tokens: drafted tokens the tree verifies (0: a chain of K).
        measured_tokens_per_step: a published acceptance length (``E@K``) in place of the
            model's.
    """

    mode: str
    rates: tuple[float, ...]
    head: ModelShape | None
    extra_params: float
    kv_layers: int
    lookup_s: float = 0.0
    tree_topk: int = 1
    tree_tokens: int = 0
    measured_tokens_per_step: float | None = None

    @property
    def draft_len(self) -> int:
        """K, the drafting depth (drafted tokens per step of a chain)."""
        return len(self.rates)

    @property
    def is_tree(self) -> bool:
        """A tree (top-k > 1 or more drafted tokens than its depth), not a chain."""
        return self.tree_topk > 1 or self.tree_tokens > self.draft_len

    @property
    def verify_tokens(self) -> int:
        """Tokens per sequence the verify pass carries: drafted tokens + 1."""
        return (self.tree_tokens if self.is_tree else self.draft_len) + 1

    @property
    def tokens_per_step(self) -> float:
        """Expected tokens per step: the published length when given, else the tree's or
        the chain's expectation (module doc)."""
        if self.measured_tokens_per_step is not None:
            return self.measured_tokens_per_step
        if self.is_tree:
            return tree_tokens_per_step(self.rates, self.tree_topk, self.tree_tokens)
        return chain_tokens_per_step(self.rates)


def rank_accuracies(
    rates: tuple[float, ...], topk: int
) -> tuple[tuple[float, ...], ...]:
    """Per depth j, the chance the rank-r candidate is the target's token: ``a_j (1-a_j)^r``
    for r < ``topk`` (module doc)."""
    return tuple(tuple(a * (1.0 - a) ** r for r in range(topk)) for a in rates)


def tree_tokens_per_step(rates: tuple[float, ...], topk: int, tokens: int) -> float:
    """Expected tokens per step of the greedy tree of ``tokens`` nodes, depth ≤ len(rates),
    ``topk`` candidates per node (module doc).

    Raises:
        ConfigError: a rate outside [0, 1], or fewer than one rate or token.
    """
    chain_tokens_per_step(rates)
    if not rates or tokens < 1 or topk < 1:
        raise ConfigError("an EAGLE tree needs >= 1 rate, >= 1 token and top-k >= 1")
    accuracies = rank_accuracies(rates, topk)
    return expected_acceptance_length(
        greedy_medusa_tree(accuracies, tokens), accuracies
    )


def with_tree(chain: ChainSetup, topk: int, tokens: int) -> ChainSetup:
    """``chain`` as an EAGLE tree of ``topk`` candidates per node and ``tokens`` drafted
    tokens (``tokens`` 0: K, a chain).

    Raises:
        ConfigError: top-k or tokens below 1 / 0, or a tree on n-gram.
    """
    flag = option_flag(chain.mode)
    if topk < 1 or tokens < 0:
        raise ConfigError(f"{flag}-topk must be >= 1 and {flag}-tokens >= 0")
    if chain.head is None and (topk > 1 or tokens > chain.draft_len):
        raise ConfigError("an n-gram proposer drafts a chain; trees need a draft head")
    return replace(chain, tree_topk=topk, tree_tokens=tokens)


def with_published_length(chain: ChainSetup, text: str) -> ChainSetup:
    """``chain`` with the acceptance length of ``E@K`` rates as its tokens per step (a
    chain's α already matches E; a tree takes E as measured)."""
    length = published_length(text.strip().lower())
    if length is None:
        return chain
    return replace(chain, measured_tokens_per_step=length[0])


def layer_params(target: ModelShape) -> float:
    """Matmul parameters of one target decoder layer: ``(matmul_params - V*H) / layers``
    (of a MoE target: one MoE layer as a token uses it)."""
    if target.moe is not None:
        return target.moe.layer_active_params
    return (target.matmul_params - target.vocab * target.hidden) / target.layers


def _head(
    target: ModelShape, name: str, params: float, layers: int, vocab: int
) -> ModelShape:
    return ModelShape(
        name,
        params,
        params,
        layers,
        target.hidden,
        target.q_heads,
        target.kv_heads,
        target.head_dim,
        vocab,
    )


def eagle3_setup(
    mode: str,
    target: ModelShape,
    rates: tuple[float, ...],
    layers: int = 1,
    vocab: int | None = None,
) -> ChainSetup:
    """``mode`` drafting with an EAGLE-3 head: ``layers`` target-sized layers + fc 3H x H +
    LM head H x vocab."""
    h, v = target.hidden, vocab or target.vocab
    params = layers * layer_params(target) + 3 * h * h + h * v
    head = _head(target, "eagle3-head", params, layers, v)
    return ChainSetup(mode, rates, head, params, layers)


def mtp_setup(
    mode: str, target: ModelShape, rates: tuple[float, ...], modules: int = 1
) -> ChainSetup:
    """``mode`` drafting with MTP modules: per drafted token one module (layer + 2H x H
    projection) and the shared LM head; on a MoE target the module's layer is a MoE layer
    (every expert in memory, the experts its tokens touch read per pass)."""
    h, v = target.hidden, target.vocab
    module = layer_params(target) + 2 * h * h
    head = _head(target, "mtp-module", module + h * v, 1, v)
    if target.moe is not None:
        moe = replace(target.moe, layers=1)
        module = moe.layer_params + 2 * h * h
        head = replace(head, params=module + h * v, moe=moe)
    return ChainSetup(mode, rates, head, modules * module, modules)


def lookup_setup(
    mode: str, rates: tuple[float, ...], lookup_s: float = DEFAULT_LOOKUP_S
) -> ChainSetup:
    """``mode`` drafting by a lookup in tokens already seen (n-gram's prompt lookup, suffix
    decoding's trees): no model, no memory, ``lookup_s`` of CPU per sequence per step."""
    if lookup_s < 0:
        raise ConfigError(f"{option_flag(mode)}-lookup-us must be >= 0")
    return ChainSetup(mode, rates, None, 0.0, 0, lookup_s)
