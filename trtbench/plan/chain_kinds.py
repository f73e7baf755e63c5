"""The kinds of chain drafter the planner costs: each chain method is planned by its kind.

A chain method (``Method.planner`` ``chain``) is planned by what its drafter is, facts its
module declares (``Method.free``, ``Method.drafter``), never by its name:

* :data:`LOOKUP`: every ``free`` method (n-gram's prompt lookup, suffix decoding's trees):
  no model, no memory, ``--MODE-lookup-us`` of CPU per sequence per step;
* :data:`HEAD`: an EAGLE-3 head (drafter ``eagle3_head``): target-width decoder layers, fc and
  LM head over the target's hidden states, a chain or an EAGLE tree (``--MODE-topk``,
  ``--MODE-tokens``);
* :data:`MODULES`: multi-token-prediction modules (drafter ``mtp_layers``), ``--MODE-layers``
  of them in memory.

Each kind names its ``trtbench plan`` options beyond the rates (``--MODE``) with their
defaults, bounds and help; :func:`chain_fields` makes them ``PlanSettings`` fields and
``commands/plan.py`` click options, so a new chain method of a known kind (suffix decoding:
``free``) is planned, with its options, without new code (``chain_modes`` for the costs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from trtbench.core.errors import ConfigError
from trtbench.core.methods import CHAIN_METHODS, METHODS, Method
from trtbench.plan.chain_modes import (
    ChainSetup,
    eagle3_setup,
    lookup_setup,
    mtp_setup,
    option_flag,
    with_tree,
)
from trtbench.plan.model_shapes import ModelShape

Given = Mapping[str, Any]
"""A kind's option values by :attr:`KindOption.name`."""


@dataclass(frozen=True)
class KindOption:
    """One option of a kind beyond the rates: flag ``--MODE-NAME``, setting ``MODE_NAME``.

    Attributes:
        name: the part after the method's name (``lookup_us``).
        type: ``int`` or ``float``.
        default: its default (None: unset, the kind decides; ``--help`` shows none).
        bounds: pydantic's bounds of the value (``{"ge": 1}``).
        help: its ``--help`` text; ``{label}``: the method's label.
    """

    name: str
    type: type
    default: Any
    bounds: Mapping[str, Any] = field(default_factory=dict)
    help: str = ""

    def setting(self, mode: str) -> str:
        """Its ``PlanSettings`` field for chain method ``mode`` (``eagle3_topk``)."""
        return f"{mode}_{self.name}"

    def flag(self, mode: str) -> str:
        """Its ``trtbench plan`` flag for chain method ``mode`` (``--eagle3-topk``)."""
        return f"{option_flag(mode)}-{self.name.replace('_', '-')}"

    def pydantic_field(self) -> tuple[Any, Any]:
        """(annotation, FieldInfo) of its setting: its type (optional without a default),
        its default and bounds."""
        annotation = self.type if self.default is not None else self.type | None
        return annotation, Field(default=self.default, **self.bounds)


@dataclass(frozen=True)
class ChainKind:
    """How one kind of chain drafter is planned.

    Attributes:
        name: ``lookup`` | ``head`` | ``modules``.
        rates_help: the ``--MODE`` option's help; ``{label}``, ``{rates}`` (the method's
            default rates) and ``{drafter}`` (its drafter in words) are filled in.
        options: its options beyond the rates, in ``--help`` order.
        build: (method, target, rates, option values) → its setup; raises ConfigError
            naming the option.
        check: run before any rates are read, with whether rates were given; raises
            ConfigError naming the options (None: nothing to check).
    """

    name: str
    rates_help: str
    options: tuple[KindOption, ...]
    build: Callable[[Method, ModelShape, tuple[float, ...], Given], ChainSetup]
    check: Callable[[Method, Given, bool], None] | None = None

    def help(self, method: Method) -> str:
        """The ``--MODE`` rates option's help for ``method``."""
        return self.rates_help.format(
            label=method.label,
            rates=",".join(f"{a:g}" for a in method.default_rates),
            drafter=method.drafter.replace("_", " "),
        )


def _lookup(
    method: Method, _: ModelShape, rates: tuple[float, ...], given: Given
) -> ChainSetup:
    return lookup_setup(method.name, rates, given["lookup_us"] * 1e-6)


def _head(
    method: Method, target: ModelShape, rates: tuple[float, ...], given: Given
) -> ChainSetup:
    chain = eagle3_setup(method.name, target, rates, given["layers"], given["vocab"])
    try:
        return with_tree(chain, given["topk"], given["tokens"])
    except ConfigError as exc:
        raise ConfigError(f"{option_flag(method.name)}-topk: {exc}") from None


def _tree_needs_rates(method: Method, given: Given, has_rates: bool) -> None:
    flag = option_flag(method.name)
    if (given["topk"] > 1 or given["tokens"] > 0) and not has_rates:
        raise ConfigError(
            f"{flag}-topk / {flag}-tokens shape an {method.label} tree; give {flag} RATES "
            "as well (the number of rates is the tree's depth)"
        )


def _modules(
    method: Method, target: ModelShape, rates: tuple[float, ...], given: Given
) -> ChainSetup:
    return mtp_setup(method.name, target, rates, given["layers"])


LOOKUP = ChainKind(
    "lookup",
    "{label} ({drafter}) chain rates (default: {rates}, assumed).",
    (
        KindOption(
            "lookup_us",
            float,
            10.0,  # chain_modes.DEFAULT_LOOKUP_S in µs
            {"ge": 0.0},
            "CPU lookup time per sequence per step (assumed).",
        ),
    ),
    _lookup,
)
HEAD = ChainKind(
    "head",
    "Plan {label} with these rates ('default': {rates}, assumed; 'E@K': a published "
    "acceptance length E with K drafts); K = number of rates.",
    (
        KindOption("layers", int, 1, {"ge": 1}, "Decoder layers of the {label} head."),
        KindOption(
            "vocab",
            int,
            None,
            {"ge": 1},
            "Draft vocabulary of the {label} LM head (default: the target's).",
        ),
        KindOption(
            "topk",
            int,
            1,
            {"ge": 1, "le": 64},
            "EAGLE tree: candidates each node expands (SGLang speculative_eagle_topk; "
            "1: a chain).",
        ),
        KindOption(
            "tokens",
            int,
            0,
            {"ge": 0, "le": 1024},
            "EAGLE tree: drafted tokens verified per step (speculative_num_draft_tokens "
            "- 1; 0: the chain's K). Depth = the number of rates.",
        ),
    ),
    _head,
    _tree_needs_rates,
)
MODULES = ChainKind(
    "modules",
    "Plan {label} with these rates ('default': {rates}, DeepSeek-V3's 2nd-token "
    "acceptance).",
    (
        KindOption(
            "layers",
            int,
            1,
            {"ge": 1},
            "{label} modules in memory (num_nextn_predict_layers).",
        ),
    ),
    _modules,
)
MODEL_KINDS = {"eagle3_head": HEAD, "mtp_layers": MODULES}
"""``Method.drafter`` → the kind of a chain drafter that runs a model (a free one is a
:data:`LOOKUP`)."""


def chain_kind(method: Method) -> ChainKind | None:
    """The kind ``method`` is planned by (None: not a chain method, or a drafter the planner
    has no cost model of)."""
    if method.name not in CHAIN_METHODS:
        return None
    return LOOKUP if method.free_drafts else MODEL_KINDS.get(method.drafter)


def chain_methods() -> tuple[tuple[Method, ChainKind], ...]:
    """Every chain method the planner plans, with its kind, in the methods' order."""
    pairs = ((METHODS[name], chain_kind(METHODS[name])) for name in CHAIN_METHODS)
    return tuple((m, kind) for m, kind in pairs if kind is not None)


def chain_fields() -> dict[str, tuple[Any, Any]]:
    """``PlanSettings``' fields of the chain methods, in ``--help`` order: per method its
    rates (``MODE``: text, None: not planned) and its kind's options (``MODE_NAME``)."""
    fields: dict[str, tuple[Any, Any]] = {}
    for method, kind in chain_methods():
        fields[method.name] = (str | None, None)
        for option in kind.options:
            fields[option.setting(method.name)] = option.pydantic_field()
    return fields


def given_options(method: Method, kind: ChainKind, settings: Any) -> dict[str, Any]:
    """The values of ``kind``'s options for ``method`` in ``settings`` (a ``PlanSettings``)."""
    return {o.name: getattr(settings, o.setting(method.name)) for o in kind.options}
