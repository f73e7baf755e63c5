"""rounds.csv read back against the rest of the run: the pairs of every comparison come
from rounds.csv, so a file that lost rows (cut at a line boundary) or gained some would
change the answer without a word.

* Every (variant, tier) has at least as many rows as summary.csv counts measured rounds for
  it (``repeats_count``: passes with a measured request; rounds.csv has a row for each pass,
  measured or not).
* No row with a measured request of a variant that ``run.json`` ``design.order`` plans
  names a cell the order does not list (variants outside the order, added later by ``trtbench loadtest --out RUN``, are
  not checked).
* No cell (round, tier, variant) has two rows, and every cell where a request succeeded
  has a finite, positive ``output_tokens_per_s`` (the figure the comparisons pair): a lost
  or edited figure would silently drop its round and leave fewer pairs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trtbench.core.errors import DataFileError

FIX = "re-run `trtbench run` into this run directory, or restore the file"


def _extra_cells(rounds: pd.DataFrame, order: Any) -> list[tuple[int, str, str]]:
    """Rows of ordered variants whose (round, tier, variant) the order lacks."""
    if not isinstance(order, list) or not order:
        return []
    try:
        planned = {(int(r), str(t), str(v)) for r, t, v in order}
    except (TypeError, ValueError):
        return []  # not an order this trtbench wrote: nothing to hold the file to
    ordered = {v for _, _, v in planned}
    # a pass without a measured request has a row of its own (request_count 0) whether
    # or not its cell ran (a race's tier settled before the round): not a claim
    count = pd.to_numeric(rounds.get("request_count", 1), errors="coerce")
    measured = rounds[pd.Series(count, index=rounds.index).fillna(0) > 0]
    have = {
        (int(r), str(t), str(v))
        for r, t, v in measured[["round", "tier", "variant"]].itertuples(index=False)
    }
    return sorted(c for c in have - planned if c[2] in ordered)


def _check_cells(rounds: pd.DataFrame, path: Path) -> None:
    """One row per cell, and a usable figure wherever a request succeeded (module doc);
    lines are counted as the file's (header = line 1)."""
    keys = ["round", "tier", "variant"]
    twice = rounds.duplicated(keys, keep="first")
    if twice.any():
        i = int(twice.to_numpy().nonzero()[0][0])
        r, t, v = rounds.iloc[i][keys]
        raise DataFileError(
            f"{path}:{i + 2}: round {r} {t} {v} has a second row: each cell is measured "
            f"once; {FIX}"
        )
    figure = pd.to_numeric(rounds["output_tokens_per_s"], errors="coerce")
    served = pd.to_numeric(rounds["request_count"], errors="coerce").fillna(0) > (
        pd.to_numeric(rounds["error_count"], errors="coerce").fillna(0)
    )
    bad = (figure < 0) | np.isinf(figure) | (served & ~(figure > 0))
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        raise DataFileError(
            f"{path}:{i + 2}: column output_tokens_per_s holds {rounds.iloc[i]['output_tokens_per_s']!r} "
            f"for a cell where requests succeeded (round {rounds.iloc[i]['round']} "
            f"{rounds.iloc[i]['tier']} {rounds.iloc[i]['variant']}); it must be a finite "
            f"positive number; {FIX}"
        )


def check_rounds(
    rounds: pd.DataFrame | None,
    summary: pd.DataFrame,
    run: Mapping[str, Any],
    path: Path,
) -> None:
    """Refuse a rounds.csv that does not hold the rounds the run measured (module doc).

    Args:
        rounds: rounds.csv as read (None: absent, nothing to check).
        summary: summary.csv as read (``variant``, ``tier``, ``repeats_count``).
        run: run.json as read (``design.order``: ``[[round, tier, variant], …]``).
        path: rounds.csv, for the message.

    Raises:
        DataFileError: a (variant, tier) with fewer rows than its measured rounds, a row
            of an ordered variant the order does not list, a cell with two rows, or a
            missing or unusable figure where requests succeeded; the message names the
            first (its line where it has one), and the fix.
    """
    if rounds is None:
        return
    _check_cells(rounds, path)
    design = run.get("design") if isinstance(run, Mapping) else None
    extra = _extra_cells(
        rounds, design.get("order") if isinstance(design, Mapping) else None
    )
    if extra:
        r, t, v = extra[0]
        raise DataFileError(
            f"{path}: {len(extra)} row(s) name a cell run.json design.order does not "
            f"list (first: round {r} {t} {v}); {FIX}"
        )
    if "repeats_count" not in summary:
        return
    rows = rounds.groupby(["variant", "tier"]).size()
    counts = pd.to_numeric(summary["repeats_count"], errors="coerce")
    for (variant, tier), n in zip(
        summary[["variant", "tier"]].astype(str).itertuples(index=False),
        counts,
        strict=True,
    ):
        k = int(rows.get((variant, tier), 0))
        if pd.notna(n) and k < n:
            raise DataFileError(
                f"{path}: {k} row(s) of {variant} {tier}, but summary.csv counts {n:g} "
                f"measured rounds of it: the file was cut or edited; {FIX}"
            )
