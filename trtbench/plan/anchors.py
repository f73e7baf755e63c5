"""The planner scored against published results (``trtbench/plan/data/anchors.csv``).

Each row of the table is one published setting: model, method (with its draft, heads or
rates), GPUs, tensor parallelism, data type, concurrency, and the published figure — a
speedup over the same stack without speculation, or tokens/s per user (``1 / TPOT``) — with
its source and what had to be assumed because the source does not say (most sources publish
no acceptance rate). A published range ("2.x", ">1.5x") is kept as ``published`` ..
``published_high``.

Scoring (:func:`score`): the planner predicts each row's figure with its defaults (launch cost,
speculation machinery: ``overheads`` module doc) and as the pure roofline; the error is
``predicted / published − 1``, 0 inside a published range, else measured from its nearer end.
The ``fit`` rows are the only ones the machinery's two coefficients were fitted to
(:func:`fit_machinery`: least squares of the log errors); every figure quoted as the
planner's accuracy is over the ``holdout`` rows. ``scripts/score_planner.py`` prints the
table and writes it into docs/planner.md.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize

from trtbench.core import methods
from trtbench.core.data_files import read_csv_checked
from trtbench.core.errors import DataFileError
from trtbench.core.export import Column
from trtbench.plan.overheads import Machinery
from trtbench.plan.planner import Plan, estimate_step, speedup_at
from trtbench.plan.settings import PlanSettings, plan_inputs

ANCHORS_CSV = Path(__file__).with_name("data") / "anchors.csv"
SPEEDUP, TOKENS = "speedup", "tokens_per_s_user"
FIT, HOLDOUT = "fit", "holdout"
FIX = "fix the row in trtbench/plan/data/anchors.csv (docs/planner.md)"
MODES = (
    methods.BASELINE,
    methods.DRAFT_TARGET,
    methods.MEDUSA,
    methods.EAGLE3,
    methods.MTP,
    methods.NGRAM,
)

ANCHOR_SCHEMA: tuple[Column, ...] = (
    Column("id", "row name", kind="str"),
    Column("role", "fit (the machinery was fitted to it) | holdout", kind="str"),
    Column(
        "method", "baseline | draft_target | medusa | eagle3 | mtp | ngram", kind="str"
    ),
    Column("model", "target: a planner preset or sizes", kind="str"),
    Column("draft", "draft model (draft_target)", False, kind="str"),
    Column("gpu", "GPU preset", kind="str"),
    Column("tp", "tensor-parallel GPUs", kind="int"),
    Column("dtype", "float16 | bfloat16 | fp8", kind="str"),
    Column("concurrency", "concurrent sequences", kind="int"),
    Column("input_len", "prompt tokens", kind="int"),
    Column("output_len", "generated tokens", kind="int"),
    Column("draft_len", "drafts per step (draft_target)", False, kind="float"),
    Column(
        "acceptance",
        "alpha (draft_target), Medusa accuracy preset, or per-position rates",
        False,
        kind="str",
    ),
    Column("cuda_graphs", "1: decode as CUDA graphs, 0: eager", kind="int"),
    Column("metric", "speedup | tokens_per_s_user", kind="str"),
    Column("published", "the published figure (a range's low end)", kind="float"),
    Column("published_high", "a published range's high end", False, kind="float"),
    Column("source", "where it was published", kind="str"),
    Column("assumed", "what the source does not say and was assumed", kind="str"),
)
"""Columns of ``trtbench/plan/data/anchors.csv``."""


def read_anchors(path: Path = ANCHORS_CSV) -> pd.DataFrame:
    """The table, each row checked (method, role, metric, a positive figure, a range that
    is one).

    Raises:
        DataFileError: naming the file, the line and what is wrong.
    """
    table = read_csv_checked(path, ANCHOR_SCHEMA, fix=FIX, keys=("id",))
    for i, row in table.iterrows():
        where = f"{path}:{int(str(i)) + 2} ({row['id']})"
        high = row["published_high"]
        problems = [
            f"method {row['method']!r} is not one of {', '.join(MODES)}"
            if row["method"] not in MODES
            else "",
            f"role {row['role']!r} is not fit or holdout"
            if row["role"] not in (FIT, HOLDOUT)
            else "",
            f"metric {row['metric']!r} is not {SPEEDUP} or {TOKENS}"
            if row["metric"] not in (SPEEDUP, TOKENS)
            else "",
            "published must be > 0" if not row["published"] > 0 else "",
            "published_high is below published"
            if pd.notna(high) and high < row["published"]
            else "",
        ]
        problem = next((p for p in problems if p), "")
        if problem:
            raise DataFileError(f"{where}: {problem}; {FIX}")
    if table["id"].duplicated().any():
        raise DataFileError(f"{path}: ids repeat; {FIX}")
    return table


def anchor_settings(
    row: pd.Series, machinery: Machinery | None = None, overheads: bool = True
) -> PlanSettings:
    """The ``trtbench plan`` options that describe one row (``machinery``: the coefficients
    to use instead of the defaults; ``overheads=False``: the pure roofline)."""
    method, acceptance = row["method"], row["acceptance"]
    options: dict[str, object] = {
        "model": row["model"],
        "gpu": row["gpu"],
        "tp": int(row["tp"]),
        "dtype": row["dtype"],
        "concurrency": (int(row["concurrency"]),),
        "input_len": int(row["input_len"]),
        "output_len": int(row["output_len"]),
        "cuda_graphs": bool(row["cuda_graphs"]),
        "no_overheads": not overheads,
    }
    if machinery is not None:
        options["machinery_step_us"] = machinery.step_us
        options["machinery_sequence_us"] = machinery.sequence_us
    if method == methods.DRAFT_TARGET:
        options |= {
            "draft": row["draft"],
            "draft_len": int(row["draft_len"]),
            "alpha": float(acceptance),
        }
    elif method == methods.MEDUSA:
        options["medusa_accuracies"] = acceptance
    elif method in (methods.EAGLE3, methods.MTP, methods.NGRAM):
        options[method] = acceptance
    return PlanSettings(**options)


def predict(
    row: pd.Series, machinery: Machinery | None = None, overheads: bool = True
) -> float:
    """The planner's figure for one row: its speedup, or tokens/s per user."""
    inputs = plan_inputs(anchor_settings(row, machinery, overheads))
    batch = int(row["concurrency"])
    if row["metric"] == SPEEDUP:
        return speedup_at(inputs, row["method"], batch)
    step = estimate_step(inputs, row["method"], batch)
    return step.tokens_per_step / step.step_s


def relative_error(predicted: float, low: float, high: float | None = None) -> float:
    """``predicted / published − 1``; 0 inside ``[low, high]``, else from the nearer end."""
    if high is not None and not math.isnan(high) and low <= predicted <= high:
        return 0.0
    bound = (
        high if high is not None and not math.isnan(high) and predicted > high else low
    )
    return predicted / bound - 1.0


def score(anchors: pd.DataFrame, machinery: Machinery | None = None) -> pd.DataFrame:
    """Every row predicted with the planner's defaults and as the pure roofline.

    Returns:
        The rows' id, role, method, concurrency, metric, published, published_high,
        ``predicted``, ``error_ratio``, ``roofline_predicted``, ``roofline_error_ratio``,
        assumed and source.
    """
    rows = []
    for _, row in anchors.iterrows():
        high = row["published_high"]
        high = float(high) if pd.notna(high) else None
        with_terms = predict(row, machinery)
        roofline = predict(row, overheads=False)
        rows.append(
            {
                **{
                    k: row[k]
                    for k in (
                        "id",
                        "role",
                        "method",
                        "concurrency",
                        "metric",
                        "published",
                        "published_high",
                    )
                },
                "predicted": with_terms,
                "error_ratio": relative_error(with_terms, row["published"], high),
                "roofline_predicted": roofline,
                "roofline_error_ratio": relative_error(
                    roofline, row["published"], high
                ),
                "assumed": row["assumed"],
                "source": row["source"],
            }
        )
    return pd.DataFrame(rows)


def median_abs_error(
    scored: pd.DataFrame,
    metric: str,
    role: str | None = HOLDOUT,
    column: str = "error_ratio",
) -> float:
    """Median |error| of the rows of ``metric`` (and ``role``; None: every row); NaN if none."""
    part = scored[scored["metric"] == metric]
    if role is not None:
        part = part[part["role"] == role]
    return float(part[column].abs().median()) if len(part) else math.nan


def fit_machinery(anchors: pd.DataFrame) -> Machinery:
    """The machinery coefficients (µs per step, µs per sequence per step, both
    ≥ 0) that minimise Σ log(1 + error)² over the ``fit`` rows (L-BFGS-B from the best point
    of a coarse grid)."""
    fit = anchors[anchors["role"] == FIT]

    def loss(x: np.ndarray) -> float:
        m = Machinery(float(x[0]), float(x[1]))
        total = 0.0
        for _, row in fit.iterrows():
            high = row["published_high"]
            error = relative_error(
                predict(row, m),
                row["published"],
                float(high) if pd.notna(high) else None,
            )
            total += math.log1p(error) ** 2
        return total

    grid = [(s, t) for s in (0, 50, 100, 200, 400, 800) for t in (0, 10, 30, 100, 300)]
    start = min(grid, key=lambda x: loss(np.asarray(x, dtype=float)))
    best = optimize.minimize(
        loss,
        np.asarray(start, dtype=float),
        method="L-BFGS-B",
        bounds=[(0, 5000), (0, 1000)],
    )
    return Machinery(round(float(best.x[0]), 1), round(float(best.x[1]), 2))


def error_band(scored: pd.DataFrame, method: str, column: str = "error_ratio") -> float:
    """The speedup error band quoted beside ``method``'s predictions: the median |error|
    (``column``: the planner's, or ``roofline_error_ratio``) of its held-out speedup rows when
    it has 3 or more, else of all held-out speedup rows."""
    mine = scored[(scored["method"] == method) & (scored["role"] == HOLDOUT)]
    if (mine["metric"] == SPEEDUP).sum() >= 3:
        return median_abs_error(mine, SPEEDUP, column=column)
    return median_abs_error(scored, SPEEDUP, column=column)


def covered(anchors: pd.DataFrame, method: str, batch: int) -> bool:
    """Whether a published row of ``method`` lies within a factor 2 of concurrency ``batch``."""
    mine = anchors[anchors["method"] == method]["concurrency"].astype(float)
    return bool(((mine / 2 <= batch) & (batch <= mine * 2)).any())


def plan_uncertainty(plan: Plan) -> tuple[dict[str, float], list[str]]:
    """What ``trtbench plan`` says about its own accuracy.

    Returns:
        (mode → its speedup error band, :func:`error_band` of the table scored with the
        defaults, or of the pure roofline for a ``--no-overheads`` plan), and one note per concurrency whose recommended method has no published
        row within a factor 2 of it (the figure there is the model's alone).
    """
    anchors = read_anchors()
    scored = score(anchors)
    modes = [m for m in plan.inputs.modes if m != methods.BASELINE]
    column = "roofline_error_ratio" if plan.inputs.pure_roofline else "error_ratio"
    bands = {m: error_band(scored, m, column) for m in modes}
    notes = []
    for batch, mode in plan.recommended.items():
        if mode in modes and not covered(anchors, mode, batch):
            have = sorted(set(anchors[anchors["method"] == mode]["concurrency"]))
            rows = (
                f"its rows are at B = {', '.join(map(str, have))}"
                if have
                else "it has no row of this method"
            )
            notes.append(
                f"B={batch}: {mode} rests on a regime the table of published results does "
                f"not cover ({rows}); the figure is the model's alone"
            )
    return bands, notes
