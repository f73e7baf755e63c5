"""Bench-spec fields of the measurement design: how the variants of a run are measured in time.

* ``loadtest.design``: ``auto`` (default), ``interleaved``, ``rounds`` or ``sequential``
  (``profiling/loadtest/workload/design.py`` describes each). ``auto`` is ``interleaved`` when the
  variants' servers can be up at once, else ``rounds``.
* ``loadtest.repeats`` (also spelt ``loadtest.rounds``): rounds; every variant runs every tier
  once per round. Ratios between variants take their 95 % intervals over rounds, so 3 or more
  are needed for an interval.
* ``deploy.co_resident``: the variants' servers fit on the machine together. Default: true
  when every variant is served by tritonserver running trtbench's reference engine (small
  models, CPU or GPU), false otherwise (a TensorRT-LLM engine or a vLLM server takes a GPU's
  memory for its KV cache); set it to true on a GPU whose memory holds every variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from trtbench.core.errors import ConfigError

Design = Literal["auto", "interleaved", "rounds", "sequential"]


class DesignFields(BaseModel):
    """``loadtest.design`` (a base of :class:`trtbench.spec.bench.LoadtestSpec`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    design: Design = "auto"


class CoResidentField(BaseModel):
    """``deploy.co_resident`` (a base of :class:`trtbench.spec.bench.DeploySpec`; None: decide
    from the variants, :func:`resolve_design`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    co_resident: bool | None = None


@dataclass(frozen=True)
class ResolvedDesign:
    """The design a run uses: ``name`` (interleaved, rounds or sequential), ``rounds``,
    ``co_resident`` and ``asked`` (the spec's ``loadtest.design``)."""

    name: str
    rounds: int
    co_resident: bool
    asked: str

    def as_json(self) -> dict[str, Any]:
        """run.json's ``design`` (the order is added by the run)."""
        return {
            "name": self.name,
            "rounds": self.rounds,
            "co_resident": self.co_resident,
            "asked": self.asked,
        }


def _reference_served(spec: Any, variant: Any) -> bool:
    backend = spec.backend_of(variant)
    if variant.server != "triton":
        return False
    return backend == "reference" or (
        backend == "trtllm-pytorch" and spec.deploy.llmapi_runtime == "reference"
    )


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
    return ResolvedDesign(name, spec.loadtest.repeats, bool(co), asked)
