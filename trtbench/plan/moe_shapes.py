"""Mixture-of-experts and multi-head-latent-attention layouts for the planner's model shapes.

A MoE decoder layer holds ``experts`` routed experts (a gated MLP each, ``3 H I_e``
parameters), of which every token uses ``top_k``, beside its attention, a router (``H x
experts``) and any shared expert(s) every token uses. What one forward pass reads depends on
how many tokens it carries: n tokens routed independently and uniformly, each to k of E
experts, leave a given expert untouched with probability ``(1 - k/E)^n``, so the pass reads::

    distinct experts per MoE layer  = E (1 - (1 - k/E)^n)          (n = B x tokens per row)
    weights read = all params - MoE layers x E x expert + MoE layers x distinct(n) x expert

(the expected number of occupied bins when n balls each fill k of E bins; uniform routing is
an assumption: a skewed router touches fewer experts, so this is the upper end). At n = 1 a
pass reads the active parameters; a large batch, or a long verify of B x (K+1) tokens, reads
every expert — why verification is not free on a MoE target (NVIDIA/TensorRT-LLM issue 1798:
Mixtral + Medusa took fewer steps for no latency gain). Memory holds every expert.

Layouts read from a Hugging Face ``config.json`` (key names as the families write them):

* experts: ``num_local_experts`` (Mixtral, Llama 4, gpt-oss), ``num_experts`` (Qwen MoE),
  ``n_routed_experts`` (DeepSeek), ``moe_num_experts``; top-k: ``num_experts_per_tok``
  (``experts_per_token``, ``moe_k``); expert width ``moe_intermediate_size``, else
  ``intermediate_size``.
* which layers are MoE: DeepSeek ``first_k_dense_replace`` dense layers first; Qwen
  ``decoder_sparse_step`` and ``mlp_only_layers``; Llama 4 ``interleave_moe_layer_step``
  (every k-th layer; the others dense of width ``intermediate_size_mlp``).
* shared experts: DeepSeek ``n_shared_experts`` of the expert width; Qwen2-MoE
  ``shared_expert_intermediate_size``; Llama 4 one shared expert of the expert width.
* MLA (DeepSeek-V2/V3, ``kv_lora_rank``): the cache holds one latent of ``kv_lora_rank +
  qk_rope_head_dim`` per token and layer for all heads (DeepSeek-V2 report, arXiv
  2405.04434, §2.1), modelled as one KV head of width (kv_lora_rank + rope) / 2 so that
  ``2 x heads x head_dim`` counts it; attention weights ``q_a, q_b, kv_a, kv_b, o`` as the
  config sizes them. The one latent head is replicated, not split, over tensor-parallel GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trtbench.core.errors import ConfigError

EXPERT_KEYS = (
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "moe_num_experts",
)
TOP_K_KEYS = (
    "num_experts_per_tok",
    "experts_per_token",
    "moe_k",
    "num_experts_per_token",
)


@dataclass(frozen=True)
class MoeLayout:
    """The routed part of a MoE model (parameter counts are matmul weights).

    Attributes:
        experts: routed experts per MoE layer, E.
        top_k: experts each token is routed to, k.
        expert_params: parameters of one routed expert in one layer (``3 H I_e``).
        layers: MoE layers.
        layer_params: one MoE layer with every expert (attention, router, shared experts).
        layer_active_params: one MoE layer as one token uses it (attention, shared, k
            experts).
    """

    experts: int
    top_k: int
    expert_params: float
    layers: int
    layer_params: float = 0.0
    layer_active_params: float = 0.0

    @property
    def routed_params(self) -> float:
        """Every routed expert of every MoE layer: ``layers x E x expert``."""
        return self.layers * self.experts * self.expert_params

    def distinct_experts(self, tokens: float) -> float:
        """Expected experts of one layer that ``tokens`` tokens touch: ``E (1 - (1-k/E)^n)``."""
        n = max(float(tokens), 1.0)
        return self.experts * (1.0 - (1.0 - self.top_k / self.experts) ** n)

    def read_params(self, total_params: float, tokens: float) -> float:
        """Parameters one pass over ``tokens`` tokens reads (module doc)."""
        touched = self.layers * self.distinct_experts(tokens) * self.expert_params
        return total_params - self.routed_params + touched


def _int(config: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def moe_layers(config: Mapping[str, Any], layers: int) -> int:
    """How many of ``layers`` are MoE layers (module doc for the keys)."""
    first_dense = int(config.get("first_k_dense_replace") or 0)
    step = int(
        config.get("interleave_moe_layer_step")
        or config.get("decoder_sparse_step")
        or config.get("moe_layer_freq")
        or 1
    )
    mlp_only = set(config.get("mlp_only_layers") or ())
    count = sum(
        1
        for i in range(first_dense, layers)
        if (i + 1) % step == 0 and i not in mlp_only
    )
    return max(count, 0)


def mla_attention(
    config: Mapping[str, Any], hidden: int
) -> tuple[float, int, int] | None:
    """MLA's attention parameters per layer, and its cache as (kv_heads=1, head_dim);
    None for a config without ``kv_lora_rank``."""
    rank = config.get("kv_lora_rank")
    if not isinstance(rank, int) or rank <= 0:
        return None
    heads = int(config["num_attention_heads"])
    rope = int(config.get("qk_rope_head_dim") or 64)
    nope = int(config.get("qk_nope_head_dim") or 128)
    v_dim = int(config.get("v_head_dim") or 128)
    q_rank = config.get("q_lora_rank")
    q_out = heads * (nope + rope)
    q = hidden * q_out if not q_rank else hidden * q_rank + q_rank * q_out
    kv = hidden * (rank + rope) + rank * heads * (nope + v_dim)
    out = heads * v_dim * hidden
    return float(q + kv + out), 1, (rank + rope + 1) // 2


def moe_layout(
    config: Mapping[str, Any], key: str, attention: float, hidden: int, layers: int
) -> tuple[MoeLayout, float]:
    """The layout of a MoE config and the parameters of its dense-FFN layers.

    Args:
        key: the key that made it MoE (``model_shapes.moe_key``), for the message.
        attention: attention parameters of one layer.

    Raises:
        ConfigError: the expert count, top-k or expert width is missing (the message names
            the key that made the model MoE and what is missing).
    """
    experts, top_k = _int(config, EXPERT_KEYS), _int(config, TOP_K_KEYS)
    width = _int(config, ("moe_intermediate_size", "intermediate_size"))
    missing = [
        name
        for name, value in (
            ("an expert count (" + " / ".join(EXPERT_KEYS) + ")", experts),
            ("num_experts_per_tok", top_k),
            ("moe_intermediate_size or intermediate_size", width),
        )
        if value is None
    ]
    if missing or experts is None or top_k is None or width is None:
        raise ConfigError(
            f"the config is a mixture-of-experts model ({key}: "
            f"{_at(config, key)!r}) whose layout lacks {', '.join(missing)}; give the "
            "model's own HF config.json (Mixtral, Qwen-MoE, DeepSeek, Llama 4, gpt-oss "
            "key names) or a preset"
        )
    expert = 3.0 * hidden * width
    shared = 3.0 * hidden * width * int(config.get("n_shared_experts") or 0)
    shared += 3.0 * hidden * int(config.get("shared_expert_intermediate_size") or 0)
    if (
        "interleave_moe_layer_step" in config
    ):  # Llama 4: one shared expert per MoE layer
        shared += expert
    n_moe = moe_layers(config, layers)
    dense_width = int(
        config.get("intermediate_size_mlp") or config.get("intermediate_size") or width
    )
    dense_ffn = (layers - n_moe) * 3.0 * hidden * dense_width
    router = hidden * experts
    layout = MoeLayout(
        experts,
        min(top_k, experts),
        expert,
        n_moe,
        attention + router + shared + experts * expert,
        attention + shared + top_k * expert,
    )
    return layout, dense_ffn + n_moe * (router + shared)


def _at(config: Mapping[str, Any], dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


# Public MoE checkpoints: their HF config.json values (the text model's, for Llama 4).
MOE_PRESETS: dict[str, dict[str, Any]] = {
    "deepseek-v3": dict(  # DeepSeek-V3 / R1 (671 B, 37 B active), deepseek-ai/DeepSeek-V3
        hidden_size=7168,
        num_hidden_layers=61,
        num_attention_heads=128,
        num_key_value_heads=128,
        intermediate_size=18432,
        moe_intermediate_size=2048,
        n_routed_experts=256,
        n_shared_experts=1,
        num_experts_per_tok=8,
        first_k_dense_replace=3,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        vocab_size=129280,
    ),
    "llama-4-scout": dict(  # meta-llama/Llama-4-Scout-17B-16E (109 B, 17 B active)
        hidden_size=5120,
        num_hidden_layers=48,
        num_attention_heads=40,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=8192,
        intermediate_size_mlp=16384,
        num_local_experts=16,
        num_experts_per_tok=1,
        interleave_moe_layer_step=1,
        vocab_size=202048,
    ),
    "llama-4-maverick": dict(  # meta-llama/Llama-4-Maverick-17B-128E (400 B, 17 B active)
        hidden_size=5120,
        num_hidden_layers=48,
        num_attention_heads=40,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=8192,
        intermediate_size_mlp=16384,
        num_local_experts=128,
        num_experts_per_tok=1,
        interleave_moe_layer_step=2,
        vocab_size=202048,
    ),
    "qwen3-30b-a3b": dict(  # Qwen/Qwen3-30B-A3B
        hidden_size=2048,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        moe_intermediate_size=768,
        intermediate_size=6144,
        num_experts=128,
        num_experts_per_tok=8,
        vocab_size=151936,
    ),
    "qwen3-235b-a22b": dict(  # Qwen/Qwen3-235B-A22B
        hidden_size=4096,
        num_hidden_layers=94,
        num_attention_heads=64,
        num_key_value_heads=4,
        head_dim=128,
        moe_intermediate_size=1536,
        intermediate_size=12288,
        num_experts=128,
        num_experts_per_tok=8,
        vocab_size=151936,
    ),
    "gpt-oss-120b": dict(  # openai/gpt-oss-120b (117 B, 5.1 B active)
        hidden_size=2880,
        num_hidden_layers=36,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        intermediate_size=2880,
        num_local_experts=128,
        num_experts_per_tok=4,
        vocab_size=201088,
    ),
    "mixtral-8x7b": dict(  # mistralai/Mixtral-8x7B-v0.1 (46.7 B, 12.9 B active)
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
        num_local_experts=8,
        num_experts_per_tok=2,
        vocab_size=32000,
    ),
}
MOE_ALIASES = {"deepseek-r1": "deepseek-v3"}
