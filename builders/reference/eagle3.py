"""The EAGLE-3 draft model: one decoder layer fed with the target's fused hidden states.

Layout and semantics are those vLLM 0.32 loads (``vllm/model_executor/models/llama_eagle3.py``,
``Eagle3LlamaForCausalLM``; architecture names in ``models/registry.py``:
``LlamaForCausalLMEagle3`` and ``Eagle3LlamaForCausalLM`` both map to it):

- ``config.json``: a Llama config with ``num_hidden_layers: 1``, ``architectures:
  ["LlamaForCausalLMEagle3"]``, ``draft_vocab_size`` (here always ``vocab_size``: the full
  target vocabulary, so there is no ``d2t``/``t2d`` mapping) and
  ``eagle_aux_hidden_state_layer_ids``.
- Tensors (safetensors): ``midlayer.self_attn.{q,k,v}_proj.weight`` ``[heads * head_dim, 2H]``
  (input: ``concat(input_layernorm(embed(token)), hidden_norm(hidden))``),
  ``midlayer.self_attn.o_proj.weight`` ``[H, heads * head_dim]``,
  ``midlayer.mlp.{gate,up,down}_proj.weight``, ``midlayer.{input_layernorm,hidden_norm,
  post_attention_layernorm}.weight`` ``[H]``, ``fc.weight`` ``[H, n_aux * H]``,
  ``norm.weight`` ``[H]``, ``lm_head.weight`` ``[vocab, H]``. No ``embed_tokens``: vLLM then
  shares the target's (``llm_base_proposer._maybe_share_embeddings``), and so does this
  module (the draft's hidden size must equal the target's).
- Aux states (vLLM ``SupportsEagle3._maybe_add_hidden_state``): layer id ``L`` is the target's
  residual stream after ``L`` decoder layers (``hidden + residual``; 0 = the embeddings,
  ``num_layers`` = the last layer's output before the final norm). They are concatenated in
  ascending layer order whatever the order in the config (vLLM appends them while iterating
  the layers). Without ids in the config vLLM uses ``(2, n // 2, n - 3)``; so does this
  module. ``fc`` maps their concatenation ``[.., n_aux * H]`` to ``H``.
- One draft position ``p`` takes the token at ``p + 1`` and the hidden state of position ``p``
  (the target's fused aux states, or for a chained draft the draft's own output before its
  final norm) and predicts the token at ``p + 2`` (vLLM: ``input_ids[:-1] =
  target_token_ids[1:]``). Residual flow as vLLM with ``norm_before_residual`` false:
  ``r = hidden``; ``r += attn(x)``; ``r += mlp(post_attention_layernorm(r))``; logits =
  ``lm_head(norm(r))``; ``r`` is fed to the next chained step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import (
    LlamaMLP,
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)

from trtbench.core.errors import ConfigError

ARCHITECTURE = "LlamaForCausalLMEagle3"
WEIGHTS_NAME = "model.safetensors"


def default_aux_layers(num_layers: int) -> tuple[int, ...]:
    """vLLM 0.32's default layer ids (``get_eagle3_default_aux_hidden_state_layers``)."""
    return (2, num_layers // 2, num_layers - 3)


def aux_layer_ids(config: Mapping[str, Any], num_target_layers: int) -> tuple[int, ...]:
    """The target layer ids a draft config asks for, ascending (vLLM's order).

    Reads ``eagle_aux_hidden_state_layer_ids`` (top level, else ``eagle_config``), else vLLM's
    default. Raises ConfigError when an id is outside ``0..num_target_layers``.
    """
    ids = config.get("eagle_aux_hidden_state_layer_ids") or (
        (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    )
    ids = tuple(ids) if ids else default_aux_layers(num_target_layers)
    bad = [i for i in ids if not isinstance(i, int) or not 0 <= i <= num_target_layers]
    if bad:
        raise ConfigError(
            f"eagle_aux_hidden_state_layer_ids: {bad[0]!r} is not a layer id of the "
            f"{num_target_layers}-layer target (0..{num_target_layers}); use an EAGLE-3 "
            "checkpoint trained on this target"
        )
    return tuple(sorted(set(ids)))


def eagle3_config(
    target: LlamaConfig, layer_ids: Sequence[int], intermediate: int
) -> LlamaConfig:
    """The draft's config: the target's attention shape, 1 layer, ``LlamaForCausalLMEagle3``."""
    data = target.to_dict()
    for key in ("architectures", "_name_or_path", "transformers_version"):
        data.pop(key, None)
    config = LlamaConfig(**data)
    config.num_hidden_layers = 1
    config.intermediate_size = intermediate
    config.architectures = [ARCHITECTURE]
    config.draft_vocab_size = target.vocab_size
    config.target_hidden_size = target.hidden_size
    config.eagle_aux_hidden_state_layer_ids = sorted(layer_ids)
    config.tie_word_embeddings = False
    return config


class _Attention(nn.Module):
    """Self-attention whose q/k/v read ``2H`` features; keys/values go to a slot cache."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads or self.heads
        self.head_dim = getattr(config, "head_dim", None) or (
            config.hidden_size // self.heads
        )
        width = 2 * config.hidden_size
        self.q_proj = nn.Linear(width, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(width, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(width, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(
            self.heads * self.head_dim, config.hidden_size, bias=False
        )

    def forward(self, x, cos, sin, mask, cache=None):
        b, q, _ = x.shape
        shape = (b, q, -1, self.head_dim)
        qs = self.q_proj(x).view(shape).transpose(1, 2)
        ks = self.k_proj(x).view(shape).transpose(1, 2)
        vs = self.v_proj(x).view(shape).transpose(1, 2)
        qs, ks = apply_rotary_pos_emb(qs, ks, cos, sin)
        if cache is not None:
            ks, vs = cache.update(ks, vs, 0)
        out = F.scaled_dot_product_attention(
            qs, ks, vs, attn_mask=mask, enable_gqa=self.kv_heads != self.heads
        )
        return self.o_proj(out.transpose(1, 2).reshape(b, q, -1))


class _MidLayer(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        eps = config.rms_norm_eps
        self.self_attn = _Attention(config)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps)
        self.hidden_norm = LlamaRMSNorm(config.hidden_size, eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps)


class Eagle3Draft(nn.Module):
    """EAGLE-3 draft head over a target (see the module docstring for the maths).

    Args:
        config: :func:`eagle3_config` (or a loaded checkpoint's config).
        embed_tokens: the target's input embedding (shared, not saved).
        layer_ids: the target layer ids whose states ``fc`` fuses (ascending).
    """

    def __init__(
        self, config: LlamaConfig, embed_tokens: nn.Embedding, layer_ids: Sequence[int]
    ) -> None:
        super().__init__()
        self.config = config
        self.layer_ids = tuple(layer_ids)
        self.midlayer = _MidLayer(config)
        self.fc = nn.Linear(
            len(self.layer_ids) * config.hidden_size, config.hidden_size, bias=False
        )
        self.norm = LlamaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.rotary = LlamaRotaryEmbedding(config)
        self._embed = [embed_tokens]  # a list: not a submodule, never saved

    @property
    def device(self) -> torch.device:
        return self.fc.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.fc.weight.dtype

    def get_decoder(self) -> Eagle3Draft:
        """Itself (the ModelRunner interface)."""
        return self

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def trunk(
        self,
        ids: torch.Tensor,
        hidden: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor | None,
        cache: Any = None,
    ) -> torch.Tensor:
        """The draft layer: ``ids [b, q]``, ``hidden [b, q, H]`` (fused aux or own output),
        ``positions [b, q]``, additive ``mask [b, 1, q, kv]`` (None: causal, no cache).

        Returns the pre-norm output ``[b, q, H]`` (logits: :meth:`logits`)."""
        layer = self.midlayer
        embeds = self._embed[0](ids)
        cos, sin = self.rotary(hidden, positions)
        x = torch.cat([layer.input_layernorm(embeds), layer.hidden_norm(hidden)], -1)
        if mask is None:
            q = ids.shape[1]
            causal = torch.ones(q, q, dtype=torch.bool, device=ids.device).tril_()
            mask = torch.zeros(q, q, dtype=hidden.dtype, device=ids.device)
            mask = mask.masked_fill(~causal, torch.finfo(hidden.dtype).min)
        residual = hidden + layer.self_attn(x, cos, sin, mask, cache)
        return residual + layer.mlp(layer.post_attention_layernorm(residual))

    def logits(self, prenorm: torch.Tensor) -> torch.Tensor:
        """``lm_head(norm(prenorm))``: ``[.., H]`` → ``[.., vocab]``."""
        return self.lm_head(self.norm(prenorm))


def save_eagle3(draft: Eagle3Draft, out: Path) -> None:
    """Write ``config.json`` and ``model.safetensors`` (names as the module docstring)."""
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    draft.config.to_json_file(out / "config.json")
    tensors = {
        name: t.detach().contiguous().cpu()
        for name, t in draft.state_dict().items()
        if not name.startswith("rotary.")
    }
    save_file(tensors, str(out / WEIGHTS_NAME), metadata={"format": "pt"})


def read_eagle3_config(path: Path) -> dict[str, Any]:
    """The checkpoint's ``config.json`` as a dict.

    Raises:
        ConfigError: missing or unreadable, or not an EAGLE-3 config.
    """
    try:
        data = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"EAGLE-3 checkpoint {path}: config.json cannot be read ({exc}); point "
            "speculative_model at an EAGLE-3 checkpoint dir"
        ) from None
    archs = data.get("architectures") or []
    if not any("Eagle3" in str(a) for a in archs):
        raise ConfigError(
            f"EAGLE-3 checkpoint {path}: architectures {archs} names no Eagle3 model; "
            f"point speculative_model at an EAGLE-3 checkpoint ({ARCHITECTURE})"
        )
    return data


def check_eagle3(path: Path, target: Mapping[str, Any]) -> dict[str, Any]:
    """An EAGLE-3 checkpoint must fit the target (``target``: its config.json as a dict).

    Checks ``hidden_size`` (the draft shares the target's embeddings and fuses its states),
    ``vocab_size`` and ``draft_vocab_size`` (no ``d2t`` support: full vocabulary only) and
    the aux layer ids. Returns a summary for build.json.

    Raises:
        ConfigError: one line naming the field and the fix.
    """
    data = read_eagle3_config(path)
    for key in ("hidden_size", "vocab_size"):
        if data.get(key) != target.get(key):
            raise ConfigError(
                f"EAGLE-3 checkpoint {path}: {key} {data.get(key)} does not fit the "
                f"target's {target.get(key)}; use an EAGLE-3 checkpoint trained on this target"
            )
    draft_vocab = data.get("draft_vocab_size") or data["vocab_size"]
    if draft_vocab != target["vocab_size"]:
        raise ConfigError(
            f"EAGLE-3 checkpoint {path}: draft_vocab_size {draft_vocab} is a reduced "
            f"vocabulary (d2t), which the reference engine does not map; use a checkpoint "
            f"with draft_vocab_size {target['vocab_size']}"
        )
    ids = aux_layer_ids(data, int(target["num_hidden_layers"]))
    if not (Path(path) / WEIGHTS_NAME).is_file():
        raise ConfigError(
            f"EAGLE-3 checkpoint {path}: no {WEIGHTS_NAME}; save the draft weights there"
        )
    return {
        "architecture": (data.get("architectures") or [ARCHITECTURE])[0],
        "aux_layer_ids": list(ids),
        "draft_vocab_size": draft_vocab,
        "hidden_size": data["hidden_size"],
    }


def load_eagle3(
    path: Path, target: nn.Module, dtype: torch.dtype, device: torch.device
) -> Eagle3Draft:
    """The draft in ``path`` over ``target`` (a loaded ``LlamaForCausalLM``), eval mode.

    Raises:
        ConfigError: the checkpoint does not fit the target (:func:`check_eagle3`), or its
            tensors do not match its config (names and shapes).
    """
    from safetensors.torch import load_file

    path = Path(path)
    check_eagle3(path, target.config.to_dict())
    data = read_eagle3_config(path)
    ids = aux_layer_ids(data, target.config.num_hidden_layers)
    config = LlamaConfig(**{k: v for k, v in data.items() if k != "architectures"})
    draft = Eagle3Draft(config, target.get_input_embeddings(), ids)
    tensors = load_file(str(path / WEIGHTS_NAME))
    tensors.pop(
        "embed_tokens.weight", None
    )  # shared with the target (as vLLM when equal)
    tensors = {k: v for k, v in tensors.items() if k not in ("d2t", "t2d")}
    wanted = {
        k: v.shape for k, v in draft.state_dict().items() if not k.startswith("rotary.")
    }
    problems = sorted(set(wanted) ^ set(tensors)) + sorted(
        f"{k} {list(tensors[k].shape)} (config: {list(s)})"
        for k, s in wanted.items()
        if k in tensors and tensors[k].shape != s
    )
    if problems:
        raise ConfigError(
            f"EAGLE-3 checkpoint {path}: tensors do not match its config.json "
            f"({', '.join(problems[:3])}); re-export the checkpoint"
        )
    draft.load_state_dict(tensors, strict=False)
    return draft.to(device=device, dtype=dtype).eval()
