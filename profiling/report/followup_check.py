"""The follow-up check of a recommendation: served side by side with the run's best fixed
variant, tier by tier, is the recommended config as good? (pure: rounds.csv rows in, typed
records, a JSON-ready dict and Markdown out)

The follow-up (``trtbench follow-up``) serves the recommended config and, at each tier, the
variant the run found best there, in interleaved rounds: round r of the recommended config
and round r of the best fixed variant are measured back to back. So the check compares like
with like, from one measurement, instead of a new measurement against the old run's figures
(which reads any change of the host between the two runs as a difference).

Definitions:

* Figure: the objective's per-round figure (rounds.csv: ``output_tokens_per_s``,
  ``tpot_p50_ms`` or ``request_goodput_per_s``; :mod:`trtbench.profiling.report.margins`).
* Ratio at a tier: recommended over best, paired by round and oriented so that > 1 means the
  recommended config is better (:func:`~trtbench.profiling.report.paired.paired_ratio`),
  with its 95 % interval over the rounds.
* Stage 1, at a tier: **pass** when the interval reaches 1 (not significantly worse);
  *suspect* when it lies wholly below 1.
* Stage 2, confirmation: every suspect tier is measured again in fresh rounds (new servers,
  a new round order); it **fails** only when the confirmation is significantly worse too,
  else it passes ("not confirmed"). An answer that does not hold when asked again is not a
  failure.
* ``unchecked``: a tier either side did not complete, or with fewer than
  :data:`~trtbench.profiling.report.paired.MIN_ROUNDS` paired rounds.
* Verdict: ``pass`` when every tier passes, ``fail`` when one fails, else ``incomplete``.

Error rates. Two identical configs are suspect at a tier with probability 2.5 % (one side of
a 95 % interval) and fail only when the independent confirmation says so too: about
0.025² ≈ 0.06 % per tier, 0.25 % per four-tier check, when the rounds' ratios are
independent and log-normal. Measured on a 2-core host (``docs/aa_check.md``) the stage-1
rate was higher and one identical config was confirmed 5 % slower: an effect that outlasts a
server start is not in the intervals yet. The price is power: a loss is caught when both stages see it (measured with a
deliberately slowed config in ``docs/aa_check.md``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from trtbench.profiling.loadtest.stats.decisions import LookSchedule
from trtbench.profiling.report.margins import OBJECTIVE_INFO, as_float
from trtbench.profiling.report.paired import MIN_ROUNDS, PairedRatio, paired_ratio
from trtbench.profiling.report.uncertainty import interval_text

FOLLOW_UP_DIR = "follow-up"
"""The follow-up run's directory inside the original run directory."""
CONFIRM_DIR = "confirm"
"""The confirmation's run directory inside :data:`FOLLOW_UP_DIR`."""
CHECK_JSON = "check.json"
"""The check's document inside :data:`FOLLOW_UP_DIR`."""
CHECK_SCHEMA_VERSION = 3
"""3: the verdict ``skipped`` (with ``reason``) when nothing was measured."""
PASS, FAIL, UNCHECKED, SUSPECT = "pass", "fail", "unchecked", "suspect"
SKIPPED = "skipped"
CRITERION = (
    "at each tier the recommended config and the run's best fixed variant are measured side "
    "by side in interleaved rounds; the tier fails when the paired ratio recommended / best "
    "is significantly below 1 (its interval over rounds, 95 % or, in a race that may stop "
    "once decided, the higher level of its look, lies below 1) and a confirmation in fresh "
    "rounds says so again"
)
FALSE_FAILURE = (
    "by design two identical configs fail a tier about 0.06 % of the time (2.5 % to be "
    "suspect, times 2.5 % to be confirmed) when the stages' errors are independent; on a "
    "busy or 2-core host an identical config has been failed at one tier by about 5 % "
    "(docs/aa_check.md), so a small failure at one tier may be the host"
)


@dataclass(frozen=True)
class CheckBasis:
    """The figure a check compares: rounds.csv ``column``, its orientation and labels."""

    objective: str
    column: str
    higher_is_better: bool
    label: str
    unit: str


def check_basis(objective: str) -> CheckBasis:
    """The :class:`CheckBasis` of ``objective``.

    Raises:
        KeyError: ``objective`` is not a key of ``margins.OBJECTIVE_INFO``.
    """
    info = OBJECTIVE_INFO[objective]
    return CheckBasis(
        objective, info.rounds_column, info.higher_is_better, info.label, info.unit
    )


@dataclass(frozen=True)
class StageResult:
    """One stage at one tier: the paired ratio recommended / best (> 1: recommended
    better), its 95 % interval, the rounds and the stage's reading."""

    ratio: float | None
    low: float | None
    high: float | None
    rounds: int
    status: str
    reason: str


@dataclass(frozen=True)
class TierCheck:
    """The check at one tier: the best fixed variant, stage 1, the confirmation (None when
    stage 1 did not call for one) and the final status."""

    tier: str
    concurrency: float | None
    best: str
    first: StageResult
    confirm: StageResult | None
    status: str
    reason: str


def _incomplete(summary: pd.DataFrame, variants: Sequence[str], tier: str) -> str:
    """Why ``tier`` is not complete for one of ``variants`` ('' when it is for both)."""
    for v in variants:
        hit = summary[
            (summary["variant"].astype(str) == v)
            & (summary["tier"].astype(str) == tier)
        ]
        if hit.empty:
            return f"`{v}` was not measured at {tier}"
        status = str(hit.iloc[0].get("tier_status") or "complete")
        if status != "complete":
            why = str(hit.iloc[0].get("tier_status_reason") or "")
            return f"`{v}` {tier} is {status}" + (f" ({why})" if why else "")
    return ""


def stage_result(
    rounds: pd.DataFrame,
    summary: pd.DataFrame,
    recommended: str,
    best: str,
    tier: str,
    basis: CheckBasis,
    schedule: LookSchedule | None = None,
) -> StageResult:
    """One stage's reading at ``tier`` (module docstring): pass, suspect or unchecked.
    ``schedule``: the stage's looks (a race's intervals at their levels; default: a fixed
    design, 95 %)."""
    bad = _incomplete(summary, [recommended, best], tier)
    if bad:
        return StageResult(None, None, None, 0, UNCHECKED, bad)
    pr: PairedRatio = paired_ratio(
        rounds, recommended, best, tier, basis.column, basis.higher_is_better, schedule
    )
    ratio = None if math.isnan(pr.ratio) else pr.ratio
    if pr.low is None or pr.high is None:
        return StageResult(
            ratio,
            None,
            None,
            pr.rounds,
            UNCHECKED,
            f"{pr.rounds} paired rounds, the check needs {MIN_ROUNDS}",
        )
    if pr.high < 1.0:
        return StageResult(
            ratio,
            pr.low,
            pr.high,
            pr.rounds,
            SUSPECT,
            "significantly worse than the best fixed variant",
        )
    return StageResult(
        ratio,
        pr.low,
        pr.high,
        pr.rounds,
        PASS,
        "not significantly worse (the interval reaches 1)",
    )


def settle(
    tier: str,
    concurrency: float | None,
    best: str,
    first: StageResult,
    confirm: StageResult | None,
) -> TierCheck:
    """A tier's final status from its stages (module docstring)."""
    if first.status != SUSPECT:
        return TierCheck(
            tier, concurrency, best, first, None, first.status, first.reason
        )
    if confirm is None or confirm.status == UNCHECKED:
        why = "the confirmation did not run" if confirm is None else confirm.reason
        return TierCheck(
            tier,
            concurrency,
            best,
            first,
            confirm,
            UNCHECKED,
            f"suspect, not confirmed: {why}",
        )
    if confirm.status == SUSPECT:
        return TierCheck(
            tier,
            concurrency,
            best,
            first,
            confirm,
            FAIL,
            "significantly worse, confirmed in fresh rounds",
        )
    return TierCheck(
        tier,
        concurrency,
        best,
        first,
        confirm,
        PASS,
        "significantly worse in stage 1, not confirmed in fresh rounds",
    )


def suspects(checks: Sequence[StageResult], tiers: Sequence[str]) -> list[str]:
    """The tiers whose stage-1 reading is suspect (they are measured again)."""
    return [t for t, c in zip(tiers, checks, strict=True) if c.status == SUSPECT]


def concurrency_of(summary: pd.DataFrame, tier: str) -> float | None:
    """The concurrency of ``tier`` in a summary (None: a request-rate tier or absent)."""
    hit = summary[summary["tier"].astype(str) == tier]
    return None if hit.empty else as_float(hit.iloc[0].get("concurrency"))


def verdict_of(tiers: Sequence[TierCheck]) -> str:
    """``fail`` if a tier fails, ``pass`` if every tier passes (at least one), else
    ``incomplete``."""
    statuses = [t.status for t in tiers]
    if FAIL in statuses:
        return FAIL
    return PASS if statuses and all(s == PASS for s in statuses) else "incomplete"


def check_document(
    tiers: Sequence[TierCheck],
    basis: CheckBasis,
    recommended: Mapping[str, Any],
    paths: Mapping[str, str],
    rounds: int,
) -> dict[str, Any]:
    """``check.json``: ``schema_version``, ``verdict``, ``passed``, ``failed`` /
    ``unchecked`` / ``confirmed`` (tier labels), ``objective`` (the :class:`CheckBasis`),
    ``criterion``, ``false_failure``, ``rounds`` (per stage), ``recommended`` (``variant``,
    ``from``, ``speculation``), ``paths`` (``run``, ``follow_up``) and ``tiers`` (each
    :class:`TierCheck`; ratios recommended / best, > 1: recommended better)."""
    verdict = verdict_of(tiers)
    return {
        "schema_version": CHECK_SCHEMA_VERSION,
        "verdict": verdict,
        "passed": verdict == PASS,
        "failed": [t.tier for t in tiers if t.status == FAIL],
        "unchecked": [t.tier for t in tiers if t.status == UNCHECKED],
        "confirmed": [t.tier for t in tiers if t.confirm is not None],
        "objective": asdict(basis),
        "criterion": CRITERION,
        "false_failure": FALSE_FAILURE,
        "rounds": rounds,
        "recommended": dict(recommended),
        "paths": dict(paths),
        "tiers": [asdict(t) for t in tiers],
    }


def skipped_document(
    recommended: Mapping[str, Any],
    basis: CheckBasis,
    tiers: Sequence[str],
    paths: Mapping[str, str],
) -> dict[str, Any]:
    """``check.json`` of a follow-up that measured nothing because the recommended config
    is the run's variant ``recommended["from"]`` as measured: verdict ``skipped``,
    ``passed`` None, ``reason``, ``tiers`` [] (``unchecked``: the run's tiers)."""
    source = recommended.get("from")
    return {
        "schema_version": CHECK_SCHEMA_VERSION,
        "verdict": SKIPPED,
        "passed": None,
        "reason": (
            f"the recommended config is the run's variant `{source}` as it was measured "
            "(no `speculation:` policy added to it): the run's own interleaved rounds compared it with "
            "the best fixed variant of every tier, side by side (report: Recommendation); "
            "measuring it again would compare it with itself where it was best "
            "(`trtbench follow-up --force` does)"
        ),
        "failed": [],
        "unchecked": list(tiers),
        "confirmed": [],
        "objective": asdict(basis),
        "criterion": CRITERION,
        "false_failure": FALSE_FAILURE,
        "rounds": 0,
        "recommended": dict(recommended),
        "paths": dict(paths),
        "tiers": [],
    }


CHECK_HEADER = (
    "tier",
    "best fixed variant",
    "ratio rec/best [≥ 95 %]",
    "confirmation [≥ 95 %]",
    "pass",
)


def _stage_text(stage: Mapping[str, Any] | None) -> str:
    if not stage:
        return "-"
    text = interval_text(stage.get("ratio"), stage.get("low"), stage.get("high"))
    return f"{text} ({stage.get('rounds', 0)} rounds)" if text != "-" else "-"


def check_rows(doc: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """The table of a ``check.json`` document, one row of :data:`CHECK_HEADER` cells per
    tier (for report.md and the terminal)."""
    rows = []
    for t in doc.get("tiers") or []:
        status = str(t.get("status"))
        mark = {PASS: "yes", FAIL: "NO"}.get(status, "unchecked")
        rows.append(
            (
                str(t.get("tier")),
                str(t.get("best")),
                _stage_text(t.get("first")),
                _stage_text(t.get("confirm")),
                f"{mark}: {t.get('reason')}",
            )
        )
    return rows


def verdict_line(doc: Mapping[str, Any]) -> str:
    """One sentence: the verdict and the tiers behind it."""
    name = (doc.get("recommended") or {}).get("variant", "?")
    failed, unchecked = doc.get("failed") or [], doc.get("unchecked") or []
    if doc.get("verdict") == PASS:
        return (
            f"`{name}` keeps up with the best fixed variant at every tier, measured "
            "side by side: pass."
        )
    if doc.get("verdict") == SKIPPED:
        return f"`{name}` was not measured again: {doc.get('reason')}."
    if doc.get("verdict") == FAIL:
        return (
            f"`{name}` is significantly worse than the best fixed variant at "
            f"{', '.join(failed)}, confirmed in fresh rounds: fail."
        )
    return (
        f"`{name}` could not be checked at {', '.join(unchecked) or 'any tier'}: "
        "incomplete."
    )


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
    better = "higher" if obj.get("higher_is_better") else "lower"
    if doc.get("verdict") == SKIPPED:
        return ["## Follow-up check", "", f"**{verdict_line(doc)}**"]
    lines = [
        "## Follow-up check",
        "",
        f"**{verdict_line(doc)}**",
        "",
        f"The recommended config `{rec.get('variant')}` (from `{rec.get('from')}`, "
        f"{how}) was served beside the run's best fixed variant of each tier, in "
        f"{doc.get('rounds')} interleaved rounds, in `{FOLLOW_UP_DIR}/` (`trtbench "
        f"follow-up`). Figure: {obj.get('label')} ({obj.get('unit')}, {better} is "
        "better); ratios are recommended / best, > 1: the recommended config is "
        "better.",
        "",
        f"Criterion: {doc.get('criterion')}. False failures: "
        f"{doc.get('false_failure')}.",
        "",
        "| " + " | ".join(CHECK_HEADER) + " |",
        "|" + "---|" * len(CHECK_HEADER),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in check_rows(doc)]
    return lines
