"""The interface of a speculative method: the :class:`Method` record each method module
defines as its ``METHOD``.

A method answers, instead of callers branching on its name: which backends build it and
what TensorRT-LLM calls it on each path (None: not supported there, so the spec refuses the
combination with exit 2), what vLLM calls it and the ``--speculative-config`` keys that
depend on the variant alone, where its draft length comes from, its own variant fields and
their checks, the reference engine's decoder (a lazy ``module:function`` path, so this
ground floor imports no engine code), and the planner's arithmetic with its default rates.

Names, from the sources that define them:

* TensorRT-LLM LLM API: ``speculative_config.decoding_type`` of ``DraftTargetDecodingConfig``,
  ``Eagle3DecodingConfig``, ``MTPDecodingConfig`` and ``NGramDecodingConfig``
  (NVIDIA/TensorRT-LLM ``tensorrt_llm/llmapi/llm_args.py``); Medusa has no LLM-API
  (PyTorch backend) implementation.
* TensorRT-LLM engine path (1.2.1, ``trtllm-build``): ``SpeculativeDecodingMode`` members
  ``NONE``, ``DRAFT_TOKENS_EXTERNAL`` and ``MEDUSA`` (``tensorrt_llm/models/modeling_utils.py``).
* vLLM: ``--speculative-config`` ``method`` (vllm-project/vllm ``vllm/config/speculative.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

DraftLength = Literal[
    "none", "max_draft_len", "medusa_choices", "num_nextn_predict_layers"
]
Planner = Literal["baseline", "draft_target", "medusa", "chain"]
EngineCounts = Literal["none", "per_response", "perf_metrics"]
VariantCheck = Callable[[Any], None]
"""A method's own check of a variant (a ``VariantSpec``): raises ValueError naming the
field and the fix (the spec turns it into its one-line ConfigError, exit 2)."""
VllmOptions = Callable[[Any], dict[str, Any]]
"""The ``--speculative-config`` keys after ``method`` for a variant (a ``VariantSpec``)."""


@dataclass(frozen=True)
class Method:
    """One speculative method (or the baseline).

    Attributes:
        name: the spec's ``mode`` value.
        order: where it stands in the spec's ``mode`` list (ascending).
        draft_length: the variant field that sets K (``medusa_choices``: the tree's node
            count; ``none``: no drafts).
        backends: the build backends that run it (of ``stacks.BACKENDS``).
        llmapi_decoding_type: TensorRT-LLM LLM-API ``decoding_type`` (None: no LLM-API
            speculative config: the baseline, or not on that path).
        engine_mode: the engine path's ``SpeculativeDecodingMode`` member (None: not on it).
        vllm_method: vLLM's ``--speculative-config`` method ("" for the baseline, served
            without one; None: trtbench does not serve it with vLLM).
        planner: which arithmetic ``trtbench plan`` uses (``chain``: a chain of K drafts
            with per-position acceptance rates, :attr:`default_rates`).
        drafter: what proposes the drafts (``none``, ``draft_model``, ``heads``,
            ``eagle3_head``, ``mtp_layers``, ``prompt_lookup``, …): vLLM's key builders
            and the recommendation's placeholders are keyed by it.
        label: the method's name in the report and the recommendation's prose.
        fields: the variant fields of the bench spec that belong to this method (a variant
            of another method may not set them); :attr:`spec_fields` are added to them.
        engine_counts: where the engine path's Triton repository reports its draft counts
            (``per_response``, ``perf_metrics`` or ``none``).
        free: its drafts cost no forward pass (a lookup in tokens already seen).
        default_rates: the planner's per-position acceptance rates of a ``chain``.
        reference_decoder: ``module:function`` of the reference engine's decoder factory
            (``trtbench.builders.reference.decoders``' signature); None: not on that engine.
            The module also holds the reference build's optional hooks of the method
            (``check_models``, ``build_notes``: ``builders/reference/build.py``).
        vllm_options: the ``--speculative-config`` keys after ``method`` from the variant
            alone (None: ``vllm_server/args.py`` builds them from the drafter, or vLLM does
            not serve the method).
        check: the method's own checks of a variant (None: its fields' types suffice).
        spec_fields: variant fields this module declares itself: name → ``(annotation,
            pydantic FieldInfo)``, added to ``VariantSpec`` (a method's own knobs, default
            as its peers default them).
        models_dir: ``(field of the spec's models, what it holds)``: the directory its
            drafter loads when the variant names no ``speculative_model`` (None: none).
        engine_decoding_type: TensorRT-LLM's ``decoding_type`` of its engine-path decoding
            config where it has no LLM-API one (Medusa: ``Medusa``, 1.2.1's
            ``MedusaDecodingConfig``), for the recommendation's config snippet.
        name_hints: words that mark a variant name as this method when no file records
            the mode (a server trtbench did not build); a later method's are tried first.
    """

    name: str
    order: int
    draft_length: DraftLength
    backends: tuple[str, ...]
    llmapi_decoding_type: str | None
    engine_mode: str | None
    vllm_method: str | None
    planner: Planner
    drafter: str
    label: str
    fields: tuple[str, ...] = ()
    engine_counts: EngineCounts = "none"
    free: bool = False
    default_rates: tuple[float, ...] = ()
    reference_decoder: str | None = None
    vllm_options: VllmOptions | None = field(default=None, compare=False)
    check: VariantCheck | None = field(default=None, compare=False)
    spec_fields: Mapping[str, tuple[Any, Any]] = field(
        default_factory=dict, compare=False
    )
    models_dir: tuple[str, str] | None = None
    engine_decoding_type: str | None = None
    name_hints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.spec_fields:
            own = tuple(dict.fromkeys((*self.fields, *self.spec_fields)))
            object.__setattr__(self, "fields", own)

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
        return self.free

    @property
    def llmapi_only(self) -> bool:
        """Whether TensorRT-LLM runs it on its LLM-API path only (not the engine path)."""
        return (
            self.drafts
            and self.engine_mode is None
            and self.llmapi_decoding_type is not None
        )

    @property
    def engine_path_only(self) -> bool:
        """Whether TensorRT-LLM runs it on its engine path only (not the LLM API)."""
        return (
            self.drafts
            and self.engine_mode is not None
            and self.llmapi_decoding_type is None
        )

    @property
    def draft_engine(self) -> bool:
        """Whether the engine path builds it as two engines, the target verifying what a
        separate draft engine proposes (``DRAFT_TOKENS_EXTERNAL``)."""
        return self.engine_mode == "DRAFT_TOKENS_EXTERNAL"

    @property
    def trtllm_decoding_type(self) -> str | None:
        """TensorRT-LLM's ``decoding_type`` of the method on either path (None: neither)."""
        return self.llmapi_decoding_type or self.engine_decoding_type

    def owns(self, field: str) -> bool:
        """Whether ``field`` (a variant field) belongs to this method (:attr:`fields`)."""
        return field in self.fields

    def check_variant(self, variant: Any) -> None:
        """Run the method's own checks of ``variant`` (:attr:`check`).

        Raises:
            ValueError: the field and the fix, in one line.
        """
        if self.check is not None:
            self.check(variant)
