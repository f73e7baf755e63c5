"""Load Hugging Face checkpoints strictly (weights that do not match ``config.json`` are
refused), and name a decoder's KV cache the way the installed transformers does.

Split from :mod:`trtbench.builders.reference.loading` (which re-exports these names).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from trtbench.core.errors import BuildError

SHOWN_KEYS = 3
"""Tensor names quoted per problem in a weights-mismatch message."""

CACHE_NAMES = ("cache", "past_key_values")
"""A decoder's KV-cache argument and output attribute: ``cache`` in newer transformers 5.x
(5.25 has it), ``past_key_values`` before (4.x; 5.17 still). A decoder given the other name
takes it into ``**kwargs`` and silently runs without the cache."""


def cache_keyword(module: torch.nn.Module) -> str:
    """The keyword under which ``module.forward`` takes the KV cache (one of CACHE_NAMES).

    Raises:
        TypeError: the forward takes neither name (not a transformers decoder).
    """
    params = inspect.signature(module.forward).parameters
    for name in CACHE_NAMES:
        if name in params:
            return name
    raise TypeError(
        f"{type(module).__name__}.forward takes no KV cache argument "
        f"(none of {', '.join(CACHE_NAMES)})"
    )


def returned_cache(output: Any) -> Any:
    """The KV cache a transformers forward returned (``output.cache`` or, before the
    rename, ``output.past_key_values``); None when it returned none."""
    for name in CACHE_NAMES:
        found = getattr(output, name, None)
        if found is not None:
            return found
    return None


def weight_problems(info: Mapping[str, Any]) -> list[str]:
    """What a ``from_pretrained(..., output_loading_info=True)`` report says is wrong.

    Args:
        info: the loading report: ``missing_keys`` (tensors the config's architecture has and
            the files lack; a tied ``lm_head`` is not among them), ``unexpected_keys`` (in
            the files, not in the architecture), ``mismatched_keys`` (``(name, file shape,
            model shape)``), ``error_msgs``.

    Returns:
        One phrase per kind of problem, e.g. ``"missing 8 tensors:
        model.layers.3.self_attn.q_proj.weight, …"``; empty when the weights match.
    """

    def names(keys: Any) -> str:
        keys = sorted(keys)
        more = ", …" if len(keys) > SHOWN_KEYS else ""
        return ", ".join(keys[:SHOWN_KEYS]) + more

    out = []
    missing = list(info.get("missing_keys") or ())
    unexpected = list(info.get("unexpected_keys") or ())
    mismatched = sorted(info.get("mismatched_keys") or (), key=lambda m: str(m[0]))
    if missing:
        out.append(f"missing {len(missing)} tensors: {names(missing)}")
    if unexpected:
        out.append(f"{len(unexpected)} unexpected tensors: {names(unexpected)}")
    if mismatched:
        shown = ", ".join(
            f"{m[0]} {list(m[1])} (config: {list(m[2])})"
            for m in mismatched[:SHOWN_KEYS]
        )
        more = ", …" if len(mismatched) > SHOWN_KEYS else ""
        out.append(f"{len(mismatched)} tensors of the wrong shape: {shown}{more}")
    out += [str(e).splitlines()[0] for e in info.get("error_msgs") or () if str(e)]
    return out


def from_pretrained_checked(
    model_class: Any, path: Path, **kwargs: Any
) -> PreTrainedModel:
    """``model_class.from_pretrained(path, **kwargs)`` that refuses weights not matching
    ``config.json``: nothing is ever randomly initialised.

    Args:
        model_class: ``AutoModelForCausalLM``, ``LlamaForCausalLM`` …
        path: a ``save_pretrained`` directory (``config.json`` + safetensors / bin).
        kwargs: passed on (``dtype``).

    Raises:
        BuildError: the directory cannot be loaded (no weight file, unreadable or truncated
            file), or its tensors do not match its ``config.json`` (``"<dir>: missing 8
            tensors: model.layers.3…; the weights do not match config.json; re-export the
            model"``; also unexpected or mis-shaped tensors).
    """
    try:
        model, info = model_class.from_pretrained(
            path, output_loading_info=True, ignore_mismatched_sizes=True, **kwargs
        )
    except Exception as exc:  # any failure to read the directory: name it, no traceback
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BuildError(
            f"model directory {path} cannot be loaded ({type(exc).__name__}: {first}); "
            "re-export the model (save_pretrained)"
        ) from exc
    problems = weight_problems(info)
    if problems:
        raise BuildError(
            f"model directory {path}: {'; '.join(problems)}; the weights do not match "
            "config.json; re-export the model"
        )
    return model


def load_causal_lm(
    path: Path, dtype: torch.dtype, device: torch.device
) -> PreTrainedModel:
    """A ``*ForCausalLM`` from a ``save_pretrained`` dir, on ``device`` in eval mode.

    Raises:
        BuildError: the weights cannot be read or do not match ``config.json`` (see
            :func:`from_pretrained_checked`).
    """
    model = from_pretrained_checked(AutoModelForCausalLM, Path(path), dtype=dtype)
    return model.to(device).eval()
