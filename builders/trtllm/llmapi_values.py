"""Value checks of LLM-API contract fields: simple types, numeric bounds and the
``draft_len_schedule`` rules of ``tensorrt_llm/llmapi/llm_args.py``'s validators.

Used by :mod:`~trtbench.builders.trtllm.llmapi_contract`; every failure is a one-line
:class:`~trtbench.core.errors.ConfigError` naming the field (``where``).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping, Sequence
from typing import Any

from trtbench.core.errors import ConfigError


def is_int(value: Any) -> bool:
    """An int that is not a bool (YAML ``true`` must not pass as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_ints(value: Any) -> bool:
    """A list or tuple of :func:`is_int` values."""
    return isinstance(value, (list, tuple)) and all(is_int(x) for x in value)


SIMPLE_TYPES = {
    "int": is_int,
    "float": lambda v: is_int(v) or isinstance(v, float),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "path": lambda v: isinstance(v, (str, os.PathLike)),
    "list[int]": is_ints,
    "list[list[int]]": lambda v: isinstance(v, (list, tuple)) and all(map(is_ints, v)),
    "dict[int,int]": lambda v: isinstance(v, Mapping) and is_ints([*v, *v.values()]),
    "mapping": lambda v: isinstance(v, Mapping),
}


_BOUNDS = {
    "ge": (">=", operator.ge),
    "gt": (">", operator.gt),
    "le": ("<=", operator.le),
}


def check_bounds(where: str, value: Any, spec: Mapping[str, Any]) -> None:
    """Raise ConfigError when ``value`` (or each item of a list) breaks the field's ``ge`` / ``gt`` / ``le`` / ``item_gt`` bounds."""
    if isinstance(value, (list, tuple)):  # list[int]: item_gt bounds each entry
        items, pairs = value, [("gt", spec["item_gt"])] if "item_gt" in spec else []
    else:
        items, pairs = [value], [(k, spec[k]) for k in _BOUNDS if k in spec]
    for key, bound in pairs:
        word, ok = _BOUNDS[key]
        if not all(ok(x, bound) for x in items):
            raise ConfigError(f"{where}={value!r}: must be {word} {bound}")


# draft_len_schedule rules (the field validator in llm_args.py): (failed?, what is needed)
_RULES = {
    "keys_ge_1": (lambda s, top: any(k < 1 for k in s), "batch-size keys >= 1"),
    "values_ge_0": (
        lambda s, top: any(v < 0 for v in s.values()),
        "draft lengths >= 0",
    ),
    "values_le_max_draft_len": (
        lambda s, top: is_int(top) and any(v > top for v in s.values()),
        "draft lengths <= max_draft_len",
    ),
    "has_key_1_eq_max_draft_len": (
        lambda s, top: 1 not in s or (is_int(top) and s[1] != top),
        "batch size 1 mapped to max_draft_len (add {1: max_draft_len})",
    ),
}


def check_rules(
    where: str, value: Mapping, rules: Sequence[str], sibling: Mapping
) -> None:
    """Raise ConfigError at the first ``draft_len_schedule`` rule (``_RULES``) that ``value`` breaks; ``sibling`` is the enclosing speculative config (for ``max_draft_len``)."""
    top = sibling.get("max_draft_len")
    for rule in rules:
        failed, needed = _RULES[rule]
        if failed(value, top):
            raise ConfigError(
                f"{where}={dict(value)} (max_draft_len {top}): this TensorRT-LLM version "
                f"needs {needed}; fix the schedule"
            )
