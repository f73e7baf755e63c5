"""Bench-spec fields of the measurement design: how the variants of a run are measured in time.

* ``loadtest.design``: ``auto`` (default), ``interleaved``, ``rounds`` or ``sequential``
  (``profiling/loadtest/workload/design.py`` describes each). ``auto`` is ``interleaved`` when the
  variants' servers can be up at once, else ``rounds``.
* ``loadtest.repeats`` (also spelt ``loadtest.rounds``): rounds; every variant runs every tier
  once per round. Ratios between variants take their 95 % intervals over rounds, so 3 or more
  are needed for an interval. ``rounds: auto`` measures by need: after every 3 rounds the
  comparisons are decided (``profiling/loadtest/stats/racing.py``), a variant clearly worse
  than a tier's leader stops being measured there, and the run ends when nothing is open or
  ``loadtest.budget`` (``max_rounds``, default 12; ``max_minutes``) is spent. Its intervals
  are built to stay valid under that stopping (``profiling/loadtest/stats/decisions.py``).
  It needs the ``interleaved`` design and the ``output_tok_s`` objective. ``auto`` is the
  default: a spec that gives no rounds races where it can, and measures one round where it
  cannot (the ``rounds`` or ``sequential`` design, another objective; the run says so); a
  spec that asks for ``auto`` where no race can run is refused.
* ``loadtest.instance_sd`` (default 0.036): τ, how much two server processes of one
  variant differ (the SD of their log ratio). Every interval between variants carries it
  (``profiling/loadtest/stats/decisions.py``, "Server instances"): rounds paired in time
  cancel the host's drift, not what is fixed for a server process's life.
* ``loadtest.restart_every`` (default: none): the ``interleaved`` design starts fresh
  servers after every this many rounds, so that the instance term averages over processes
  (with ``rounds: auto``, 3 matches the looks). The ``rounds`` design starts its servers
  every round anyway.
* ``deploy.co_resident``: the variants' servers fit on the machine together. Default: true
  when every variant is served by tritonserver running trtbench's reference engine (small
  models, CPU or GPU), false otherwise (a TensorRT-LLM engine or a vLLM server takes a GPU's
  memory for its KV cache); set it to true on a GPU whose memory holds every variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from trtbench.core import stacks
from trtbench.core.errors import ConfigError

Design = Literal["auto", "interleaved", "rounds", "sequential"]


AUTO_ROUNDS = "auto"
INSTANCE_SD = 0.036
"""``loadtest.instance_sd``'s default: the SD of the log ratio between two server processes
of identical variants, measured by A/A runs on a 2-core host (docs/aa_check.md, "Server
instances"); measure yours with ``scripts/aa_check.py`` and set it (0 drops the term)."""


class BudgetSpec(BaseModel):
    """``loadtest.budget``: the most a ``rounds: auto`` run may measure.

    Attributes:
        max_rounds: rounds at most (≥ 3; the looks' schedule is spread over them).
        max_minutes: minutes of measuring at most (None: no limit); a round that starts
            before the limit runs to its end.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    max_rounds: int = Field(default=12, ge=3, le=100)
    max_minutes: float | None = Field(default=None, gt=0)


class DesignFields(BaseModel):
    """``loadtest.design``, ``loadtest.budget`` and ``rounds: auto`` (a base of
    :class:`trtbench.spec.bench.LoadtestSpec`; ``stop_when_decided`` is what ``rounds:
    auto`` sets, with ``repeats`` = ``budget.max_rounds``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    design: Design = "auto"
    budget: BudgetSpec = BudgetSpec()
    instance_sd: float = Field(default=INSTANCE_SD, ge=0.0, lt=0.5)
    restart_every: int | None = Field(default=None, ge=1, le=100)
    stop_when_decided: bool = False
    rounds_by_default: bool = False

    @model_validator(mode="before")
    @classmethod
    def _auto_rounds(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        given = [k for k in ("rounds", "repeats") if k in data]
        if len(given) > 1:
            raise ValueError("give rounds or repeats (the same field), not both")
        asked = next(
            (k for k in given if str(data[k]).strip().lower() == AUTO_ROUNDS), None
        )
        if given and asked is None:
            budget = data.get("budget")
            if budget not in (None, {}, BudgetSpec(), BudgetSpec().model_dump()) and (
                not data.get("stop_when_decided")
            ):
                raise ValueError(
                    f"budget applies to rounds: auto, and rounds is {data[given[0]]!r}: "
                    "remove budget, or set rounds: auto"
                )
            return data  # a number: a fixed design (or a race written back, run.json)
        data = dict(data)
        budget = data.get("budget") or {}
        most = budget.get("max_rounds", 12) if isinstance(budget, dict) else 12
        data[asked or "repeats"] = most
        data["stop_when_decided"] = True
        data["rounds_by_default"] = asked is None
        return data


class CoResidentField(BaseModel):
    """``deploy.co_resident`` (a base of :class:`trtbench.spec.bench.DeploySpec`; None: decide
    from the variants, :func:`resolve_design`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    co_resident: bool | None = None


@dataclass(frozen=True)
class ResolvedDesign:
    """The design a run uses: ``name`` (interleaved, rounds or sequential), ``rounds`` (the
    most, with ``stop_when_decided``), ``co_resident``, ``asked`` (the spec's
    ``loadtest.design``), ``stop_when_decided`` (``rounds: auto``), ``max_minutes`` and
    ``no_race`` (why a spec that gave no rounds measures one: no race can run)."""

    name: str
    rounds: int
    co_resident: bool
    asked: str
    stop_when_decided: bool = False
    max_minutes: float | None = None
    no_race: str | None = None

    def as_json(self) -> dict[str, Any]:
        """run.json's ``design`` (the order is added by the run)."""
        out: dict[str, Any] = {
            "name": self.name,
            "rounds": self.rounds,
            "co_resident": self.co_resident,
            "asked": self.asked,
        }
        if self.no_race:
            out["no_race"] = self.no_race
        if self.stop_when_decided:
            out["stopping"] = {
                "rule": "race",
                "max_rounds": self.rounds,
                "max_minutes": self.max_minutes,
            }
        return out


def _reference_served(spec: Any, variant: Any) -> bool:
    backend = stacks.backend(spec.backend_of(variant))
    if not stacks.server(variant.server).model_repository:
        return False
    return backend.reference_engine or (
        backend.llmapi and spec.deploy.llmapi_runtime == "reference"
    )


def no_race_because(spec: Any, design: str) -> str | None:
    """Why a run of ``spec`` in ``design`` (interleaved, rounds, sequential) cannot race
    (``rounds: auto``); None when it can."""
    if design != "interleaved":
        return f"the {design} design restarts servers between rounds"
    if spec.report.objective != "output_tok_s":
        return f"report.objective is {spec.report.objective}; a race decides on output tok/s"
    return None


def resolve_design(spec: Any, variants: Sequence[Any]) -> ResolvedDesign:
    """The design of a run of ``variants`` of ``spec`` (a :class:`trtbench.spec.bench.BenchSpec`).

    Raises:
        ConfigError: ``interleaved`` where the servers are not co-resident
            (``deploy.co_resident: false``), or with several client processes
            (``loadtest.workers`` > 1).
    """
    co = spec.deploy.co_resident
    if co is None:
        co = all(_reference_served(spec, v) for v in variants)
    asked = spec.loadtest.design
    name = asked if asked != "auto" else ("interleaved" if co else "rounds")
    if name == "interleaved" and not co:
        raise ConfigError(
            "loadtest.design interleaved keeps every variant's server up at once, and these "
            "variants are not co-resident; set deploy.co_resident: true if they fit on the "
            "machine together, or use loadtest.design: rounds"
        )
    if name == "interleaved" and spec.loadtest.workers > 1:
        raise ConfigError(
            f"loadtest.workers {spec.loadtest.workers} with loadtest.design interleaved is "
            "not supported yet; use loadtest.design: rounds (servers restarted each round), "
            "or workers: 1"
        )
    auto = spec.loadtest.stop_when_decided
    rounds, why = spec.loadtest.repeats, None
    if (
        auto
        and spec.loadtest.rounds_by_default
        and (why := no_race_because(spec, name))
    ):
        auto, rounds = False, 1  # the default where no race can run: one round
    if auto and name != "interleaved":
        raise ConfigError(
            f"loadtest.rounds auto decides between rounds of the interleaved design; "
            f"this run is {name}: give loadtest.rounds a number, or let the servers share "
            "the machine (deploy.co_resident: true, loadtest.design: interleaved)"
        )
    if auto and spec.report.objective != "output_tok_s":
        raise ConfigError(
            f"loadtest.rounds auto races on output tok/s; report.objective is "
            f"{spec.report.objective}: give loadtest.rounds a number, or use objective "
            "output_tok_s"
        )
    if spec.loadtest.restart_every is not None and name != "interleaved":
        raise ConfigError(
            f"loadtest.restart_every restarts the servers of the interleaved design; this "
            f"run is {name} (its servers start every round or once): remove restart_every"
        )
    return ResolvedDesign(
        name,
        rounds,
        bool(co),
        asked,
        auto,
        spec.loadtest.budget.max_minutes if auto else None,
        why,
    )
