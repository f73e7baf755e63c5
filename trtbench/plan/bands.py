"""The ± the plan prints, from the errors of held-out published rows of the same kind.

A kind is (stack, method, batch range), batch ranges :data:`BATCH_RANGES` (1, 2–15, 16 and
more). The band of a prediction is the :data:`LEVEL` quantile of |error| over the held-out
speedup rows of its kind when it has :data:`MIN_ROWS` or more; else of the first wider kind
that has — (stack, method), (stack, batch range), (method, batch range), (stack), every
held-out speedup row (:data:`WIDENING`). Its check (:func:`coverage`): each held-out row's
band computed without that row (leave one out), and the share of held-out rows whose |error|
lies inside their band — the coverage docs/planner.md reports beside the median error. A
nominal 80 % band covering far fewer rows says the errors are not alike within a kind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from trtbench.plan.anchors import HOLDOUT, SPEEDUP, covered, read_anchors, score
from trtbench.plan.inputs import drafts
from trtbench.plan.planner import Plan

LEVEL = 0.8
MIN_ROWS = 3
BATCH_RANGES = ((1, 1, "B=1"), (2, 15, "B 2-15"), (16, math.inf, "B>=16"))
WIDENING = (
    ("engine", "method", "range"),
    ("engine", "method"),
    ("engine", "range"),
    ("method", "range"),
    ("engine",),
    (),
)


def batch_range(batch: float) -> str:
    """The label of the batch range ``batch`` falls in (:data:`BATCH_RANGES`)."""
    return next(label for low, high, label in BATCH_RANGES if low <= batch <= high)


@dataclass(frozen=True)
class Band:
    """One ± band: its half-width (a ratio), the kind it was taken from and how many rows."""

    width: float
    kind: str
    rows: int


def _held_out(scored: pd.DataFrame) -> pd.DataFrame:
    rows = scored[(scored["role"] == HOLDOUT) & (scored["metric"] == SPEEDUP)].copy()
    rows["range"] = rows["concurrency"].map(batch_range)
    return rows


def band_for(
    held_out: pd.DataFrame,
    engine: str,
    method: str,
    batch: int,
    exclude: str | None = None,
    column: str = "error_ratio",
) -> Band:
    """The band of a prediction of ``method`` on ``engine`` at ``batch`` (module doc);
    ``exclude``: a row id left out (the leave-one-out check); ``held_out``: the held-out
    speedup rows with a ``range`` column (:func:`held_out_rows`)."""
    pool = held_out if exclude is None else held_out[held_out["id"] != exclude]
    want = {"engine": engine, "method": method, "range": batch_range(batch)}
    for keys in WIDENING:
        mine = pool
        for key in keys:
            mine = mine[mine[key] == want[key]]
        if len(mine) >= MIN_ROWS or not keys:
            kind = ", ".join(str(want[k]) for k in keys) or "every held-out row"
            width = float(mine[column].abs().quantile(LEVEL)) if len(mine) else math.nan
            return Band(width, kind, len(mine))
    raise AssertionError("the last widening has no keys")  # pragma: no cover


def held_out_rows(scored: pd.DataFrame) -> pd.DataFrame:
    """The held-out speedup rows of a scored table, with their batch ``range``."""
    return _held_out(scored)


def coverage(scored: pd.DataFrame, column: str = "error_ratio") -> pd.DataFrame:
    """Each held-out speedup row with its leave-one-out ``band``, its ``band_kind`` and
    whether its |error| lies inside (``inside``)."""
    rows = _held_out(scored)
    bands = [
        band_for(rows, r["engine"], r["method"], int(r["concurrency"]), r["id"], column)
        for _, r in rows.iterrows()
    ]
    rows["band"] = [b.width for b in bands]
    rows["band_kind"] = [b.kind for b in bands]
    rows["inside"] = rows[column].abs() <= rows["band"]
    return rows


def plan_uncertainty(
    plan: Plan,
) -> tuple[dict[tuple[str, int], Band], list[str]]:
    """What ``trtbench plan`` says about its own accuracy.

    Returns:
        ((mode, B) → its band: the module doc's, over the table scored with the shipped
        terms, or as the pure roofline for a ``--no-overheads`` plan), and one note per
        concurrency whose recommended method has no published row within a factor 2 of it.
    """
    anchors = read_anchors()
    column = "roofline_error_ratio" if plan.inputs.pure_roofline else "error_ratio"
    rows = _held_out(score(anchors))
    engine = plan.inputs.engine
    bands = {
        (r.mode, r.concurrency): band_for(
            rows, engine, r.mode, r.concurrency, None, column
        )
        for r in plan.rows
        if drafts(r.mode)
    }
    notes = []
    for batch, mode in plan.recommended.items():
        if (
            mode in plan.inputs.modes
            and drafts(mode)
            and not covered(anchors, mode, batch)
        ):
            have = sorted(set(anchors[anchors["method"] == mode]["concurrency"]))
            rows_text = (
                f"its rows are at B = {', '.join(map(str, have))}"
                if have
                else "it has no row of this method"
            )
            notes.append(
                f"B={batch}: {mode} rests on a regime the table of published results does "
                f"not cover ({rows_text}); the figure is the model's alone"
            )
    return bands, notes
