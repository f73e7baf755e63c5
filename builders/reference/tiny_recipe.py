"""The recipe of the tiny models: every knob, and the cache key made from them.

Shared by :mod:`trtbench.builders.reference.tiny_models` (the cache) and
:mod:`trtbench.builders.reference.tiny_training` (the training steps), so neither imports
the other's module for it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

RECIPE_VERSION = 2


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Every knob of the tiny models; its fields are hashed into the cache key."""

    seed: int = 1234
    train_bytes: int = 1_800_000  # stdlib sources used for training
    eval_bytes: int = 160_000  # held-out stdlib sources (every 8th file)
    max_file_bytes: int = 120_000  # skip the few huge modules (_pydecimal, turtle)
    vocab_size: int = 2048
    seq_len: int = 64
    # target
    target_layers: int = 3
    target_hidden: int = 192
    target_heads: int = 4
    target_intermediate: int = 512
    target_steps: int = 600
    target_batch: int = 16
    target_lr: float = 3e-3
    # greedy continuations of the target (distillation data for draft and heads)
    prompt_len: int = 32
    continuation_len: int = 64
    train_prompts: int = 768
    eval_prompts: int = 96
    # draft
    draft_layers: int = 1
    draft_hidden: int = 128
    draft_heads: int = 4
    draft_intermediate: int = 384
    draft_steps: int = 300
    draft_batch: int = 16
    draft_lr: float = 3e-3
    # medusa
    medusa_heads: int = 3
    medusa_layers: int = 1
    medusa_steps: int = 200
    medusa_batch_positions: int = 1024
    medusa_lr: float = 1e-3


def recipe_key(recipe: Recipe | None = None) -> str:
    """``v<RECIPE_VERSION>-<sha256 of the recipe fields>``; a changed recipe means a rebuild."""
    recipe = recipe or Recipe()
    fields = json.dumps(dataclasses.asdict(recipe), sort_keys=True)
    return f"v{RECIPE_VERSION}-{hashlib.sha256(fields.encode()).hexdigest()[:12]}"
