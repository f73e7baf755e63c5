"""The speculative methods trtbench compares, one entry each: the registry.

A variant's ``mode`` is a key of :data:`METHODS`. Every fact about a method that more than one
part of trtbench needs lives in its :class:`Method` entry: which backends build it, what
TensorRT-LLM calls it on each of its paths, what vLLM calls it, where its draft length comes
from and which planner arithmetic predicts it. The tables the rest of trtbench used to keep
(the LLM-API ``decoding_type`` map, vLLM's ``method`` map, the modes only the LLM-API path
runs, the modes whose K is ``max_draft_len``, the planner's chain modes) are derived here;
``tests/unit/core/test_methods.py`` holds the registry complete (every method has each piece,
the spec accepts exactly these modes, every backend listed accepts the method and no other
does).

Names, from the sources that define them:

* TensorRT-LLM LLM API: ``speculative_config.decoding_type`` of ``DraftTargetDecodingConfig``,
  ``Eagle3DecodingConfig``, ``MTPDecodingConfig`` and ``NGramDecodingConfig``
  (NVIDIA/TensorRT-LLM ``tensorrt_llm/llmapi/llm_args.py``); Medusa has no LLM-API
  (PyTorch backend) implementation.
* TensorRT-LLM engine path (1.2.1, ``trtllm-build``): ``SpeculativeDecodingMode`` members
  ``NONE``, ``DRAFT_TOKENS_EXTERNAL`` and ``MEDUSA`` (``tensorrt_llm/models/modeling_utils.py``).
* vLLM: ``--speculative-config`` ``method`` ``draft_model``, ``medusa``, ``eagle3`` and
  ``ngram`` (vllm-project/vllm ``vllm/config/speculative.py``); trtbench does not map MTP to
  vLLM.

Adding a method: its entry here, its engine code on each backend listed (a decoder in
``builders/reference/``, a mapping in ``builders/trtllm/``), its planner arithmetic, and the
tests the registry test asks for (docs/architecture.md, "add a speculative method").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from trtbench.core.stacks import BACKENDS, REFERENCE, TRTLLM, TRTLLM_PYTORCH

BASELINE, DRAFT_TARGET, MEDUSA, EAGLE3, MTP, NGRAM = (
    "baseline",
    "draft_target",
    "medusa",
    "eagle3",
    "mtp",
    "ngram",
)
"""The methods' names (a variant's ``mode``): modules name a method by these, never by a
string of their own, so a typo is an import error and a rename is one edit."""
LEGACY_EAGLE = "eagle"
"""EAGLE (v1/v2) TensorRT engines of the engine path: ``trtbench inspect`` recognises them
(``SpeculativeDecodingMode.EAGLE``) and build.json may say so, but trtbench neither builds
nor deploys them, so they are not a :class:`Method`."""

DraftLength = Literal[
    "none", "max_draft_len", "medusa_choices", "num_nextn_predict_layers"
]
Planner = Literal["baseline", "draft_target", "medusa", "chain"]
EngineCounts = Literal["none", "per_response", "perf_metrics"]
Drafter = Literal[
    "none", "draft_model", "heads", "eagle3_head", "mtp_layers", "prompt_lookup"
]


@dataclass(frozen=True)
class Method:
    """One speculative method (or the baseline).

    Attributes:
        name: the spec's ``mode`` value.
        draft_length: the variant field that sets K (``medusa_choices``: the tree's node
            count; ``none``: no drafts).
        backends: the build backends that run it (of :data:`BACKENDS`).
        llmapi_decoding_type: TensorRT-LLM LLM-API ``decoding_type`` (None: no LLM-API
            speculative config: the baseline, or not on that path).
        engine_mode: the engine path's ``SpeculativeDecodingMode`` member (None: not on it).
        vllm_method: vLLM's ``--speculative-config`` method ("" for the baseline, served
            without one; None: trtbench does not serve it with vLLM).
        planner: which arithmetic ``trtbench plan`` uses (``chain``: a chain of K drafts
            with per-position acceptance rates).
        drafter: what proposes the drafts: a separate draft model (``models.draft``),
            Medusa heads on the target (``models.medusa``), an EAGLE-3 head
            (``speculative_model``), the target's own MTP layers, or a lookup in the prompt
            (no model, no weights, no KV of its own).
        label: the method's name in the report and the recommendation's prose.
        fields: the variant fields of the bench spec that belong to this method (a variant
            of another method may not set them; :data:`SPECULATIVE_FIELDS` belong to every
            method that drafts).
        engine_counts: where the engine path's Triton repository reports its draft counts
            (``per_response``: ``draft_tokens_proposed`` / ``draft_tokens_accepted`` on
            every response of trtbench's BLS; ``perf_metrics``: TensorRT-LLM's totals with
            ``return_perf_metrics``; ``none``: not counted there, or not on that path).
    """

    name: str
    draft_length: DraftLength
    backends: tuple[str, ...]
    llmapi_decoding_type: str | None
    engine_mode: str | None
    vllm_method: str | None
    planner: Planner
    drafter: Drafter
    label: str
    fields: tuple[str, ...] = ()
    engine_counts: EngineCounts = "none"

    @property
    def drafts(self) -> bool:
        """Whether the method proposes draft tokens (everything but the baseline)."""
        return self.draft_length != "none"

    @property
    def tree(self) -> bool:
        """Whether its drafts form a tree (Medusa's choices) rather than one chain."""
        return self.draft_length == "medusa_choices"

    @property
    def has_draft_len(self) -> bool:
        """Whether its draft length K is the variant's ``max_draft_len`` (a chain of K)."""
        return self.draft_length == "max_draft_len"

    @property
    def needs_draft_model(self) -> bool:
        """Whether a checkpoint of its own drafts, named by the variant's
        ``speculative_model`` (a draft model, an EAGLE-3 head)."""
        return "speculative_model" in self.fields

    @property
    def free_drafts(self) -> bool:
        """Whether its drafts cost no forward pass: a lookup in the request's tokens."""
        return self.drafter == "prompt_lookup"

    def owns(self, field: str) -> bool:
        """Whether ``field`` (a variant field) belongs to this method (:attr:`fields`)."""
        return field in self.fields


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            name=BASELINE,
            draft_length="none",
            backends=BACKENDS,
            llmapi_decoding_type=None,
            engine_mode="NONE",
            vllm_method="",
            planner="baseline",
            drafter="none",
            label="baseline",
        ),
        Method(
            name=DRAFT_TARGET,
            draft_length="max_draft_len",
            backends=BACKENDS,
            llmapi_decoding_type="DraftTarget",
            engine_mode="DRAFT_TOKENS_EXTERNAL",
            vllm_method="draft_model",
            planner="draft_target",
            drafter="draft_model",
            label="draft model",
            fields=("max_draft_len", "speculative_model", "draft_acceptance"),
            engine_counts="per_response",
        ),
        Method(
            name=MEDUSA,
            draft_length="medusa_choices",
            backends=(REFERENCE, TRTLLM),
            llmapi_decoding_type=None,
            engine_mode="MEDUSA",
            vllm_method="medusa",
            planner="medusa",
            drafter="heads",
            label="Medusa",
            fields=("max_draft_len", "medusa_choices"),
            engine_counts="perf_metrics",
        ),
        Method(
            name=EAGLE3,
            draft_length="max_draft_len",
            backends=(REFERENCE, TRTLLM_PYTORCH),
            llmapi_decoding_type="Eagle3",
            engine_mode=None,
            vllm_method="eagle3",
            planner="chain",
            drafter="eagle3_head",
            label="EAGLE-3",
            fields=("max_draft_len", "speculative_model"),
        ),
        Method(
            name=MTP,
            draft_length="num_nextn_predict_layers",
            backends=(TRTLLM_PYTORCH,),
            llmapi_decoding_type="MTP",
            engine_mode=None,
            vllm_method=None,
            planner="chain",
            drafter="mtp_layers",
            label="MTP",
            fields=("num_nextn_predict_layers",),
        ),
        Method(
            name=NGRAM,
            draft_length="max_draft_len",
            backends=(REFERENCE, TRTLLM_PYTORCH),
            llmapi_decoding_type="NGram",
            engine_mode=None,
            vllm_method="ngram",
            planner="chain",
            drafter="prompt_lookup",
            label="n-gram",
            fields=(
                "max_draft_len",
                "max_matching_ngram_size",
                "prompt_lookup_min",
                "prompt_lookup_max",
            ),
        ),
    )
}
"""Every method, in the order the spec's ``mode`` lists them."""


def names_where(**facts: object) -> tuple[str, ...]:
    """The method names whose attributes equal ``facts`` (e.g. ``planner="chain"``)."""
    return tuple(
        m.name
        for m in METHODS.values()
        if all(getattr(m, k) == v for k, v in facts.items())
    )


# Tables derived from the registry, for the modules that used to keep their own.
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
LLMAPI_ONLY_MODES = tuple(
    m.name for m in METHODS.values() if m.drafts and m.engine_mode is None
)
"""Methods the TensorRT engine path does not have (the LLM API does; some the reference
backend too)."""
K_FROM_MAX_DRAFT_LEN = names_where(draft_length="max_draft_len")
"""Methods whose draft length K is the variant's ``max_draft_len``."""
CHAIN_METHODS = names_where(planner="chain")
"""Methods the planner predicts as a chain with per-position acceptance rates."""


SPECULATIVE_FIELDS = ("speculative_options", "speculation")
"""Variant fields of every method that drafts (the baseline may not set them)."""
METHOD_FIELDS = (
    tuple(dict.fromkeys(f for m in METHODS.values() for f in m.fields))
    + SPECULATIVE_FIELDS
)
"""Every variant field that belongs to some methods only, in the registry's order."""


def owners(field: str) -> tuple[str, ...]:
    """The methods whose variants may set ``field`` (one of :data:`METHOD_FIELDS`)."""
    if field in SPECULATIVE_FIELDS:
        return tuple(m.name for m in METHODS.values() if m.drafts)
    return tuple(m.name for m in METHODS.values() if field in m.fields)


def method_of(mode: object) -> Method | None:
    """The registry entry of ``mode`` (a variant's ``mode``; None: not a method, e.g. a
    missing value of a CSV row or the legacy ``eagle``)."""
    return METHODS.get(mode) if isinstance(mode, str) else None


def label(mode: str | None) -> str:
    """A mode's name in prose (:attr:`Method.label`); an unknown or missing mode as given."""
    return METHODS[mode].label if mode in METHODS else str(mode or "unknown")
