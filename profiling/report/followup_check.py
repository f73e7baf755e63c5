"""The follow-up check of a recommendation: measured again over the same tiers, does the
recommended config keep up with the best fixed variant of the original run at every tier?
(pure: tier tables in, typed records, a JSON-ready dict and Markdown out)

Definitions:

* Compared figure: the objective's own figure where repeats give it a per-variant
  interval (``output_tok_s``: tier table ``output_tokens_per_s``); for ``tpot_p50`` the TPOT
  *mean* stands in (repeats give no p50 interval; the recommendation's margin over the
  baseline uses the same stand-in); ``goodput`` has no interval: no check (:func:`check_basis`
  returns None).
* Interval: the 95 % Student-t interval over the passes on the log scale
  (summary.csv ``*_ci95_low`` / ``*_ci95_high``, ``profiling/loadtest/repeats.py``), the one
  ``recommendation.py`` reads to call two variants apart.
* Criterion at a tier, higher-better figure: **pass** when the recommended config is not
  significantly worse than the best fixed variant, i.e. the upper end of its interval
  reaches the lower end of the best's: ``rec_high >= best_low``; lower-better, mirrored:
  ``rec_low <= best_high``. A fail is what ``recommendation.py`` calls a significant
  difference (disjoint intervals) with the best fixed variant on top.
* Ratio: recommended / best of the point values (the pooled figures the recommendation
  shows), interval ``[rec_low / best_high, rec_high / best_low]`` from the interval ends (as
  the recommendation's margin over its runner-up). The criterion is the same statement as
  "the ratio interval reaches 1" (from above for higher-better, from below for lower-better).
* Tier status: ``pass``, ``fail``, or ``unchecked`` (the follow-up did not measure the tier
  or its tier is not complete — partial, failed, interrupted — or either side has no interval
  or rests on fewer than :data:`MIN_PASSES` passes: a stopped run's two-pass interval,
  t(0.975, 1) = 12.7, would pass almost anything).
  Verdict: ``pass`` when every tier of the recommendation passes, ``fail`` when one fails,
  else ``incomplete``.

False failures. For two identical configs measured with n = 3 passes each, per-pass values
log-normal with the same spread, the rule fails a tier when the difference of the two
log-means exceeds the sum of the half-widths ``t(0.975, 2) s / sqrt(3)`` (t = 4.30): about
0.2 % of tiers, 0.9 % of four-tier checks. The best fixed variant is the maximum of several
variants, which favours it: when four equally good variants compete, about 0.7 % per tier
(2.6 % per four-tier check). A shift of the host between the two runs by one pass-to-pass
standard deviation raises it to 2 to 4 % per tier (simulated, ``tests/unit/profiling/report/
test_followup_check.py``). The price of so few false failures is power: with three passes
the check catches only large losses (on the demo's tiers, ratio intervals such as 0.94x
[0.65, 1.37] at c4 and 0.99x [0.30, 3.26] at c1 mean a fail needs the recommended config
below roughly 70 % of the best at c4, 30 % at c1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from trtbench.profiling.report.recommendation import OBJECTIVE_INFO
from trtbench.profiling.report.uncertainty import interval_text

FOLLOW_UP_DIR = "follow-up"
"""The follow-up run's directory inside the original run directory."""
CHECK_JSON = "check.json"
"""The check's document inside :data:`FOLLOW_UP_DIR`."""
CHECK_SCHEMA_VERSION = 1
MIN_PASSES = 3
"""Passes (summary.csv ``repeats_count``) each side needs at a tier to be checked."""
PASS, FAIL, UNCHECKED = "pass", "fail", "unchecked"
CRITERION = (
    "at each complete tier the recommended config passes when it is not significantly worse "
    "than the best fixed variant of the run: the upper end of its 95 % interval reaches the "
    "lower end of the best's (higher-better figure; mirrored for a lower-better one)"
)
FALSE_FAILURE = (
    "two identical configs fail a tier about 0.2 % of the time with 3 passes each (0.7 % "
    "when the best is the top of four equal variants; 2-4 % after a host shift of one "
    "pass-to-pass standard deviation between the runs); with 3 passes only large losses fail"
)


@dataclass(frozen=True)
class CheckBasis:
    """The figure a check compares: tier-table ``column`` and its interval columns
    ``<interval>_ci95_low`` / ``_high``; ``note``: a stand-in's reason ('' for none)."""

    objective: str
    column: str
    interval: str
    higher_is_better: bool
    label: str
    unit: str
    note: str = ""


def check_basis(objective: str) -> CheckBasis | None:
    """The :class:`CheckBasis` of ``objective`` (module docstring); None when repeats give
    it no per-variant interval (goodput).

    Raises:
        KeyError: ``objective`` is not a key of ``recommendation.OBJECTIVE_INFO``.
    """
    info = OBJECTIVE_INFO[objective]
    if info.value_interval is not None:
        return CheckBasis(objective, info.column, info.value_interval,
                          info.higher_is_better, info.label, info.unit)  # fmt: skip
    if objective == "tpot_p50":
        return CheckBasis(objective, "tpot_mean_ms", "tpot_mean_ms", False, "TPOT mean",
                          "ms", "TPOT mean stands in for TPOT p50: repeats give no p50 "
                          "interval")  # fmt: skip
    return None


@dataclass(frozen=True)
class Estimate:
    """A point value, its 95 % interval and the passes behind it (None: not available)."""

    value: float | None
    low: float | None
    high: float | None
    passes: int | None = None

    @property
    def has_interval(self) -> bool:
        """A value with both interval ends."""
        return None not in (self.value, self.low, self.high)


@dataclass(frozen=True)
class TierCheck:
    """The check at one tier (module docstring); ``ratio*``: recommended / best."""

    tier: str
    concurrency: float | None
    best: str
    best_estimate: Estimate
    recommended: Estimate
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None
    status: str
    reason: str


def not_worse(rec: Estimate, best: Estimate, higher_is_better: bool) -> bool:
    """The criterion: ``rec.high >= best.low`` (higher better) or ``rec.low <= best.high``.

    Raises:
        ValueError: either lacks an interval.
    """
    if not (rec.has_interval and best.has_interval):
        raise ValueError("the criterion needs both intervals")
    if higher_is_better:
        return float(rec.high) >= float(best.low)  # type: ignore[arg-type]
    return float(rec.low) <= float(best.high)  # type: ignore[arg-type]


def ratio_interval(rec: Estimate, best: Estimate) -> tuple[float | None, ...]:
    """``(rec / best, rec.low / best.high, rec.high / best.low)``; None where a figure is
    missing or a divisor is not positive."""

    def div(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b <= 0 else a / b

    return (div(rec.value, best.value), div(rec.low, best.high),
            div(rec.high, best.low))  # fmt: skip


def _num(v: object) -> float | None:
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _row(frame: pd.DataFrame, variant: str, tier: str) -> pd.Series | None:
    hit = frame[(frame["variant"] == variant) & (frame["tier"] == tier)]
    return None if hit.empty else hit.iloc[0]


def _estimate(row: pd.Series | None, basis: CheckBasis) -> Estimate:
    if row is None:
        return Estimate(None, None, None)
    passes = _num(row.get("repeats_count"))
    return Estimate(_num(row.get(basis.column)),
                    _num(row.get(f"{basis.interval}_ci95_low")),
                    _num(row.get(f"{basis.interval}_ci95_high")),
                    None if passes is None else int(passes))  # fmt: skip


def _status(row: pd.Series | None, rec: Estimate, best: Estimate,
            basis: CheckBasis) -> tuple[str, str]:  # fmt: skip
    if row is None:
        return UNCHECKED, "the follow-up did not measure this tier"
    status = str(row.get("tier_status") or "complete")
    if status != "complete":
        reason = str(row.get("tier_status_reason") or "")
        return UNCHECKED, f"follow-up tier {status}" + (
            f" ({reason})" if reason else ""
        )
    if not best.has_interval:
        return UNCHECKED, "the best fixed variant has no interval at this tier"
    if not rec.has_interval:
        return UNCHECKED, "the recommended config has no interval at this tier"
    for side, e in (("the best fixed variant", best), ("the recommended config", rec)):
        if (e.passes or 0) < MIN_PASSES:
            return UNCHECKED, (f"{side} has {e.passes or 0} passes at this tier, the check "
                               f"needs {MIN_PASSES}")  # fmt: skip
    if not_worse(rec, best, basis.higher_is_better):
        return PASS, "intervals reach each other"
    return FAIL, "significantly worse than the best fixed variant (disjoint intervals)"


def check_tiers(
    original: pd.DataFrame,
    follow_up: pd.DataFrame,
    best: Mapping[str, str],
    recommended: str,
    basis: CheckBasis,
) -> list[TierCheck]:
    """One :class:`TierCheck` per tier of ``best``, in its order.

    Args:
        original: the original run's tier table (``comparison.tier_table``).
        follow_up: the follow-up run's tier table.
        best: tier label → the best fixed variant there (recommendation.json ``tiers``).
        recommended: the follow-up's variant name.
        basis: the compared figure (:func:`check_basis`).
    """
    out = []
    for tier, name in best.items():
        mine = _row(original, name, tier)
        theirs = _row(follow_up, recommended, tier)
        b, r = _estimate(mine, basis), _estimate(theirs, basis)
        status, reason = _status(theirs, r, b, basis)
        conc = _num(mine.get("concurrency")) if mine is not None else None
        out.append(
            TierCheck(tier, conc, name, b, r, *ratio_interval(r, b), status, reason)
        )
    return out


def verdict_of(tiers: Sequence[TierCheck]) -> str:
    """``fail`` if a tier fails, ``pass`` if every tier passes (at least one), else
    ``incomplete``."""
    statuses = [t.status for t in tiers]
    if FAIL in statuses:
        return FAIL
    return PASS if statuses and all(s == PASS for s in statuses) else "incomplete"


def check_document(
    tiers: Sequence[TierCheck], basis: CheckBasis, recommended: Mapping[str, Any],
    paths: Mapping[str, str],
) -> dict[str, Any]:  # fmt: skip
    """``check.json``: ``schema_version``, ``verdict`` and ``passed``, ``failed`` /
    ``unchecked`` (tier labels), ``objective`` (the :class:`CheckBasis`), ``criterion``,
    ``false_failure``, ``recommended`` (``variant``, ``from``, ``speculation``), ``paths``
    (``run``, ``follow_up``) and ``tiers`` (each :class:`TierCheck`; estimates as
    ``{value, low, high}``; values in the figure's unit)."""
    verdict = verdict_of(tiers)
    return {
        "schema_version": CHECK_SCHEMA_VERSION,
        "verdict": verdict,
        "passed": verdict == PASS,
        "failed": [t.tier for t in tiers if t.status == FAIL],
        "unchecked": [t.tier for t in tiers if t.status == UNCHECKED],
        "objective": asdict(basis),
        "criterion": CRITERION,
        "false_failure": FALSE_FAILURE,
        "recommended": dict(recommended),
        "paths": dict(paths),
        "tiers": [asdict(t) for t in tiers],
    }


CHECK_HEADER = ("tier", "best fixed variant", "its value [95 %]",
                "recommended [95 %]", "ratio rec/best [95 %]", "pass")  # fmt: skip


def check_rows(doc: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The table of a ``check.json`` document, one row of :data:`CHECK_HEADER` cells per
    tier (for report.md and the terminal)."""
    unit = (doc.get("objective") or {}).get("unit", "")
    spec = ".3g" if unit == "ms" else ".1f"
    rows = []
    for t in doc.get("tiers") or []:
        b, r = t.get("best_estimate") or {}, t.get("recommended") or {}
        status = str(t.get("status"))
        mark = {PASS: "yes", FAIL: "NO"}.get(status, f"unchecked: {t.get('reason')}")
        rows.append((
            str(t.get("tier")), str(t.get("best")),
            interval_text(b.get("value"), b.get("low"), b.get("high"), spec, ""),
            interval_text(r.get("value"), r.get("low"), r.get("high"), spec, ""),
            interval_text(t.get("ratio"), t.get("ratio_low"), t.get("ratio_high")),
            mark,
        ))  # fmt: skip
    return rows


def verdict_line(doc: Mapping[str, Any]) -> str:
    """One sentence: the verdict and the tiers behind it."""
    name = (doc.get("recommended") or {}).get("variant", "?")
    failed, unchecked = doc.get("failed") or [], doc.get("unchecked") or []
    if doc.get("verdict") == PASS:
        return f"`{name}` keeps up with the best fixed variant at every tier: pass."
    if doc.get("verdict") == FAIL:
        return (f"`{name}` is significantly worse than the best fixed variant at "
                f"{', '.join(failed)}: fail.")  # fmt: skip
    return (f"`{name}` could not be checked at {', '.join(unchecked) or 'any tier'}: "
            "incomplete.")  # fmt: skip


def _flow(value: Any) -> str:
    """A mapping in YAML flow style: ``{draft_len_schedule: {1: 1, 8: 1}}``."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    return str(value)


def check_lines(doc: Mapping[str, Any]) -> list[str]:
    """The "Follow-up check" section of report.md (heading included) from ``check.json``."""
    obj = doc.get("objective") or {}
    rec = doc.get("recommended") or {}
    spec = rec.get("speculation")
    how = f"`speculation: {_flow(spec)}`" if spec else "no `speculation:` (fixed)"
    lines = ["## Follow-up check", "", f"**{verdict_line(doc)}**", "",
             f"The recommended config `{rec.get('variant')}` (from `{rec.get('from')}`, "
             f"{how}) was measured again over the same tiers, repeats, requests and seed "
             f"in `{FOLLOW_UP_DIR}/` (`trtbench follow-up`). "
             f"Figure: {obj.get('label')} ({obj.get('unit')}, "
             f"{'higher' if obj.get('higher_is_better') else 'lower'} is better)"
             + (f"; {obj['note']}" if obj.get("note") else "") + ".", "",
             f"Criterion: {doc.get('criterion')}. False failures: "
             f"{doc.get('false_failure')}.", "",
             "| " + " | ".join(CHECK_HEADER) + " |",
             "|" + "---|" * len(CHECK_HEADER)]  # fmt: skip
    lines += ["| " + " | ".join(row) + " |" for row in check_rows(doc)]
    return lines
