"""Training and held-out quality of the tiny EAGLE-3 draft (the ``eagle3/`` tiny-model part).

Data: the target's greedy continuations (``tiny_training.greedy_dataset``: ``tokens`` and
``labels``, the target's argmax at each position) and the frozen target's aux states (the
residual stream after the layers of :func:`~trtbench.builders.tiny.tiny_recipe.
eagle_layer_ids`, ``eagle3.py``'s semantics), computed once.

Unrolled draft (:func:`unroll`; EAGLE-3's training-time test, Li et al. 2025, arXiv
2503.01840): step ``s`` (0-based) has one entry per start ``p``: position ``p + s``, token
``tokens[p + s + 1]``, hidden ``fc(aux[p])`` (``s = 0``) or the step ``s - 1`` output at ``p``;
it predicts ``labels[p + s + 1]``. An entry attends to the step-0 entries at starts ``<= p``
and to its own start's entries of steps ``1..s`` — what a chained draft sees at inference
(the draft cache of real positions, then its own chain). Feeding the true tokens is exact for
acceptance: a chain's step ``s`` matters only while its drafts so far were accepted, i.e.
equal to the true tokens.

Loss: cross-entropy of step 0, plus ``ttt_weight`` × that of steps ``1..ttt_steps - 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from trtbench.builders.reference.eagle3 import (
    Eagle3Draft,
    eagle3_config,
    load_eagle3,
    save_eagle3,
)
from trtbench.builders.tiny.tiny_recipe import EagleRecipe, eagle_layer_ids
from trtbench.builders.tiny.tiny_training import run_adamw


class _Blocks:
    """A duck-typed cache for :meth:`Eagle3Draft.trunk`: keeps every step's keys/values and
    returns them all, concatenated along the sequence axis."""

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def update(self, keys, values, layer_idx: int, *args, **kwargs):
        self.keys.append(keys)
        self.values.append(values)
        return torch.cat(self.keys, 2), torch.cat(self.values, 2)


def _step_mask(n: int, s: int, dtype: torch.dtype) -> torch.Tensor:
    """Additive ``[n, n * (s + 1)]``: start ``p`` sees step-0 starts ``<= p`` and its own
    entries of steps ``1..s``."""
    allowed = [torch.ones(n, n, dtype=torch.bool).tril_()]
    allowed += [torch.eye(n, dtype=torch.bool)] * s
    mask = torch.zeros(n, n * (s + 1), dtype=dtype)
    return mask.masked_fill_(~torch.cat(allowed, 1), torch.finfo(dtype).min)


def unroll(
    draft: Eagle3Draft,
    tokens: torch.Tensor,
    aux: torch.Tensor,
    steps: int,
    first: int = 0,
) -> list[torch.Tensor]:
    """Logits of ``steps`` chained draft steps for every start (module docstring).

    Args:
        tokens: ``[b, T]`` token ids.
        aux: ``[b, T, n * H]`` the target's aux states of ``tokens``.
        steps: chain length; ``n = T - steps`` starts ``p = 0..n-1`` are unrolled.
        first: logits only for starts ``p >= first`` (the others are still keys).

    Returns:
        Per step ``s``, logits ``[b, n - first, vocab]`` predicting
        ``labels[:, s + 1 + first : s + 1 + n]``.
    """
    b, length = tokens.shape
    n = length - steps
    cache, out = _Blocks(), []
    hidden = draft.fc(aux[:, :n])
    base = torch.arange(n).expand(b, n)
    for s in range(steps):
        mask = _step_mask(n, s, hidden.dtype)
        prenorm = draft.trunk(
            tokens[:, s + 1 : s + 1 + n], hidden, base + s, mask, cache
        )
        out.append(draft.logits(prenorm[:, first:]))
        hidden = prenorm
    return out


@torch.no_grad()
def target_aux(
    target: torch.nn.Module, tokens: torch.Tensor, layer_ids: Sequence[int]
) -> torch.Tensor:
    """``[b, T, n * H]``: the target's residual stream after each of ``layer_ids`` layers
    (0 = the embeddings), ascending, for ``tokens [b, T]`` (a full causal forward)."""
    decoder, parts = target.get_decoder(), {}

    def keeper(i: int):
        def keep(module, args, output) -> None:
            parts[i] = output[0] if isinstance(output, tuple) else output

        return keep

    ids = sorted(set(layer_ids))
    hooks = [
        (
            decoder.embed_tokens if i == 0 else decoder.layers[i - 1]
        ).register_forward_hook(keeper(i))
        for i in ids
    ]
    try:
        chunks = []
        for part in tokens.split(128):
            decoder(input_ids=part)
            chunks.append(torch.cat([parts[i] for i in ids], -1))
    finally:
        for hook in hooks:
            hook.remove()
    return torch.cat(chunks)


def make_draft(target: torch.nn.Module, recipe: EagleRecipe) -> Eagle3Draft:
    """A fresh draft over ``target``; its LM head starts from the target's."""
    layers = recipe.layer_ids or eagle_layer_ids(target.config.num_hidden_layers)
    config = eagle3_config(target.config, layers, recipe.intermediate)
    draft = Eagle3Draft(config, target.get_input_embeddings(), layers)
    with torch.no_grad():
        draft.lm_head.weight.copy_(target.get_output_embeddings().weight)
    draft.lm_head.weight.requires_grad_(not recipe.freeze_lm_head)
    return draft


def train_eagle3(
    draft: Eagle3Draft,
    target: torch.nn.Module,
    data: dict[str, torch.Tensor],
    recipe: EagleRecipe,
    rng: np.random.Generator,
    on_step: Callable[[], None] | None = None,
    first: int = 0,
) -> list[float]:
    """Teacher-forced training against the frozen target (module docstring).

    Args:
        draft: trained in place (left in eval mode); the shared embedding stays frozen.
        target: the frozen target (its aux states of ``data["tokens"]`` are computed once).
        data: ``greedy_dataset`` of training prompts (``tokens``, ``labels``).
        recipe: steps, batch rows, learning rate, training-time-test steps and weight.
        rng: draws the rows of each batch.
        on_step: called after each step (``run_adamw``).
        first: the first start ``p`` the loss counts (``prompt_len - 2``: the starts whose
            first draft is a continuation token; earlier ones still serve as keys).

    Returns:
        The loss of each step.
    """
    tokens, labels = data["tokens"], data["labels"]
    aux = target_aux(target, tokens, draft.layer_ids)
    steps = max(1, recipe.ttt_steps)
    draft.train()

    def loss_at(step: int) -> torch.Tensor:
        rows = torch.from_numpy(rng.integers(0, len(tokens), size=recipe.batch))
        logits = unroll(draft, tokens[rows], aux[rows], steps, first)
        width = logits[0].shape[1]
        total = torch.zeros(())
        for s, lg in enumerate(logits):
            want = labels[rows][:, s + 1 + first : s + 1 + first + width]
            weight = 1.0 if s == 0 else recipe.ttt_weight
            total = total + weight * F.cross_entropy(lg.flatten(0, 1), want.flatten())
        return total

    params = [p for p in draft.parameters() if p.requires_grad]
    losses = run_adamw(params, recipe.steps, recipe.lr, loss_at, on_step)
    draft.eval()
    return losses


@torch.no_grad()
def eagle3_quality(
    draft: Eagle3Draft,
    target: torch.nn.Module,
    data: dict[str, torch.Tensor],
    prompt_len: int,
    chain: int,
) -> dict[str, Any]:
    """Held-out figures of the draft on the target's greedy continuations.

    Returns:
        ``eagle3_greedy_agreement``: mean over t in [P-1, T-2] of [argmax of the draft at
        position t-1 (token t, the target's states at t-1) == labels[t]] — the same
        positions and meaning as ``draft_greedy_agreement``: the chance the first drafted
        token is accepted;
        ``eagle3_chain_acceptance[i]`` (i = 0..K-1): over starts t in [P-1, T-1-K], the
        fraction whose first i + 1 chained drafts are all accepted (greedy verification);
        ``eagle3_mean_accepted``: their sum, the mean accepted drafts of a K-chain step;
        ``positions``: how many positions / starts each averages.
    """
    tokens, labels = data["tokens"], data["labels"]
    length = tokens.shape[1]
    aux = target_aux(target, tokens, draft.layer_ids)
    first = unroll(draft, tokens, aux, 1)[0].argmax(-1)  # start p predicts labels[p+1]
    agree = (
        first[:, prompt_len - 2 : length - 2] == labels[:, prompt_len - 1 : length - 1]
    )
    logits = unroll(draft, tokens, aux, chain)
    n = logits[0].shape[1]
    hits = torch.stack(
        [lg.argmax(-1) == labels[:, s + 1 : s + 1 + n] for s, lg in enumerate(logits)]
    )  # [K, b, n]: start p's step s is right
    prefix = hits.int().cumprod(0).bool()[:, :, prompt_len - 2 : length - 1 - chain]
    rates = [round(r.float().mean().item(), 4) for r in prefix]
    return {
        "eagle3_greedy_agreement": round(agree.float().mean().item(), 4),
        "eagle3_chain_acceptance": rates,
        "eagle3_mean_accepted": round(sum(rates), 4),
        "eagle3_positions": {
            "eagle3_greedy_agreement": agree.numel(),
            "eagle3_chain_acceptance": prefix[0].numel(),
        },
    }


def build_part(
    target: torch.nn.Module,
    data: dict[str, torch.Tensor],
    recipe: EagleRecipe,
    rng: np.random.Generator,
    out: Path,
    on_step: Callable[[], None] | None = None,
    prompt_len: int = 2,
) -> tuple[Eagle3Draft, list[float]]:
    """Make, train (:func:`train_eagle3`, loss on the continuation starts) and save
    (``eagle3.save_eagle3``) the tiny part."""
    draft = make_draft(target, recipe)
    first = max(0, prompt_len - 2)
    losses = train_eagle3(draft, target, data, recipe, rng, on_step, first)
    save_eagle3(draft, out)
    return draft, losses


def part_quality(
    draft: Eagle3Draft | Path,
    target: torch.nn.Module,
    data: dict[str, torch.Tensor],
    prompt_len: int,
    recipe: EagleRecipe,
) -> dict[str, Any]:
    """:func:`eagle3_quality` of a draft, or of the one saved in a directory (float32, CPU)."""
    if isinstance(draft, Path):
        draft = load_eagle3(draft, target, torch.float32, torch.device("cpu"))
    return eagle3_quality(draft, target, data, prompt_len, recipe.chain)
