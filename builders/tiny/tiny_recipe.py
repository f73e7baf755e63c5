"""The recipe of the tiny models: every knob, and the cache key made from them.

Shared by :mod:`trtbench.builders.tiny.tiny_models` (the cache) and
:mod:`trtbench.builders.tiny.tiny_training` (the training steps), so neither imports
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


@dataclasses.dataclass(frozen=True)
class EagleRecipe:
    """The EAGLE-3 part's knobs (``tiny_eagle.py``); a key of their own, so adding or
    changing the EAGLE-3 part leaves :class:`Recipe`'s key, and the other parts, alone."""

    version: int = 1
    layer_ids: tuple[int, ...] | None = None  # None: low / mid / high (eagle_layer_ids)
    intermediate: int = 512
    steps: int = 200
    batch: int = 12
    lr: float = 3e-3
    ttt_steps: int = 2  # training-time test: step 2 feeds the draft's own hidden state
    ttt_weight: float = 0.5
    freeze_lm_head: bool = (
        True  # the target's LM head, kept (a third less work per step)
    )
    chain: int = 4  # K of the held-out chain acceptance in quality.json


def eagle_key(base_key: str, recipe: EagleRecipe | None = None) -> str:
    """``<base key>+eagle3-<sha256 of the EAGLE recipe>``: the eagle3 part's marker key."""
    fields = json.dumps(dataclasses.asdict(recipe or EagleRecipe()), sort_keys=True)
    return f"{base_key}+eagle3-{hashlib.sha256(fields.encode()).hexdigest()[:12]}"


def eagle_layer_ids(num_layers: int) -> tuple[int, ...]:
    """Low / mid / high target states for the tiny EAGLE-3 part: the residual stream after
    layer 1, the middle one and the last (vLLM layer ids; ``(1, 2, 3)`` for 3 layers)."""
    return tuple(sorted({1, (num_layers + 1) // 2, num_layers}))


def part_key(part: str, key: str, eagle: EagleRecipe | None = None) -> str:
    """The recipe key a tiny-model part's marker records: ``key``; for eagle3
    :func:`eagle_key`."""
    return eagle_key(key, eagle) if part == "eagle3" else key
