"""Load Hugging Face checkpoints strictly: weights that do not match ``config.json`` are refused.

Split from :mod:`trtbench.builders.reference.loading` (which re-exports these names).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from trtbench.core.errors import BuildError

SHOWN_KEYS = 3
"""Tensor names quoted per problem in a weights-mismatch message."""


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
