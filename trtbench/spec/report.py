"""Bench-spec fields of the report: ``report: {objective}`` (what "best" means).

``objective`` picks the figure the recommendation ranks variants by at each tier
(``profiling/report/recommendation.py``):

* ``output_tok_s`` (default): system output tokens/s, higher is better;
* ``tpot_p50``: median time per output token, lower is better;
* ``goodput``: requests/s meeting every SLO (summary.csv ``request_goodput_per_s``), higher is
  better. It needs at least one of ``loadtest.slo_ttft_ms`` / ``slo_tpot_ms`` / ``slo_e2e_ms``.

``trtbench report RUN --objective ...`` overrides the value recorded in run.json.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from trtbench.core.errors import ConfigError

Objective = Literal["output_tok_s", "tpot_p50", "goodput"]
OBJECTIVES: tuple[str, ...] = ("output_tok_s", "tpot_p50", "goodput")
DEFAULT_OBJECTIVE = "output_tok_s"
SLO_FIELDS = ("slo_ttft_ms", "slo_tpot_ms", "slo_e2e_ms")
GOODPUT_FIX = (
    "set loadtest.slo_ttft_ms, slo_tpot_ms or slo_e2e_ms (and run the load test again), "
    "or choose objective output_tok_s or tpot_p50"
)


class ReportSpec(BaseModel):
    """``report:`` of the bench spec (module docstring). ``equivalence_margin``: two
    variants whose paired interval lies within ±this fraction are *equivalent*
    (``profiling/loadtest/stats/decisions.py``; default 0.05, ±5 %)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    objective: Objective = DEFAULT_OBJECTIVE
    equivalence_margin: float = Field(default=0.05, gt=0, lt=1)


class ReportFields(BaseModel):
    """The ``report`` field of :class:`trtbench.spec.bench.BenchSpec` and its check against the
    load test's SLOs (a base class, like the variant field groups)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    report: ReportSpec = ReportSpec()

    @model_validator(mode="after")
    def _goodput_needs_slos(self) -> Any:
        loadtest = getattr(self, "loadtest", None)
        slos = getattr(loadtest, "slos", None) if loadtest is not None else None
        if self.report.objective == "goodput" and slos is not None and not slos:
            raise ValueError(f"report.objective goodput needs SLOs: {GOODPUT_FIX}")
        return self


def recorded_report(run: dict[str, Any]) -> tuple[str | None, dict[str, float]]:
    """``(report.objective, {slo field: value})`` from a run.json document's recorded spec
    (``build.spec``); None / ``{}`` where it records none."""
    build = run.get("build") if isinstance(run.get("build"), dict) else {}
    spec = build.get("spec") if isinstance(build.get("spec"), dict) else {}
    report = spec.get("report") if isinstance(spec.get("report"), dict) else {}
    loadtest = spec.get("loadtest") if isinstance(spec.get("loadtest"), dict) else {}
    slos = {f: float(loadtest[f]) for f in SLO_FIELDS if loadtest.get(f) is not None}
    objective = report.get("objective")
    return (str(objective) if objective else None), slos


def recorded_equivalence_margin(run: dict[str, Any]) -> float:
    """``report.equivalence_margin`` of a run.json document's recorded spec (0.05 where it
    records none, or a value that is not a fraction in (0, 1))."""
    build = run.get("build") if isinstance(run.get("build"), dict) else {}
    spec = build.get("spec") if isinstance(build.get("spec"), dict) else {}
    report = spec.get("report") if isinstance(spec.get("report"), dict) else {}
    value = report.get("equivalence_margin")
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and 0 < value < 1 else 0.05


def resolve_objective(given: str | None, recorded: str | None) -> str:
    """The objective in force: the CLI's ``given``, else the run's ``recorded``, else
    :data:`DEFAULT_OBJECTIVE`.

    Raises:
        ConfigError: the value is not one of :data:`OBJECTIVES`.
    """
    objective = given or recorded or DEFAULT_OBJECTIVE
    if objective not in OBJECTIVES:
        raise ConfigError(
            f"report objective {objective!r} is unknown; use one of {', '.join(OBJECTIVES)}"
        )
    return objective


def check_goodput_slos(objective: str, has_slos: bool) -> None:
    """Refuse ``goodput`` on a run that measured no goodput.

    Raises:
        ConfigError: ``objective`` is goodput and ``has_slos`` is False.
    """
    if objective == "goodput" and not has_slos:
        raise ConfigError(
            "objective goodput needs SLOs, and this run has none (no loadtest.slo_* and "
            f"no request_goodput_per_s in summary.csv): {GOODPUT_FIX}"
        )
