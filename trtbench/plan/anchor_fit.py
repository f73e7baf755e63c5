"""Fit each serving stack's terms on its own ``fit`` rows of the published table.

Five terms per stack (``engines``): compute efficiency, the shortest kernel (µs), and the
machinery per pass, per verified token per sequence and per sequence per step (µs). The fit
minimises over the rows marked ``fit`` (the split is a column of ``anchors.csv``, fixed before
any fit; ``holdout`` rows never enter)::

    Σ_rows log(1 + error)²  +  λ Σ_terms ((term − prior) / scale)²

First the ``default`` line: every stack's fit rows together, the prior :data:`PRIOR` (a
compute efficiency of 0.7, no machinery, no kernel floor). Then each stack with fit rows: its
own rows, the default line as the prior — with two or three rows a stack cannot pin five
terms, and the ridge (λ = :data:`RIDGE`, scales :data:`SCALES`) keeps what its rows do not
say at the default. L-BFGS-B within :data:`BOUNDS`, from the prior. Values are rounded as
``engines.csv`` ships them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import optimize

from trtbench.plan.anchors import FIT, figure, relative_error, row_inputs, with_terms
from trtbench.plan.engines import DEFAULT_ENGINE, EngineTerms, read_engine_terms
from trtbench.plan.overheads import Machinery
from trtbench.plan.planner import PlanInputs

TERMS = (
    "compute_efficiency",
    "kernel_us",
    "pass_us",
    "token_us",
    "sequence_us",
    "serial_share",
)
PRIOR = (0.7, 0.0, 0.0, 0.0, 0.0, 0.0)
"""The default line's prior: 0.7 of the dense peak (module doc), nothing else."""
SCALES = (0.15, 2.0, 100.0, 10.0, 10.0, 0.3)
BOUNDS = (
    (0.4, 1.0),
    (0.0, 20.0),
    (0.0, 3000.0),
    (0.0, 300.0),
    (0.0, 300.0),
    (0.0, 1.0),
)
"""Compute efficiency at least 0.4: cuBLAS GEMMs of a few hundred rows reach more than that
share of the dense peak on every GPU here; the rest only non-negative and finite."""
RIDGE = 0.05
STARTS = ((0.0,), (2.0,), (5.0,))
"""Kernel floors (µs) the fit also starts from: the floor binds only above the pass's
roofline time, so from 0 alone its gradient is 0."""


def terms_from(
    engine: str, x: np.ndarray, rows: tuple[str, ...] = (), rounded: bool = True
) -> EngineTerms:
    """An :class:`EngineTerms` from the vector ``x`` (order :data:`TERMS`), rounded as
    ``engines.csv`` ships it unless ``rounded`` is False (inside the fit)."""
    ce, kernel, per_pass, token, seq, serial = (float(v) for v in x)
    if rounded:
        ce, kernel, per_pass = round(ce, 3), round(kernel, 2), round(per_pass, 1)
        token, seq, serial = round(token, 2), round(seq, 2), round(serial, 3)
    return EngineTerms(
        engine, ce, Machinery(per_pass, token, seq), kernel, rows, serial
    )


def _vector(terms: EngineTerms) -> np.ndarray:
    m = terms.machinery
    return np.array(
        [
            terms.compute_efficiency,
            terms.kernel_us,
            m.pass_us,
            m.token_us,
            m.sequence_us,
            terms.serial_share,
        ]
    )


def _fit(
    engine: str,
    prepared: list[tuple[pd.Series, PlanInputs]],
    prior: np.ndarray,
) -> EngineTerms:
    """Minimise the module doc's loss over ``prepared`` (row, inputs) pairs."""
    scales = np.array(SCALES)

    def loss(x: np.ndarray) -> float:
        terms = terms_from(engine, x, rounded=False)
        total = 0.0
        for row, inputs in prepared:
            high = row["published_high"]
            error = relative_error(
                figure(with_terms(inputs, terms), row),
                row["published"],
                float(high) if pd.notna(high) else None,
            )
            total += math.log1p(error) ** 2
        return total + RIDGE * float((((x - prior) / scales) ** 2).sum())

    starts = [np.clip(prior, *np.array(BOUNDS).T)]
    starts += [np.concatenate([starts[0][:1], k, starts[0][2:]]) for k in STARTS]
    best = min(
        (
            optimize.minimize(loss, x0, method="L-BFGS-B", bounds=BOUNDS)
            for x0 in starts
        ),
        key=lambda r: float(r.fun),
    )
    ids = tuple(str(row["id"]) for row, _ in prepared)
    return terms_from(engine, best.x, ids)


def fit_engine_terms(anchors: pd.DataFrame) -> dict[str, EngineTerms]:
    """The ``default`` line and one line per stack with fit rows (module doc)."""
    fit = anchors[anchors["role"] == FIT]
    table = read_engine_terms()
    prepared = [(row, row_inputs(row, table=table)) for _, row in fit.iterrows()]
    default = _fit(DEFAULT_ENGINE, prepared, np.array(PRIOR))
    out = {DEFAULT_ENGINE: default}
    for engine in sorted(set(fit["engine"])):
        mine = [(row, inputs) for row, inputs in prepared if row["engine"] == engine]
        out[str(engine)] = _fit(str(engine), mine, _vector(default))
    return out
