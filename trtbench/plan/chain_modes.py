"""EAGLE-3, MTP and n-gram drafting for the planner: acceptance chains and draft costs.

Every one of the three proposes a chain of K tokens per step, verified in one target pass of
K+1 tokens. Expected tokens per step from per-position acceptance rates ``a_1..a_K`` (``a_j``:
the chance position j is accepted once 1..j-1 were)::

    E = 1 + Σ_{j=1..K} Π_{i<=j} a_i        (a_i = α gives Leviathan's (1-α^(K+1))/(1-α))

Draft cost per drafted token (a roofline pass over a "head" shape, ``planner.forward_pass_cost``):

* ``eagle3``: ``layers`` (default 1) decoder layer(s) of the target's size + the fusion fc
  (3H -> H) + its own LM head (H x draft vocab, default the target's vocabulary) — EAGLE-3
  (Li et al. 2025, arXiv 2503.01840). Its weights and its layers' KV cache add to memory.
* ``mtp``: one MTP module per drafted token — a decoder layer of the target's size + the
  projection (2H -> H) — and the target's shared LM head (read again, no extra memory);
  ``num_nextn_predict_layers`` modules (default 1) sit in memory with their KV cache, reused in
  turn when K exceeds them (DeepSeek-V3 tech report, arXiv 2412.19437, §2.2).
* ``ngram``: no model; a CPU prompt lookup of ``lookup_s`` per sequence per step (default
  10 µs, an assumption).

Default rates (override with ``--eagle3``, ``--mtp``, ``--ngram`` followed by rates): EAGLE-3
``0.8,0.7,0.6`` (K = 3 as TensorRT-LLM's EAGLE-3 examples, E = 2.70: an assumption of the
order of published chain acceptance); MTP ``0.85`` (DeepSeek-V3 §5.4.3: the second token is
accepted 85-90 % of the time); n-gram ``0.5,0.4,0.3`` (E = 1.76: an assumption; prompt lookup
depends on how much of the output copies the prompt).
"""

from __future__ import annotations

from dataclasses import dataclass

from trtbench.core.errors import ConfigError
from trtbench.core.methods import CHAIN_METHODS, EAGLE3, MTP, NGRAM
from trtbench.plan.model_shapes import ModelShape

CHAIN_MODES = CHAIN_METHODS  # (eagle3, mtp, ngram)
DEFAULT_RATES: dict[str, tuple[float, ...]] = {
    EAGLE3: (0.8, 0.7, 0.6),
    MTP: (0.85,),
    NGRAM: (0.5, 0.4, 0.3),
}
DEFAULT_LOOKUP_S = 10e-6


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


def parse_rates(text: str, mode: str) -> tuple[float, ...]:
    """``"0.8,0.7,0.6"``, ``"0.8x4"`` (α repeated K times) or ``"default"``.

    Raises:
        ConfigError: not numbers, a rate outside [0, 1], or an empty chain.
    """
    key = text.strip().lower()
    if key == "default":
        return DEFAULT_RATES[mode]
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
        raise ConfigError(f"--{mode} {text!r} gives no acceptance rates")
    chain_tokens_per_step(rates)
    return rates


@dataclass(frozen=True)
class ChainSetup:
    """One chain-drafting mode (EAGLE-3, MTP or n-gram).

    Attributes:
        mode: ``eagle3`` | ``mtp`` | ``ngram``.
        rates: per-position acceptance a_1..a_K (K = draft length).
        head: the shape one drafted token's pass reads (None: n-gram, no model).
        extra_params: weights the mode adds to memory.
        kv_layers: layers of KV cache the mode adds (the target's KV width per layer).
        lookup_s: CPU time per sequence per step (n-gram).
    """

    mode: str
    rates: tuple[float, ...]
    head: ModelShape | None
    extra_params: float
    kv_layers: int
    lookup_s: float = 0.0

    @property
    def draft_len(self) -> int:
        """K, the drafted tokens per step."""
        return len(self.rates)

    @property
    def tokens_per_step(self) -> float:
        """Expected tokens per step (:func:`chain_tokens_per_step`)."""
        return chain_tokens_per_step(self.rates)


def layer_params(target: ModelShape) -> float:
    """Matmul parameters of one target decoder layer: ``(matmul_params - V*H) / layers``."""
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
    target: ModelShape,
    rates: tuple[float, ...],
    layers: int = 1,
    vocab: int | None = None,
) -> ChainSetup:
    """EAGLE-3 head: ``layers`` target-sized layers + fc 3H x H + LM head H x vocab."""
    h, v = target.hidden, vocab or target.vocab
    params = layers * layer_params(target) + 3 * h * h + h * v
    head = _head(target, "eagle3-head", params, layers, v)
    return ChainSetup(EAGLE3, rates, head, params, layers)


def mtp_setup(
    target: ModelShape, rates: tuple[float, ...], modules: int = 1
) -> ChainSetup:
    """MTP: per drafted token one module (layer + 2H x H projection) and the shared LM head."""
    h = target.hidden
    module = layer_params(target) + 2 * h * h
    head = _head(target, "mtp-module", module + h * target.vocab, 1, target.vocab)
    return ChainSetup(MTP, rates, head, modules * module, modules)


def ngram_setup(
    rates: tuple[float, ...], lookup_s: float = DEFAULT_LOOKUP_S
) -> ChainSetup:
    """n-gram (prompt lookup): no model, ``lookup_s`` of CPU per sequence per step."""
    if lookup_s < 0:
        raise ConfigError("--ngram-lookup-us must be >= 0")
    return ChainSetup(NGRAM, rates, None, 0.0, 0, lookup_s)
