"""The speculative methods trtbench compares, one module each, found at import: a plug-in folder.

Lives here: method (the Method interface every method module fills in as its METHOD); each other module is one method, and adding a module adds the method.
May import: core.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from trtbench.core.methods.method import Method
from trtbench.core.stacks import BACKENDS

INTERFACE = "method"
"""The module holding :class:`Method`; every other module of this folder is a method."""


def _discover() -> dict[str, Method]:
    """Every module's ``METHOD``, in :attr:`Method.order`."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name == INTERFACE or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.append(module.METHOD)
    return {m.name: m for m in sorted(found, key=lambda m: m.order)}


METHODS: dict[str, Method] = _discover()
"""Every method, in the order the spec's ``mode`` lists them."""

BASELINE, DRAFT_TARGET, MEDUSA, EAGLE3, MTP, NGRAM = (
    "baseline",
    "draft_target",
    "medusa",
    "eagle3",
    "mtp",
    "ngram",
)
"""The names of the methods code written before the plug-ins still names (the baseline
above all); a new method needs no constant: nothing outside its module names it."""
LEGACY_EAGLE = "eagle"
"""EAGLE (v1/v2) TensorRT engines of the engine path: ``trtbench inspect`` recognises them
(``SpeculativeDecodingMode.EAGLE``) and build.json may say so, but trtbench neither builds
nor deploys them, so they are not a :class:`Method`."""


def names_where(**facts: object) -> tuple[str, ...]:
    """The method names whose attributes equal ``facts`` (e.g. ``planner="chain"``)."""
    return tuple(
        m.name
        for m in METHODS.values()
        if all(getattr(m, k) == v for k, v in facts.items())
    )


# Tables derived from the methods, for the modules that used to keep their own.
LLMAPI_DECODING_TYPES = {
    m.name: m.llmapi_decoding_type
    for m in METHODS.values()
    if m.llmapi_decoding_type is not None
}
"""mode → TensorRT-LLM LLM-API ``decoding_type``."""
VLLM_METHODS = {
    m.name: m.vllm_method or None for m in METHODS.values() if m.vllm_method is not None
}
"""mode → vLLM ``method`` (None: the baseline, no speculative config); unmapped modes absent."""
LLMAPI_ONLY_MODES = names_where(llmapi_only=True)
"""Methods TensorRT-LLM runs on its LLM-API path only (the reference backend may too)."""
K_FROM_MAX_DRAFT_LEN = names_where(draft_length="max_draft_len")
"""Methods whose draft length K is the variant's ``max_draft_len``."""
NON_DRAFTING = names_where(drafts=False)
"""Methods that draft nothing (the baseline): ``~frame["mode"].isin(NON_DRAFTING)`` asks a
column what :func:`drafts_nothing` asks one mode (a missing or unknown mode speculates)."""
CHAIN_METHODS = names_where(planner="chain")
"""Methods the planner predicts as a chain with per-position acceptance rates."""
DEFAULT_RATES = {m.name: m.default_rates for m in METHODS.values() if m.default_rates}
"""mode → the planner's default per-position acceptance rates (chains)."""

SPECULATIVE_FIELDS = ("speculative_options", "speculation")
"""Variant fields of every method that drafts (the baseline may not set them)."""
METHOD_FIELDS = (
    tuple(dict.fromkeys(f for m in METHODS.values() for f in m.fields))
    + SPECULATIVE_FIELDS
)
"""Every variant field that belongs to some methods only, in the methods' order."""
SPEC_FIELDS: dict[str, tuple[Any, Any]] = {
    name: definition
    for m in METHODS.values()
    for name, definition in m.spec_fields.items()
}
"""The variant fields method modules declare themselves (name → (annotation, FieldInfo))."""


def owners(field: str) -> tuple[str, ...]:
    """The methods whose variants may set ``field`` (one of :data:`METHOD_FIELDS`)."""
    if field in SPECULATIVE_FIELDS:
        return tuple(m.name for m in METHODS.values() if m.drafts)
    return tuple(m.name for m in METHODS.values() if field in m.fields)


def method_of(mode: object) -> Method | None:
    """The method of ``mode`` (a variant's ``mode``; None: not a method, e.g. a missing
    value of a CSV row or the legacy ``eagle``)."""
    return METHODS.get(mode) if isinstance(mode, str) else None


def drafts_nothing(mode: object) -> bool:
    """Whether ``mode`` is a method that drafts nothing (the baseline); a missing value or
    a mode that is not a method (the legacy ``eagle``) is taken to speculate."""
    method = method_of(mode)
    return method is not None and not method.drafts


def label(mode: str | None) -> str:
    """A mode's name in prose (:attr:`Method.label`); an unknown or missing mode as given."""
    return METHODS[mode].label if mode in METHODS else str(mode or "unknown")


__all__ = ["BACKENDS", "METHODS", "Method"]
