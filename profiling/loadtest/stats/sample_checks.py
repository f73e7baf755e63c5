"""Checks a reader needs before trusting a tier's figures (pure): enough samples under each
tail percentile, and where the output token counts came from.

* ``<metric>_p99_n_ok``: the metric has at least 100 samples at the tier (a p99 of fewer
  rests on one or two values); ``<metric>_p95_n_ok``: at least 20. The thresholds are the
  smallest n for which the percentile has at least one sample beyond it (1 / (1 − q)).
* ``output_token_source`` per tier: ``output_ids`` (the server's token ids), ``retokenized``
  (text re-encoded with the tokenizer) or ``mixed``. Re-encoding text is not the same as
  counting generated tokens: with a byte-level BPE, 15 generated single-space tokens decode
  to 15 spaces, which re-encode as 1 token.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from trtbench.core.records import TOKEN_SOURCE_RETOKENIZED
from trtbench.profiling.loadtest.stats.metrics import METRICS, Metric

MIN_SAMPLES = {"p99": 100, "p95": 20}
"""Samples a percentile needs before the summary calls it sound."""
MIXED = "mixed"


def n_ok_column(metric: Metric, stat: str) -> str:
    """``<metric>_<p99|p95>_n_ok``."""
    return f"{metric.name}_{stat}_n_ok"


def n_ok_flags(
    summary: pd.DataFrame, metrics: Iterable[Metric] = METRICS
) -> pd.DataFrame:
    """The ``*_p99_n_ok`` / ``*_p95_n_ok`` columns of ``summary`` (same index).

    A metric's sample count is its ``<metric>_count`` column (missing or empty: 0).
    """
    out = {}
    for m in metrics:
        col = f"{m.name}_count"
        n = (
            pd.to_numeric(summary[col], errors="coerce").fillna(0)
            if col in summary
            else pd.Series(0, index=summary.index)
        )
        for stat, least in MIN_SAMPLES.items():
            out[n_ok_column(m, stat)] = (n >= least).astype(bool)
    return pd.DataFrame(out, index=summary.index)


def token_sources(requests: pd.DataFrame) -> pd.DataFrame:
    """Per (variant, tier): ``output_token_source`` and ``retokenized_count``.

    Only requests with a source count (a failed request without output has none); a tier
    whose requests disagree is ``mixed``.
    """
    cols = ["variant", "tier", "output_token_source", "retokenized_count"]
    if requests.empty or "output_token_source" not in requests:
        return pd.DataFrame(columns=cols)
    src = requests["output_token_source"].fillna("").astype(str)
    rows = []
    for (variant, tier), s in src.groupby(
        [requests["variant"], requests["tier"]], sort=False
    ):
        known = sorted(set(s) - {""})
        rows.append(
            {
                "variant": variant,
                "tier": tier,
                "output_token_source": known[0]
                if len(known) == 1
                else (MIXED if known else ""),
                "retokenized_count": int((s == TOKEN_SOURCE_RETOKENIZED).sum()),
            }
        )
    return pd.DataFrame(rows, columns=cols)


def retokenized_warnings(sources: pd.DataFrame) -> list[str]:
    """One line per tier where any request's tokens were re-counted from text."""
    return [
        f"{r.variant} {r.tier}: {r.retokenized_count} requests had their output tokens "
        "counted by re-tokenizing text (no output_ids): OSL, TPOT and tok/s are "
        "approximate, since re-encoding is not counting what was generated (for example, "
        "15 generated single-space tokens re-encode as 1 with a byte-level BPE)"
        for r in sources.itertuples()
        if r.retokenized_count > 0
    ]
