"""The "Lossless gate" section of ``report.md`` (pure: frames in, Markdown lines out).

Per variant and tier: the share of requests whose output equals the baseline's output for
the same prompt, the first divergence index where one does not, and a visible flag on any
variant below 100 %. The columns are recomputed from ``loadtest/outputs.csv`` when it is
given (:func:`trtbench.profiling.loadtest.stats.lossless.with_lossless`), so the report always
shows what the recorded outputs say.
"""

from __future__ import annotations

import pandas as pd

from trtbench.profiling.loadtest.stats.lossless import (
    LOSSLESS_NAMES,
    STATUS_BASELINE,
    STATUS_MISMATCH,
    STATUS_OK,
    with_lossless,
)
from trtbench.profiling.report.markdown import fmt_num, fmt_text, markdown_table

FLAG = "**BELOW 100 %**"


def _percent(v: object) -> str:
    return "-" if v is None or pd.isna(v) else fmt_num(".1f")(float(v) * 100)


INTRO = (
    "Each request's output is compared with the baseline's output for the same prompt "
    "(`loadtest/outputs.csv`): under greedy decoding a speculative variant must return the "
    "baseline's tokens exactly. First divergence = 0-based index of the first output token "
    "that differs (min / median over the differing requests)."
)
TABLE = (
    ("variant", "variant", fmt_text),
    ("tier", "tier", fmt_text),
    ("lossless_compared_count", "compared", fmt_num("g")),
    ("lossless_match_count", "equal", fmt_num("g")),
    ("lossless_match_ratio", "equal %", _percent),
    ("divergence", "first divergence min / median", fmt_text),
    ("flag", "gate", fmt_text),
    ("lossless_note", "note", fmt_text),
)


def lossless_frame(
    summary: pd.DataFrame, outputs: pd.DataFrame | None, baseline: str | None
) -> pd.DataFrame:
    """The summary's variant, tier and lossless columns, recomputed from ``outputs``
    when given (else as stored in summary.csv; absent in files from before them)."""
    frame = summary if outputs is None else with_lossless(summary, outputs, baseline)
    frame = frame.copy()
    for name in LOSSLESS_NAMES:
        if name not in frame.columns:
            frame[name] = None
    return frame[["variant", "tier", *LOSSLESS_NAMES]].reset_index(drop=True)


def _divergence(row: pd.Series) -> str:
    low = row["lossless_first_divergence_min_tokens"]
    mid = row["lossless_first_divergence_median_tokens"]
    if pd.isna(low):
        return "unknown (text)" if row["lossless_status"] == STATUS_MISMATCH else "-"
    return f"{int(low)} / {float(mid):g}"


def _flag(status: object) -> str:
    if status == STATUS_MISMATCH:
        return FLAG
    return "ok" if status == STATUS_OK else fmt_text(status).replace("_", " ")


def lossless_lines(
    summary: pd.DataFrame, outputs: pd.DataFrame | None, baseline: str | None
) -> list[str]:
    """Markdown lines of the "Lossless gate" section (heading included).

    Args:
        summary: summary.csv rows (variant, tier, ...).
        outputs: outputs.csv rows (None: not recorded; the stored columns are shown).
        baseline: the run's baseline variant (None: nothing to compare with).
    """
    lines = ["## Lossless gate", ""]
    if baseline is None:
        return [*lines, "No baseline variant in this run: outputs are not compared."]
    frame = lossless_frame(summary, outputs, baseline)
    frame = frame[frame["lossless_status"].astype(str) != STATUS_BASELINE]
    if frame.empty or frame["lossless_status"].isna().all():
        return [
            *lines,
            "No outputs were recorded in this run (`loadtest/outputs.csv`).",
        ]
    frame = frame.assign(
        divergence=frame.apply(_divergence, axis=1),
        flag=frame["lossless_status"].map(_flag),
    )
    lines += [INTRO, "", markdown_table(frame, TABLE), ""]
    bad = frame[frame["lossless_status"] == STATUS_MISMATCH]
    compared = frame["lossless_compared_count"].fillna(0).sum()
    if bad.empty and compared == 0:
        lines.append(
            "No output could be compared with the baseline's (see the note column): "
            "losslessness is not shown by this run."
        )
    elif bad.empty:
        lines.append("Every compared output equals the baseline's.")
    else:
        where = ", ".join(f"`{r.variant}` {r.tier}" for r in bad.itertuples())
        lines.append(f"{FLAG}: outputs differ from the baseline's at {where}.")
    return lines
