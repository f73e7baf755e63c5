"""Model shapes for the planner: parameter counts and KV-cache bytes from a HF config or sizes.

A decoder-only Llama-style transformer (gated MLP, grouped-query attention) is assumed. From a
Hugging Face ``config.json`` (keys ``hidden_size``, ``num_hidden_layers``,
``num_attention_heads``, ``num_key_value_heads``, ``head_dim``, ``intermediate_size``,
``vocab_size``, ``tie_word_embeddings``)::

    attention per layer = H*(n_q*d) + 2*H*(n_kv*d) + (n_q*d)*H        (q, k, v, o)
    mlp per layer       = 3*H*I                                      (gate, up, down)
    params = V*H (embedding) + [V*H lm_head unless tied] + L*(attention + mlp + 2H) + H
    matmul params = L*(attention + mlp) + V*H   (the embedding lookup and norms do no matmul;
                                                 the lm_head, tied or not, does)
    KV bytes per token = 2 * L * n_kv * d * bytes_per_element        (keys and values)

Llama-3-8B gives 8,030,261,248 parameters, the published size.

Mixture-of-experts configs (and DeepSeek's multi-head latent attention) are read by
``moe_shapes``: memory holds every expert, matmul params count the experts a token uses, and
a pass reads the experts its tokens touch (:meth:`ModelShape.read_params`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtbench.core.errors import ConfigError
from trtbench.core.json_files import read_json_object
from trtbench.plan.moe_shapes import (
    MOE_ALIASES,
    MOE_PRESETS,
    MoeLayout,
    mla_attention,
    moe_layout,
)


def _count(value: Any) -> int | None:
    """An expert count as a config may write it: an integer, its digits as text, or a list
    (per layer: the largest); None for anything else (a flag, a name, null)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, (list, tuple)):
        counts = [c for c in map(_count, value) if c is not None]
        return max(counts) if counts else None
    return None


def moe_key(config: Mapping[str, Any]) -> str | None:
    """The key that makes ``config`` a mixture-of-experts model, or None: a key naming
    experts or starting with ``moe`` whose count is above 1 (Mixtral's
    ``num_local_experts``, Qwen's ``num_experts``, DeepSeek's ``n_routed_experts``,
    ERNIE-4.5's ``moe_num_experts``; an integer, digits or a per-layer list), a ``moe`` flag
    set true (``use_moe: true``), here or one level down (DBRX's
    ``ffn_config.moe_num_experts``). One expert, a zero or a false flag is dense."""
    for key, value in config.items():
        low = str(key).lower()
        named = "expert" in low or low.startswith(("moe", "use_moe"))
        count = _count(value)
        if named and ((count is not None and count > 1) or value is True):
            return str(key)
        if isinstance(value, Mapping) and (inner := moe_key(value)) is not None:
            return f"{key}.{inner}"
    return None


@dataclass(frozen=True)
class ModelShape:
    """What the roofline needs to know about one model.

    Attributes:
        name: label for tables.
        params: total parameter count (what sits in memory).
        matmul_params: parameters that take part in a matmul per token (2 FLOP each).
        layers: decoder layers.
        hidden: hidden size H.
        q_heads: attention (query) heads.
        kv_heads: key/value heads (GQA).
        head_dim: per-head width d.
        vocab: vocabulary size V.
        moe: the routed experts of a mixture-of-experts model (None: dense).
    """

    name: str
    params: float
    matmul_params: float
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    moe: MoeLayout | None = None

    def read_params(self, tokens: float) -> float:
        """Parameters a pass over ``tokens`` tokens reads: all of a dense model's; a MoE
        model's shared part and the experts those tokens touch (``moe_shapes``)."""
        if self.moe is None:
            return self.params
        return self.moe.read_params(self.params, tokens)

    def kv_bytes_per_token(self, bytes_per_element: float) -> float:
        """Bytes of K and V cached per token: ``2 * layers * kv_heads * head_dim * b``."""
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_element

    @property
    def q_dim(self) -> int:
        """Width of the attention queries, ``q_heads * head_dim``."""
        return self.q_heads * self.head_dim


def _value_at(config: Mapping[str, Any], dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def shape_from_hf_config(config: Mapping[str, Any], name: str = "model") -> ModelShape:
    """Shape of a Llama-style model from its HF config dict (formulas in the module doc).

    A mixture-of-experts config (:func:`moe_key`) is read with ``moe_shapes.moe_layout``
    (verification is not free there: each verified token can route to other experts).

    Raises:
        ConfigError: a required key is missing or not a positive integer, or a MoE config
            whose layout (expert count, top-k, expert width) the planner cannot read.
    """
    key = moe_key(config)
    if key is not None and _value_at(config, key) is True:
        raise ConfigError(
            f"{name} is a mixture-of-experts model ({key}: True) whose layout the "
            "planner cannot read (no expert count); give its HF config.json with "
            "num_local_experts / num_experts / n_routed_experts, or a preset"
        )
    if key is not None and "." in key:
        raise ConfigError(
            f"{name} is a mixture-of-experts model ({key}: {_value_at(config, key)!r}) "
            "with a nested layout the planner cannot read; give a preset or sizes"
        )
    if key is not None and not isinstance(_value_at(config, key), int):
        raise ConfigError(
            f"{name} is a mixture-of-experts model ({key}: {_value_at(config, key)!r}): "
            "the expert count must be one integer; give the model's own config.json"
        )
    if key is not None:
        try:
            moe_layout(
                config, key, 0.0, 1, 1
            )  # the layout first: its keys, its message
        except ConfigError as exc:
            raise ConfigError(f"{name}: {exc}") from None

    def need(key: str, default: Any = None) -> int:
        value = config.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(
                f"config of {name} lacks a positive integer {key!r} (got {value!r}); "
                "give a Llama-style HF config.json or explicit sizes"
            )
        return value

    hidden, layers = need("hidden_size"), need("num_hidden_layers")
    q_heads = need("num_attention_heads")
    kv_heads = need("num_key_value_heads", q_heads)
    head_dim = need("head_dim", config.get("head_dim") or hidden // q_heads)
    inter, vocab = need("intermediate_size"), need("vocab_size")
    tied = bool(config.get("tie_word_embeddings", False))
    q_dim, kv_dim = q_heads * head_dim, kv_heads * head_dim
    attention = float(hidden * q_dim + 2 * hidden * kv_dim + q_dim * hidden)
    if (mla := mla_attention(config, hidden)) is not None:
        attention, kv_heads, head_dim = mla
    embed = vocab * hidden
    norms = layers * 2 * hidden + hidden
    layout = None
    if key is not None:
        layout, ffn = moe_layout(config, key, attention, hidden, layers)
        params = embed * (1 if tied else 2) + layers * attention + ffn + norms
        params += layout.routed_params
        matmul = layers * attention + ffn + embed
        matmul += layout.layers * layout.top_k * layout.expert_params
    else:
        per_layer = attention + 3 * hidden * inter
        params = embed * (1 if tied else 2) + layers * per_layer + norms
        matmul = layers * per_layer + embed
    return ModelShape(
        name,
        float(params),
        float(matmul),
        layers,
        hidden,
        q_heads,
        kv_heads,
        head_dim,
        vocab,
        layout,
    )


def shape_from_config_file(path: Path) -> ModelShape:
    """Read ``config.json`` (or ``DIR/config.json``) and return its shape.

    Raises:
        ConfigError: the file is missing or not JSON, or see :func:`shape_from_hf_config`.
    """
    file = path / "config.json" if path.is_dir() else path
    config = read_json_object(
        file,
        label="model config ",
        missing_fix="give a HF config.json, a model dir, a preset or sizes such as "
        "params=8e9,layers=32,...",
        bad_fix="give a Hugging Face config.json",
    )
    return shape_from_hf_config(config, name=path.name or str(path))


_SIZE_KEYS = ("params", "layers", "hidden", "kv_heads", "head_dim", "vocab")


def shape_from_sizes(text: str, name: str = "model") -> ModelShape:
    """Shape from ``params=8.03e9,layers=32,hidden=4096,kv_heads=8,head_dim=128,vocab=128256``.

    Optional keys: ``heads`` (query heads, default ``hidden // head_dim``) and ``tied``
    (1 when the lm_head shares the embedding; default 0). Matmul params are
    ``params - vocab*hidden`` untied, ``params`` tied (module doc).

    Raises:
        ConfigError: a missing, unknown or non-numeric key (named in the message).
    """
    values: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in (*_SIZE_KEYS, "heads", "tied"):
            raise ConfigError(
                f"model size item {item!r} is not key=value with a key among "
                f"{', '.join((*_SIZE_KEYS, 'heads', 'tied'))}"
            )
        try:
            values[key] = float(raw)
        except ValueError:
            raise ConfigError(f"model size {key}={raw!r} is not a number") from None
    missing = [k for k in _SIZE_KEYS if k not in values]
    if missing:
        raise ConfigError(
            f"model sizes lack {', '.join(missing)}; give all of {', '.join(_SIZE_KEYS)}"
        )
    if any(v <= 0 for k, v in values.items() if k != "tied"):
        raise ConfigError(f"model sizes must be positive, got {text!r}")
    hidden, vocab, head_dim = (int(values[k]) for k in ("hidden", "vocab", "head_dim"))
    params = values["params"]
    matmul = params if values.get("tied", 0) else params - vocab * hidden
    heads = int(values.get("heads", hidden // head_dim))
    return ModelShape(
        name,
        params,
        matmul,
        int(values["layers"]),
        hidden,
        heads,
        int(values["kv_heads"]),
        head_dim,
        vocab,
    )


# Shapes of public checkpoints (their HF config.json values).
PRESET_CONFIGS: dict[str, dict[str, Any]] = {
    "llama-3-8b": dict(
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=14336,
        vocab_size=128256,
    ),
    "llama-3.1-70b": dict(
        hidden_size=8192,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        intermediate_size=28672,
        vocab_size=128256,
    ),
    "llama-3.2-1b": dict(
        hidden_size=2048,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        intermediate_size=8192,
        vocab_size=128256,
        tie_word_embeddings=True,
    ),
    "llama-3.2-3b": dict(
        hidden_size=3072,
        num_hidden_layers=28,
        num_attention_heads=24,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=8192,
        vocab_size=128256,
        tie_word_embeddings=True,
    ),
    "vicuna-7b": dict(
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        intermediate_size=11008,
        vocab_size=32000,
    ),
    "vicuna-13b": dict(
        hidden_size=5120,
        num_hidden_layers=40,
        num_attention_heads=40,
        num_key_value_heads=40,
        intermediate_size=13824,
        vocab_size=32000,
    ),
    "codellama-34b": dict(
        hidden_size=8192,
        num_hidden_layers=48,
        num_attention_heads=64,
        num_key_value_heads=8,
        intermediate_size=22016,
        vocab_size=32000,
    ),
    "llama-3.1-405b": dict(
        hidden_size=16384,
        num_hidden_layers=126,
        num_attention_heads=128,
        num_key_value_heads=8,
        intermediate_size=53248,
        vocab_size=128256,
    ),
    "tinyllama-1.1b": dict(
        hidden_size=2048,
        num_hidden_layers=22,
        num_attention_heads=32,
        num_key_value_heads=4,
        intermediate_size=5632,
        vocab_size=32000,
    ),
    # Qwen2-0.5B's body with Llama 3's vocabulary (turboderp/Qwama-0.5B-Instruct, the draft of
    # vLLM's 2024-10-17 speculative-decoding blog post)
    "qwama-0.5b": dict(
        hidden_size=896,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        vocab_size=128256,
        tie_word_embeddings=True,
    ),
}


PRESET_CONFIGS |= MOE_PRESETS
PRESET_CONFIGS["qwen3-8b"] = dict(  # Qwen/Qwen3-8B
    hidden_size=4096,
    num_hidden_layers=36,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=12288,
    vocab_size=151936,
)
PRESET_CONFIGS["vicuna-68m"] = dict(  # double7/vicuna-68m (the EAGLE papers' SpS draft)
    hidden_size=768,
    num_hidden_layers=2,
    num_attention_heads=12,
    num_key_value_heads=12,
    intermediate_size=3072,
    vocab_size=32000,
)
PRESET_ALIASES = {
    **MOE_ALIASES,
    "llama-3.1-8b": "llama-3-8b",
    "llama-3.3-70b": "llama-3.1-70b",
}


def model_preset_names() -> str:
    """The model presets (:data:`PRESET_CONFIGS`) as ``a, b, c``, then each alias as
    ``alias = preset``: what ``--model``'s help and the error of :func:`resolve_model`
    list."""
    aliases = (f"{a} = {p}" for a, p in PRESET_ALIASES.items())
    return ", ".join([*PRESET_CONFIGS, *aliases])


def resolve_model(spec: str | Path) -> ModelShape:
    """A model from a preset name, a config.json / model dir, or ``key=value`` sizes.

    Raises:
        ConfigError: none of the three forms fits (the message lists the presets).
    """
    text = str(spec).strip()
    key = PRESET_ALIASES.get(text.lower(), text.lower())
    if key in PRESET_CONFIGS:
        return shape_from_hf_config(PRESET_CONFIGS[key], name=text.lower())
    if "=" in text:
        return shape_from_sizes(text)
    path = Path(text).expanduser()
    if path.exists():
        return shape_from_config_file(path)
    raise ConfigError(
        f"model {text!r} is neither a preset ({model_preset_names()}), an existing "
        "config.json / model dir, nor sizes like params=8e9,layers=32,hidden=4096,"
        "kv_heads=8,head_dim=128,vocab=128256"
    )
