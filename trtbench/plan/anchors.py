"""The planner scored against published results (``trtbench/plan/data/anchors.csv``).

Each row of the table is one published setting: serving stack, model, method (with its draft,
heads, rates or tree), GPUs, tensor / pipeline parallelism, data type, concurrency, and the
published figure — a speedup over the same stack without speculation, or tokens/s per user
(``1 / TPOT``) — with its source and what had to be assumed because the source does not say
(most sources publish no acceptance rate). A published range ("2.x", ">1.5x") is kept as
``published`` .. ``published_high``.

Scoring (:func:`score`): the planner predicts each row's figure with its stack's terms
(``engines``: the stack's own fitted line of ``engines.csv``, or the default) and as the pure
roofline; the error is ``predicted / published − 1``, 0 inside a published range, else
measured from its nearer end. The ``role`` column splits the rows before any fit: the terms
are fitted on ``fit`` rows only (``anchor_fit``); every accuracy figure is over the
``holdout`` rows, and their error distribution gives the bands (``bands``).
``scripts/score_planner.py`` prints the table and writes it into docs/planner.md.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pandas as pd

from trtbench.core.data_files import read_csv_checked
from trtbench.core.errors import DataFileError
from trtbench.core.export import Column
from trtbench.core.methods import METHODS
from trtbench.plan.engines import (
    DEFAULT_ENGINE,
    ENGINES,
    EngineTerms,
    engine_terms,
    read_engine_terms,
)
from trtbench.plan.inputs import CHAIN_PLAN, DRAFT_MODEL_PLAN, MEDUSA_PLAN, planner_of
from trtbench.plan.planner import PlanInputs, estimate_step, speedup_at
from trtbench.plan.settings import PlanSettings, plan_inputs

ANCHORS_CSV = Path(__file__).with_name("data") / "anchors.csv"
SPEEDUP, TOKENS = "speedup", "tokens_per_s_user"
FIT, HOLDOUT = "fit", "holdout"
FIX = "fix the row in trtbench/plan/data/anchors.csv (docs/planner.md)"
MODES = tuple(METHODS)  # every method is planned (by the arithmetic it declares)

ANCHOR_SCHEMA: tuple[Column, ...] = (
    Column("id", "row name", kind="str"),
    Column("role", "fit (the terms were fitted to it) | holdout", kind="str"),
    Column("engine", "serving stack (trtbench plan --engine)", kind="str"),
    Column("method", " | ".join(MODES), kind="str"),
    Column("model", "target: a planner preset or sizes", kind="str"),
    Column("draft", "draft model (draft_target)", False, kind="str"),
    Column("gpu", "GPU preset", kind="str"),
    Column("tp", "tensor-parallel GPUs", kind="int"),
    Column("pp", "pipeline stages", False, kind="int"),
    Column("dtype", "float16 | bfloat16 | fp8 | fp4 | int4", kind="str"),
    Column("concurrency", "concurrent sequences", kind="int"),
    Column("input_len", "prompt tokens", kind="int"),
    Column("output_len", "generated tokens", kind="int"),
    Column("draft_len", "drafts per step (draft_target)", False, kind="float"),
    Column(
        "acceptance",
        "alpha (draft_target), Medusa accuracy preset, per-position rates or E@K",
        False,
        kind="str",
    ),
    Column("tree", "EAGLE tree TOPK:TOKENS (empty: a chain)", False, kind="str"),
    Column("cuda_graphs", "1: decode as CUDA graphs, 0: eager", kind="int"),
    Column("metric", "speedup | tokens_per_s_user", kind="str"),
    Column("published", "the published figure (a range's low end)", kind="float"),
    Column("published_high", "a published range's high end", False, kind="float"),
    Column("source", "where it was published", kind="str"),
    Column("assumed", "what the source does not say and was assumed", kind="str"),
)
"""Columns of ``trtbench/plan/data/anchors.csv``."""


def _problem(row: pd.Series) -> str:
    """What is wrong with one row ('' when nothing)."""
    high, engine = row["published_high"], row["engine"]
    problems = [
        f"method {row['method']!r} is not one of {', '.join(MODES)}"
        if row["method"] not in MODES
        else "",
        f"role {row['role']!r} is not fit or holdout"
        if row["role"] not in (FIT, HOLDOUT)
        else "",
        f"engine {engine!r} is not a stack ({', '.join(ENGINES)})"
        if engine not in ENGINES or engine == DEFAULT_ENGINE
        else "",
        f"metric {row['metric']!r} is not {SPEEDUP} or {TOKENS}"
        if row["metric"] not in (SPEEDUP, TOKENS)
        else "",
        "published must be > 0" if not row["published"] > 0 else "",
        "published_high is below published"
        if pd.notna(high) and high < row["published"]
        else "",
        f"tree {row['tree']!r} is not TOPK:TOKENS"
        if pd.notna(row["tree"]) and _tree(row) is None
        else "",
    ]
    return next((p for p in problems if p), "")


def _tree(row: pd.Series) -> tuple[int, int] | None:
    """(top-k, tokens) of a row's ``tree`` (None: empty or malformed)."""
    text = row.get("tree")
    if not isinstance(text, str) or ":" not in text:
        return None
    topk, _, tokens = text.partition(":")
    return (int(topk), int(tokens)) if topk.isdigit() and tokens.isdigit() else None


def read_anchors(path: Path = ANCHORS_CSV) -> pd.DataFrame:
    """The table, each row checked (method, role, stack, metric, a positive figure, a range
    that is one, a tree that parses).

    Raises:
        DataFileError: naming the file, the line and what is wrong.
    """
    table = read_csv_checked(path, ANCHOR_SCHEMA, fix=FIX, keys=("id",))
    for i, row in table.iterrows():
        problem = _problem(row)
        if problem:
            where = f"{path}:{int(str(i)) + 2} ({row['id']})"
            raise DataFileError(f"{where}: {problem}; {FIX}")
    if table["id"].duplicated().any():
        raise DataFileError(f"{path}: ids repeat; {FIX}")
    return table


def anchor_settings(row: pd.Series, overheads: bool = True) -> PlanSettings:
    """The ``trtbench plan`` options that describe one row (``overheads=False``: the pure
    roofline)."""
    method, acceptance = row["method"], row["acceptance"]
    options: dict[str, object] = {
        "model": row["model"],
        "gpu": row["gpu"],
        "tp": int(row["tp"]),
        "pp": int(row["pp"]) if pd.notna(row.get("pp")) else 1,
        "dtype": row["dtype"],
        "concurrency": (int(row["concurrency"]),),
        "input_len": int(row["input_len"]),
        "output_len": int(row["output_len"]),
        "cuda_graphs": bool(row["cuda_graphs"]),
        "engine": row["engine"],
        "no_overheads": not overheads,
    }
    plan = planner_of(method)  # the arithmetic the method declares
    if plan == DRAFT_MODEL_PLAN:
        options |= {
            "draft": row["draft"],
            "draft_len": int(row["draft_len"]),
            "alpha": float(acceptance),
        }
    elif plan == MEDUSA_PLAN:
        options["medusa_accuracies"] = acceptance
    elif plan == CHAIN_PLAN:
        options[method] = acceptance  # its rates option (chain_kinds)
    if (tree := _tree(row)) is not None:
        options["eagle3_topk"], options["eagle3_tokens"] = tree
    return PlanSettings(**options)


def row_inputs(
    row: pd.Series,
    terms: EngineTerms | None = None,
    overheads: bool = True,
    table: dict[str, EngineTerms] | None = None,
) -> PlanInputs:
    """The planner's inputs for one row: with its stack's terms (from ``table``, else the
    shipped ``engines.csv``), ``terms`` in their place, or the pure roofline
    (``overheads=False``)."""
    inputs = plan_inputs(anchor_settings(row, overheads), table)
    if terms is None or not overheads:
        return inputs
    return with_terms(inputs, terms)


def with_terms(inputs: PlanInputs, terms: EngineTerms) -> PlanInputs:
    """``inputs`` with a stack's fitted terms (compute efficiency, machinery, kernel floor)."""
    return replace(
        inputs,
        machinery=terms.machinery,
        compute_efficiency=terms.compute_efficiency,
        serial_share=terms.serial_share,
        launch=replace(inputs.launch, kernel_us=terms.kernel_us),
    )


def figure(inputs: PlanInputs, row: pd.Series) -> float:
    """The planner's figure for one row from its inputs: speedup, or tokens/s per user."""
    batch = int(row["concurrency"])
    if row["metric"] == SPEEDUP:
        return speedup_at(inputs, row["method"], batch)
    step = estimate_step(inputs, row["method"], batch)
    return step.tokens_per_step / step.step_s


def predict(
    row: pd.Series,
    terms: EngineTerms | None = None,
    overheads: bool = True,
    table: dict[str, EngineTerms] | None = None,
) -> float:
    """The planner's figure for one row (module doc)."""
    return figure(row_inputs(row, terms, overheads, table), row)


def relative_error(predicted: float, low: float, high: float | None = None) -> float:
    """``predicted / published − 1``; 0 inside ``[low, high]``, else from the nearer end."""
    if high is not None and not math.isnan(high) and low <= predicted <= high:
        return 0.0
    bound = (
        high if high is not None and not math.isnan(high) and predicted > high else low
    )
    return predicted / bound - 1.0


def score(
    anchors: pd.DataFrame, table: dict[str, EngineTerms] | None = None
) -> pd.DataFrame:
    """Every row predicted with its stack's terms (``table``: in place of the shipped
    ``engines.csv``) and as the pure roofline.

    Returns:
        The rows' id, role, engine, method, concurrency, metric, published,
        published_high, ``predicted``, ``error_ratio``, ``roofline_predicted``,
        ``roofline_error_ratio``, assumed and source.
    """
    rows = []
    table = read_engine_terms() if table is None else table
    for _, row in anchors.iterrows():
        high = row["published_high"]
        high = float(high) if pd.notna(high) else None
        terms, _ = engine_terms(str(row["engine"]), table)
        with_overheads = predict(row, terms, table=table)
        roofline = predict(row, overheads=False, table=table)
        rows.append(
            {
                **{
                    k: row[k]
                    for k in (
                        "id",
                        "role",
                        "engine",
                        "method",
                        "concurrency",
                        "metric",
                        "published",
                        "published_high",
                    )
                },
                "predicted": with_overheads,
                "error_ratio": relative_error(with_overheads, row["published"], high),
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


def covered(anchors: pd.DataFrame, method: str, batch: int) -> bool:
    """Whether a published row of ``method`` lies within a factor 2 of concurrency ``batch``."""
    mine = anchors[anchors["method"] == method]["concurrency"].astype(float)
    return bool(((mine / 2 <= batch) & (batch <= mine * 2)).any())
