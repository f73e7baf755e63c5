"""The small real models the reference backend serves, made once per machine and cached.

Layout under ``root`` (``trtbench.core.paths.tiny_models_dir()`` by default)::

    target/   LlamaForCausalLM (HF save_pretrained) + tokenizer (PreTrainedTokenizerFast)
    draft/    a smaller LlamaForCausalLM, distilled from the target, + the same tokenizer files
    medusa/   Medusa heads on the target (FasterDecoding format: config.json + medusa_lm_head.safetensors)
    eagle3/   an EAGLE-3 draft on the target (vLLM's layout, ``eagle3.py``; trained in ``tiny_eagle.py``)
    quality.json   figures on held-out files (below), sizes, training steps and losses, build time
    complete.json  written last: the recipe key and the build ids of the parts

Each part carries ``.trtbench-part.json`` (recipe key — eagle3's adds its ``EagleRecipe``'s —,
build id, the target's build id). A part is rebuilt when its marker is missing, was made by
another recipe, or belongs to another target; ``complete.json`` is rewritten after any rebuild.
Builds hold an exclusive ``fcntl`` lock on ``root/.lock`` (``tiny_cache.py``). A build reports
each part's training steps to an optional :class:`BuildProgress` (this module never prints;
``scripts/make_tiny_models.py`` draws the bars) and logs its phases at INFO.

Recipe (:class:`~trtbench.builders.tiny.tiny_recipe.Recipe`): corpus = top-level Python
standard-library ``*.py`` files on this machine (~1.8 MB train, ~0.2 MB held out, every 8th file);
byte-level BPE (2048 ids, ``<unk> <s> </s> <pad>`` = 0..3); target Llama 3 layers × 192 wide
trained 600 steps on 16 × 64-token windows; greedy continuations (32-token prompt + 64 tokens) of
the target; draft Llama 1 layer × 128 wide trained to predict the target's greedy token at every
position of those; Medusa heads (3 heads × 1 ResBlock, LM projections started from the
target's) trained on the frozen target's last hidden states to predict its greedy tokens;
EAGLE-3 draft (1 layer, fusing the target's layer 1/2/3 states) trained on the same greedy data
against the frozen target (``tiny_eagle.py``, with its ``eagle3_*`` quality figures).

Quality (``quality.json``), on target greedy continuations of held-out prompts, teacher-forced:
    draft_greedy_agreement       fraction of continuation positions t where argmax draft(x<=t)
                                 == argmax target(x<=t) — the chance the first drafted token is
                                 accepted under greedy verification.
    medusa_head_top1_accuracy[k] fraction of continuation positions t where head k's argmax at t
                                 equals the target's greedy token at t + k + 2 (head 1 = k 0).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

from trtbench.builders.reference.medusa_config import add_vllm_keys
from trtbench.builders.tiny.tiny_cache import LOCK_NAME as LOCK_NAME
from trtbench.builders.tiny.tiny_cache import exclusive_lock, replace_dir
from trtbench.builders.tiny.tiny_recipe import (
    RECIPE_VERSION,
    EagleRecipe,
    Recipe,
    part_key,
    recipe_key,
)
from trtbench.core.errors import BuildError
from trtbench.core.run_dir import write_json_atomic

logger = logging.getLogger(__name__)

PARTS = ("target", "draft", "medusa", "eagle3")
PART_MARKER = ".trtbench-part.json"
COMPLETE_NAME = "complete.json"
QUALITY_NAME = "quality.json"
_HF_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
)
PART_FILES = {
    "target": _HF_FILES,
    "draft": _HF_FILES,
    "medusa": ("config.json", "medusa_lm_head.safetensors"),
    "eagle3": ("config.json", "model.safetensors"),
}
MAX_THREADS = 8


class BuildProgress(Protocol):
    """Where a build reports progress: per part built, ``start``, ``advance`` per step, ``finish``.

    Parts come in ``PARTS`` order, only those rebuilt (none when the cache is complete). A part's
    span holds its data (target greedy continuations), training steps (the only ones counted)
    and saving; no ``finish`` if it raised.
    """

    def start(self, part: str, total_steps: int) -> None:
        """``part`` (one of ``PARTS``) begins; it trains ``total_steps``."""

    def advance(self, part: str, steps: int = 1) -> None:
        """``steps`` more training steps of ``part`` are done."""

    def finish(self, part: str) -> None:
        """``part`` is trained and saved (after ``total_steps`` steps)."""


def model_paths(root: Path) -> dict[str, Path]:
    """``{"target": root/"target", "draft": root/"draft", …}``: every part of ``PARTS``."""
    return {part: Path(root) / part for part in PARTS}


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _part_marker(root: Path, part: str) -> dict[str, Any] | None:
    """The part's marker if the part holds its files, else None."""
    path = Path(root) / part
    if not all((path / name).is_file() for name in PART_FILES[part]):
        return None
    return _read_json(path / PART_MARKER)


def is_complete(root: Path, key: str, eagle: EagleRecipe | None = None) -> bool:
    """True when ``complete.json`` matches ``key`` and every part (cheap: no torch import)."""
    complete = _read_json(Path(root) / COMPLETE_NAME)
    if complete is None or complete.get("recipe") != key:
        return False
    for part in PARTS:
        mark, want = _part_marker(root, part) or {}, part_key(part, key, eagle)
        if (mark.get("build_id"), mark.get("recipe")) != (complete.get(part), want):
            return False
    return True


def stale_parts(root: Path, key: str, eagle: EagleRecipe | None = None) -> list[str]:
    """Parts to (re)build: missing, other recipe, or built on another target."""
    markers = {p: _part_marker(root, p) or {} for p in PARTS}
    if markers["target"].get("recipe") != key:
        return list(PARTS)
    target_id = markers["target"]["build_id"]
    return [
        p
        for p in PARTS[1:]
        if markers[p].get("recipe") != part_key(p, key, eagle)
        or markers[p].get("target_build_id") != target_id
    ]


def ensure_tiny_models(
    root: Path,
    force: bool = False,
    progress: BuildProgress | None = None,
    recipe: Recipe | None = None,
    eagle: EagleRecipe | None = None,
) -> dict[str, Path]:
    """Make (or reuse) the target, draft, Medusa heads and EAGLE-3 draft under ``root``.

    Fast (file reads only, no torch import) when ``root/complete.json`` matches the current
    recipe. Otherwise takes ``root/.lock`` and builds only the stale parts; about 1.5–3 minutes
    of 2 CPU cores from scratch.

    Args:
        root: cache directory (created if missing).
        force: rebuild every part even if the cache is complete.
        progress: told of each part built and its training steps (nothing when cached).
        recipe: what to build [default: ``Recipe()``]; its key is the cache key. Another
            recipe is for tests and experiments (a small one builds in seconds).
        eagle: the EAGLE-3 part's recipe [default: ``EagleRecipe()``]; its own key.

    Returns:
        ``{"target": Path, "draft": Path, "medusa": Path, "eagle3": Path}``.

    Raises:
        BuildError: ``root`` cannot be written, or the standard-library corpus is missing.
    """
    root, recipe = Path(root), recipe if recipe is not None else Recipe()
    key, eagle = recipe_key(recipe), eagle if eagle is not None else EagleRecipe()
    if not force and is_complete(root, key, eagle):
        return add_vllm_keys(model_paths(root))
    try:
        with exclusive_lock(root):
            if force or not is_complete(root, key, eagle):
                parts = list(PARTS) if force else stale_parts(root, key, eagle)
                _build(root, key, parts, (recipe, eagle), progress)
    except OSError as exc:
        raise BuildError(
            f"cannot write the tiny models under {root} ({exc}); set TRTBENCH_CACHE to a "
            "writable directory"
        ) from exc
    return model_paths(root)


def read_quality(root: Path) -> dict[str, Any]:
    """The contents of ``root/quality.json``.

    Raises:
        BuildError: it is missing or unreadable (run ``scripts/make_tiny_models.py``).
    """
    data = _read_json(Path(root) / QUALITY_NAME)
    if data is None:
        raise BuildError(
            f"{Path(root) / QUALITY_NAME} is missing or unreadable; run "
            "scripts/make_tiny_models.py (add --force to rebuild)"
        )
    return data


class _Session:
    """What one build needs: corpus, tokenizer, models, lazily made greedy data."""

    def __init__(
        self, root: Path, parts: list[str], recipes: tuple[Recipe, EagleRecipe]
    ) -> None:
        from trtbench.builders.tiny import tiny_corpus as tc
        from trtbench.builders.tiny import tiny_training as tt

        self.tt, self.tc, self.root = tt, tc, root
        self.recipe, self.eagle_recipe = recipes
        train, held = tc.select_corpus(self.recipe)
        if not train or not held:
            raise BuildError(
                "no Python standard-library sources found for the tiny-model corpus; "
                "run with a CPython that ships its Lib/*.py files"
            )
        self.corpus = {
            "train_files": len(train),
            "train_chars": sum(map(len, train)),
            "heldout_files": len(held),
            "heldout_chars": sum(map(len, held)),
        }
        if "target" in parts:
            self.tokenizer = tc.train_tokenizer(train, self.recipe.vocab_size)
        else:
            self.tokenizer = tc.load_tokenizer(root / "target")
            self.target = tt.load_llama(root / "target")
        self.stream = tc.encode_stream(self.tokenizer, train)
        self.heldout = tc.encode_stream(self.tokenizer, held)
        self._greedy: dict[str, Any] = {}

    def rng(self, stage: int) -> Any:
        """A numpy Generator and torch seed per stage, so a partial rebuild repeats a full one."""
        import numpy as np
        import torch

        torch.manual_seed(self.recipe.seed + stage)
        return np.random.default_rng([self.recipe.seed, stage])

    def greedy(self, split: str) -> dict[str, Any]:
        """Target greedy continuations of training (``train``) or held-out (``eval``) prompts."""
        if split not in self._greedy:
            r = self.recipe
            stream, count, stage = (
                (self.stream, r.train_prompts, 3)
                if split == "train"
                else (self.heldout, r.eval_prompts, 4)
            )
            logger.info("target greedy continuations of %d %s prompts", count, split)
            self._greedy[split] = self.tt.greedy_dataset(
                self.target, stream, count, r, self.rng(stage)
            )
        return self._greedy[split]

    def build(
        self, part: str, out: Path, progress: BuildProgress | None = None
    ) -> dict[str, Any]:
        """Train ``part`` and save it into ``out``; returns its sizes, steps and final loss."""
        tt, r, t0 = self.tt, self.recipe, time.perf_counter()
        on_step = None
        if progress is not None:
            steps = self.eagle_recipe.steps if part == "eagle3" else None
            progress.start(part, steps or getattr(r, f"{part}_steps"))
            on_step = functools.partial(progress.advance, part)
        if part == "eagle3":
            from trtbench.builders.tiny.tiny_eagle import build_part

            model, losses = build_part(
                self.target,
                self.greedy("train"),
                self.eagle_recipe,
                self.rng(5),
                out,
                on_step,
                r.prompt_len,
            )
            self.eagle = model
        elif part == "medusa":
            rng = self.rng(2)
            self.heads = tt.MedusaHeads(
                r.medusa_heads, r.medusa_layers, r.target_hidden, len(self.tokenizer)
            )
            self.heads.init_lm_heads_from(self.target.lm_head.weight)
            losses = tt.train_medusa(self.heads, self.greedy("train"), r, rng, on_step)
            tt.save_medusa_heads(self.heads, out, str(self.root / "target"))
            model = self.heads
        else:
            rng = self.rng(0 if part == "target" else 1)
            dims = tt.part_dims(r, part)
            model = tt.make_llama(self.tokenizer, **dims)
            if part == "target":
                losses = tt.train_target(model, self.stream, r, rng, on_step)
                self.target = model
            else:
                losses = tt.train_draft(model, self.greedy("train"), r, rng, on_step)
                self.draft = model
            model.save_pretrained(out)
            self.tc.save_tokenizer(self.tokenizer, out)
        if progress is not None:
            progress.finish(part)
        return {
            "params": sum(p.numel() for p in model.parameters()),
            "steps": len(losses),
            "first_loss": round(sum(losses[:10]) / 10, 4),
            "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 4),
            "train_s": round(time.perf_counter() - t0, 2),
        }

    def quality(self) -> dict[str, Any]:
        """quality.json figures (see the module docstring) plus the recipe and corpus."""
        tt = self.tt
        if not hasattr(self, "draft"):
            self.draft = tt.load_llama(self.root / "draft")
        if not hasattr(self, "heads"):
            self.heads = tt.load_medusa_heads(self.root / "medusa")
        from trtbench.builders.tiny.tiny_eagle import part_quality

        eagle = part_quality(
            getattr(self, "eagle", None) or self.root / "eagle3",
            self.target,
            self.greedy("eval"),
            self.recipe.prompt_len,
            self.eagle_recipe,
        )
        figures = tt.measure_quality(
            self.target,
            self.draft,
            self.heads,
            self.greedy("eval"),
            self.heldout,
            self.recipe.prompt_len,
        )
        return {
            **figures,
            **eagle,
            "recipe_version": RECIPE_VERSION,
            "recipe_fields": dataclasses.asdict(self.recipe),
            "corpus": {
                **self.corpus,
                "train_tokens": len(self.stream),
                "heldout_tokens": len(self.heldout),
            },
        }


def _build(
    root: Path,
    key: str,
    parts: list[str],
    recipes: tuple[Recipe, EagleRecipe],
    progress: BuildProgress | None,
) -> None:
    """Build ``parts`` (in PARTS order), then write quality.json and, last, complete.json."""
    from trtbench.builders.tiny.cpu_threads import all_cores_threads

    wall0, cpu0 = time.perf_counter(), time.process_time()
    logger.info("building tiny models %s under %s (recipe %s)", parts, root, key)
    for leftover in [*root.glob(".tmp-*"), *root.glob(".old-*")]:  # from killed builds
        shutil.rmtree(leftover, ignore_errors=True)
    with all_cores_threads(MAX_THREADS) as threads:
        session = _Session(root, parts, recipes)
        markers: dict[str, dict[str, Any]] = {}
        for part in PARTS:
            final = root / part
            if part not in parts:
                markers[part] = _read_json(final / PART_MARKER) or {}
                continue
            tmp = root / f".tmp-{part}-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            target_id = None if part == "target" else markers["target"]["build_id"]
            m = dict(
                recipe=part_key(part, key, recipes[1]),
                build_id=uuid.uuid4().hex,
                target_build_id=target_id,
            )
            markers[part] = m = {**m, **session.build(part, tmp, progress)}
            logger.info(
                "built %s: %.2f M params, %d steps, loss %.3f -> %.3f, %.1f s",
                part,
                m["params"] / 1e6,
                m["steps"],
                m["first_loss"],
                m["final_loss"],
                m["train_s"],
            )
            write_json_atomic(tmp / PART_MARKER, markers[part])
            replace_dir(tmp, final)
        logger.info("measuring quality on held-out prompts")
        quality = session.quality()
    quality.update(
        recipe=key,
        parts={
            p: {k: v for k, v in m.items() if k != "recipe"} for p, m in markers.items()
        },
        build={
            "built": parts,
            "wall_s": round(time.perf_counter() - wall0, 2),
            "cpu_s": round(time.process_time() - cpu0, 2),
            "torch_threads": threads,
        },
    )
    write_json_atomic(root / QUALITY_NAME, quality)
    write_json_atomic(
        root / COMPLETE_NAME,
        {"recipe": key, **{p: markers[p]["build_id"] for p in PARTS}},
    )
    logger.info("tiny models ready in %.1f s", quality["build"]["wall_s"])
