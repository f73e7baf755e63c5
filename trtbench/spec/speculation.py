"""Bench-spec fields of the speculation itself: the n-gram window and adaptive speculation.

``prompt_lookup_min`` / ``prompt_lookup_max`` (mode ngram; vLLM's names,
``vllm/config/speculative.py``): the suffix sizes an n-gram lookup tries, longest first.
TensorRT-LLM names the largest ``max_matching_ngram_size`` and has no smallest (it goes down
to 1), so a variant may give either ``prompt_lookup_max`` or ``max_matching_ngram_size``
(the same value if both). Defaults: ``prompt_lookup_min`` 1, ``prompt_lookup_max`` =
``max_matching_ngram_size``, else 2 (TensorRT-LLM's default), at least the minimum.

``speculation: {max_concurrency, draft_len_schedule}`` (:class:`~trtbench.spec.llmapi.
SpeculationSpec`): no drafting while more than N sequences are active; batch size → draft
length. The schedule's draft lengths are at most the variant's draft length and must not
grow with the batch size (keys are batch sizes, read in increasing order). Medusa takes
``max_concurrency`` only (a tree has no draft length to schedule).
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, create_model

from trtbench.core import methods

DEFAULT_NGRAM_MIN = 1
DEFAULT_NGRAM_MAX = 2  # TensorRT-LLM's max_matching_ngram_size default (the contract's)


class NgramVariantFields(BaseModel):
    """The n-gram window of a variant (base of :class:`trtbench.spec.bench.VariantSpec`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    prompt_lookup_min: int | None = Field(default=None, ge=1)
    prompt_lookup_max: int | None = Field(default=None, ge=1)


MethodVariantFields: type[BaseModel] = create_model(
    "MethodVariantFields",
    __config__=ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False),
    **methods.SPEC_FIELDS,  # type: ignore[call-overload]
)
"""The variant fields method modules declare themselves (``Method.spec_fields``; base of
:class:`trtbench.spec.bench.VariantSpec`): a method adds its knobs without editing the spec."""


class _Variant(Protocol):
    mode: str
    prompt_lookup_min: int | None
    prompt_lookup_max: int | None
    max_matching_ngram_size: int | None
    num_nextn_predict_layers: int | None
    speculation: Any

    @property
    def draft_len(self) -> int: ...


def ngram_window(
    prompt_lookup_min: int | None,
    prompt_lookup_max: int | None,
    max_matching_ngram_size: int | None = None,
) -> tuple[int, int]:
    """``(min, max)`` suffix sizes of an n-gram lookup from the spec's fields (None: not
    given); see the module docstring for the defaults. Unchecked: the spec checks
    ``min <= max``."""
    low = prompt_lookup_min or DEFAULT_NGRAM_MIN
    high = prompt_lookup_max or max_matching_ngram_size or max(low, DEFAULT_NGRAM_MAX)
    return low, high


def check_speculation_fields(v: _Variant) -> None:
    """The n-gram window and ``speculation`` of variant ``v`` fit its mode.

    Raises:
        ValueError: the message names the field and the fix (the spec's one-line
            ConfigError, exit 2): ``prompt_lookup_min`` above
            the maximum, two different maxima, a schedule on medusa, a schedule above the
            draft length or growing with the batch size.
    """
    high, other = v.prompt_lookup_max, v.max_matching_ngram_size
    if high is not None and other is not None and high != other:
        raise ValueError(
            f"prompt_lookup_max {high} and max_matching_ngram_size {other} name the same "
            "size (vLLM's and TensorRT-LLM's name); give one of them"
        )
    low, high = ngram_window(v.prompt_lookup_min, high, other)
    if low > high:
        raise ValueError(
            f"prompt_lookup_min {low} is above prompt_lookup_max {high}; lower "
            "prompt_lookup_min or raise prompt_lookup_max"
        )
    _check_schedule(v)


def _check_schedule(v: _Variant) -> None:
    schedule = v.speculation.draft_len_schedule if v.speculation else None
    if not schedule:
        return
    method = methods.METHODS[v.mode]
    if method.tree:
        raise ValueError(
            "speculation.draft_len_schedule is not for mode medusa (a tree has no draft "
            "length to schedule); use speculation.max_concurrency"
        )
    field = method.draft_length  # max_draft_len, or num_nextn_predict_layers (MTP)
    longest = v.draft_len if method.has_draft_len else getattr(v, field)
    for batch, length in schedule.items():
        if longest is not None and length > longest:
            raise ValueError(
                f"speculation.draft_len_schedule: {batch}: {length} is above the draft "
                f"length {longest}; lower it or raise "
                f"{field}"
            )
    ordered = sorted(schedule.items())
    for (b0, n0), (b1, n1) in zip(ordered, ordered[1:], strict=False):
        if n1 > n0:
            raise ValueError(
                f"speculation.draft_len_schedule: {b1}: {n1} drafts more than {b0}: {n0}; "
                "draft lengths must not grow with the batch size (fewer drafts as the "
                "batch grows)"
            )
