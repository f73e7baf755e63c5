"""Training steps behind :mod:`trtbench.builders.tiny.tiny_models`.

Corpus → byte-level BPE tokenizer (both in :mod:`~trtbench.builders.tiny.tiny_corpus`)
→ target Llama (next-token loss) → target greedy continuations → draft Llama
distilled on them, and Medusa heads on the frozen target's hidden states → quality on held-out
files. Everything is seeded from :class:`Recipe`; torch and transformers are imported by the
caller only when something must be built. The training loops take an optional ``on_step``
callback (progress reporting), called after each optimizer step; it draws no random numbers.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from trtbench.builders.reference.hf_load import cache_keyword, returned_cache
from trtbench.builders.reference.loading import from_pretrained_checked
from trtbench.builders.reference.medusa_heads import (  # noqa: F401  (re-exported)
    MedusaHeads,
    load_medusa_heads,
    save_medusa_heads,
)
from trtbench.builders.tiny.cpu_threads import ThreadChooser
from trtbench.builders.tiny.tiny_recipe import Recipe

logger = logging.getLogger(__name__)


def load_llama(directory: Path) -> LlamaForCausalLM:
    """A saved tiny Llama, in eval mode (float32, CPU).

    Raises:
        BuildError: the weights cannot be read or do not match ``config.json``.
    """
    return from_pretrained_checked(LlamaForCausalLM, Path(directory)).eval()


def part_dims(recipe: Recipe, part: str) -> dict[str, int]:
    """Keyword arguments of :func:`make_llama` for ``"target"`` or ``"draft"``."""
    prefix = f"{part}_"
    return {
        "layers": getattr(recipe, prefix + "layers"),
        "hidden": getattr(recipe, prefix + "hidden"),
        "heads": getattr(recipe, prefix + "heads"),
        "inter": getattr(recipe, prefix + "intermediate"),
    }


def make_llama(
    tokenizer: PreTrainedTokenizerFast, layers: int, hidden: int, heads: int, inter: int
) -> LlamaForCausalLM:
    """A small Llama whose special-token ids match ``tokenizer``; untied LM head (TRT-LLM friendly)."""
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def random_windows(
    stream: torch.Tensor, length: int, count: int, rng: np.random.Generator
) -> torch.Tensor:
    """[count, length] windows of ``stream`` at random offsets."""
    starts = rng.integers(0, len(stream) - length, size=count)
    return torch.stack([stream[s : s + length] for s in starts])


def run_adamw(
    params: Sequence[torch.nn.Parameter],
    steps: int,
    lr: float,
    loss_at: Callable[[int], torch.Tensor],
    on_step: Callable[[], None] | None = None,
) -> list[float]:
    """AdamW, 5 % linear warm-up then cosine decay to 10 % of ``lr``.

    Args:
        params: the parameters to train.
        steps: optimizer steps.
        lr: peak learning rate.
        loss_at: the loss of step ``i`` (draws its batch; the only source of randomness).
        on_step: called after each step, outside the timed part of the step and after any
            random draw; it cannot change the training.

    Returns:
        The loss of each step.
    """
    params = list(params)
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    warm = max(1, steps // 20)

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.1 + 0.45 * (
            1 + math.cos(math.pi * (step - warm) / max(1, steps - warm))
        )

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    losses = []
    with ThreadChooser() as chooser:
        for step in range(steps):
            with chooser.step():
                loss = loss_at(step)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                sched.step()
            losses.append(loss.detach().item())
            if on_step is not None:
                on_step()
    return losses


def train_target(
    model: LlamaForCausalLM,
    stream: torch.Tensor,
    recipe: Recipe,
    rng: np.random.Generator,
    on_step: Callable[[], None] | None = None,
) -> list[float]:
    """Next-token cross-entropy on random corpus windows, ``recipe.target_steps`` steps.

    Args:
        model: the target, trained in place (left in eval mode).
        stream: the training token stream.
        recipe: batch, window length, steps and learning rate.
        rng: draws the window offsets.
        on_step: called after each step (see :func:`run_adamw`).

    Returns:
        The loss of each step.
    """
    model.train()

    def loss_at(step: int) -> torch.Tensor:
        batch = random_windows(stream, recipe.seq_len, recipe.target_batch, rng)
        return model(input_ids=batch, labels=batch).loss

    losses = run_adamw(
        model.parameters(), recipe.target_steps, recipe.target_lr, loss_at, on_step
    )
    model.eval()
    return losses


@torch.no_grad()
def greedy_continue(
    model: LlamaForCausalLM,
    prompts: torch.Tensor,
    new: int,
    chooser: ThreadChooser | None = None,
) -> torch.Tensor:
    """[batch, prompt + new] tokens: ``prompts`` followed by the model's greedy continuation.

    ``</s>`` is not special here: the continuation always has ``new`` tokens. ``chooser``
    (optional) picks the thread count of each forward pass.
    """
    step = chooser.step if chooser is not None else contextlib.nullcontext
    with step():
        out = model(input_ids=prompts, use_cache=True)
    cache, tokens = returned_cache(out), [prompts]
    keyword = cache_keyword(model)
    for _ in range(new):
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens.append(nxt)
        with step():
            out = model(input_ids=nxt, use_cache=True, **{keyword: cache})
        cache = returned_cache(out)
    return torch.cat(tokens, dim=1)


@torch.no_grad()
def greedy_dataset(
    model: LlamaForCausalLM,
    stream: torch.Tensor,
    count: int,
    recipe: Recipe,
    rng: np.random.Generator,
) -> dict[str, torch.Tensor]:
    """Target greedy continuations of random prompts, with the target's view of them.

    Returns:
        ``tokens`` [count, P+G], ``labels`` [count, P+G] (target argmax at each position,
        teacher-forced on ``tokens``; equals ``tokens[:, t+1]`` inside the continuation) and
        ``hidden`` [count, P+G, hidden] (the target's last hidden states, after the final norm).
    """
    prompts = random_windows(stream, recipe.prompt_len, count, rng)
    with ThreadChooser(period=200) as chooser:
        chunks = [
            greedy_continue(model, p, recipe.continuation_len, chooser)
            for p in prompts.split(128)
        ]
    tokens = torch.cat(chunks)
    labels, hidden = [], []
    for part in tokens.split(128):
        out = model(input_ids=part, output_hidden_states=True)
        labels.append(out.logits.argmax(-1))
        hidden.append(out.hidden_states[-1])
    return {"tokens": tokens, "labels": torch.cat(labels), "hidden": torch.cat(hidden)}


def train_draft(
    draft: LlamaForCausalLM,
    data: dict[str, torch.Tensor],
    recipe: Recipe,
    rng: np.random.Generator,
    on_step: Callable[[], None] | None = None,
) -> list[float]:
    """Distil: cross-entropy of the draft against the target's argmax at every position.

    Args:
        draft: the draft, trained in place (left in eval mode).
        data: :func:`greedy_dataset` of training prompts.
        recipe: batch, steps (``draft_steps``) and learning rate.
        rng: draws the rows of each batch.
        on_step: called after each step (see :func:`run_adamw`).

    Returns:
        The loss of each step.
    """
    draft.train()
    tokens, labels = data["tokens"], data["labels"]

    def loss_at(step: int) -> torch.Tensor:
        rows = torch.from_numpy(rng.integers(0, len(tokens), size=recipe.draft_batch))
        logits = draft(input_ids=tokens[rows]).logits
        return F.cross_entropy(logits.flatten(0, 1), labels[rows].flatten())

    losses = run_adamw(
        draft.parameters(), recipe.draft_steps, recipe.draft_lr, loss_at, on_step
    )
    draft.eval()
    return losses


def medusa_targets(
    labels: torch.Tensor, num_heads: int
) -> list[tuple[slice, torch.Tensor]]:
    """For head k (0-based): hidden positions ``t`` it sees and its labels ``labels[:, t+k+1]``.

    ``labels[:, j]`` is the target's greedy token for position j+1, so head k at t learns the
    token at t + k + 2 (Medusa's convention: the base LM head covers t + 1).
    """
    length = labels.shape[1]
    return [(slice(0, length - k - 1), labels[:, k + 1 :]) for k in range(num_heads)]


def train_medusa(
    heads: MedusaHeads,
    data: dict[str, torch.Tensor],
    recipe: Recipe,
    rng: np.random.Generator,
    on_step: Callable[[], None] | None = None,
) -> list[float]:
    """Cross-entropy of each head against the frozen target's greedy tokens, k + 2 ahead.

    Args:
        heads: the Medusa heads, trained in place (left in eval mode).
        data: :func:`greedy_dataset` of training prompts (labels and hidden states).
        recipe: positions per head, steps (``medusa_steps``) and learning rate.
        rng: draws the positions of each batch.
        on_step: called after each step (see :func:`run_adamw`).

    Returns:
        The loss of each step.
    """
    heads.train()
    hidden = data["hidden"]
    per_head = [
        (hidden[:, span].reshape(-1, hidden.shape[-1]), lab.reshape(-1))
        for span, lab in medusa_targets(data["labels"], heads.num_heads)
    ]

    def loss_at(step: int) -> torch.Tensor:
        total = torch.zeros(())
        for head, (h, lab) in zip(heads, per_head, strict=True):
            rows = torch.from_numpy(
                rng.integers(0, len(h), recipe.medusa_batch_positions)
            )
            total = total + F.cross_entropy(head(h[rows]), lab[rows])
        return total / heads.num_heads

    losses = run_adamw(
        heads.parameters(), recipe.medusa_steps, recipe.medusa_lr, loss_at, on_step
    )
    heads.eval()
    return losses


@torch.no_grad()
def measure_quality(
    target: LlamaForCausalLM,
    draft: LlamaForCausalLM,
    heads: MedusaHeads,
    data: dict[str, torch.Tensor],
    eval_stream: torch.Tensor,
    prompt_len: int,
) -> dict[str, Any]:
    """Quality on held-out prompts and their target greedy continuations.

    Args:
        data: :func:`greedy_dataset` of held-out prompts (tokens, labels, hidden).
        eval_stream: held-out token stream, for next-token losses on real text.
        prompt_len: P; positions t >= P - 1 predict the greedy continuation.

    Returns:
        ``draft_greedy_agreement``: mean over t in [P-1, T-2] of
        [argmax draft(tokens<=t) == labels[t]], labels[t] being the target's greedy token t+1;
        ``medusa_head_top1_accuracy[k]``: mean over t in [P-1, T-k-2] of
        [argmax head_k(hidden[t]) == labels[t+k+1]] (the greedy token t+k+2);
        ``*_heldout_loss``: mean next-token cross-entropy (nats) on up to 32 x 256 held-out tokens;
        ``positions``: how many positions each figure averages.
    """
    tokens, labels = data["tokens"], data["labels"]
    cont = slice(prompt_len - 1, tokens.shape[1] - 1)
    agree = draft(input_ids=tokens).logits.argmax(-1)[:, cont] == labels[:, cont]
    head_logits = heads(data["hidden"])
    hits = [
        head_logits[k][:, span].argmax(-1)[:, prompt_len - 1 :]
        == lab[:, prompt_len - 1 :]
        for k, (span, lab) in enumerate(medusa_targets(labels, heads.num_heads))
    ]
    windows = eval_stream[: (len(eval_stream) // 257) * 257].view(-1, 257)[:32]
    return {
        "draft_greedy_agreement": round(agree.float().mean().item(), 4),
        "medusa_head_top1_accuracy": [round(h.float().mean().item(), 4) for h in hits],
        "target_heldout_loss": round(
            target(input_ids=windows, labels=windows).loss.item(), 4
        ),
        "draft_heldout_loss": round(
            draft(input_ids=windows, labels=windows).loss.item(), 4
        ),
        "positions": {
            "draft_greedy_agreement": agree.numel(),
            "medusa_head_top1_accuracy": [h.numel() for h in hits],
            "heldout_loss_tokens": windows[:, 1:].numel(),
        },
    }
