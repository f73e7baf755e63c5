"""The lines of report.md that say how a run was measured in time and what else used the host
(pure: run.json and rounds.csv in, Markdown lines out).

* Design (run.json ``design``, :mod:`trtbench.profiling.loadtest.workload.design`): which design, how
  many rounds and server starts, and what that means for every interval of the report. A run
  that recorded no design measured each variant's passes in a row (sequential).
* Interference (rounds.csv ``host_other_cpu_share``, ``interference_flag``): how many cells
  were measured while other processes took more than their share of the host, and where.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from trtbench.profiling.loadtest.records.host_load import OTHER_SHARE_LIMIT
from trtbench.profiling.loadtest.workload.design import DESIGN_TEXT, SEQUENTIAL


def design_lines(run: Mapping[str, Any], rounds: pd.DataFrame | None) -> list[str]:
    """A sentence on the run's design and one on interference (module docstring)."""
    design = run.get("design") if isinstance(run.get("design"), Mapping) else None
    if design is None:
        lines = [
            "Measurement design: not recorded (a run made before rounds), so "
            f"{DESIGN_TEXT[SEQUENTIAL].split(':', 1)[1].strip()}."
        ]
    else:
        name = str(design.get("name") or SEQUENTIAL)
        text = DESIGN_TEXT.get(name, name).split(":", 1)[-1].strip()
        co = (
            "servers co-resident"
            if design.get("co_resident")
            else "one server at a time"
        )
        lines = [
            f"Measurement design: **{name}**, {design.get('rounds')} round(s), "
            f"{design.get('server_starts', '?')} server start(s), {co}: {text}. "
            "Every interval in this report is over these rounds."
        ]
    return lines + output_length_lines(design) + interference_lines(rounds)


OUTPUT_LENGTH_TEXT = {
    "fixed": "Output lengths: **fixed** (min tokens = max tokens, as vLLM's `ignore_eos`): "
    "every variant generates each request's full length, so the figures compare like for "
    "like; acceptance also counts text past where the model would have stopped "
    '(docs/metrics.md, "Output length and acceptance").',
    "natural": "Output lengths: **natural** (`loadtest.fixed_output_len: false`): each "
    "request stops at the end token, capped at its max tokens, as served traffic does; "
    'lengths then differ by variant wherever outputs differ (docs/metrics.md, "Output '
    'length and acceptance").',
}
"""The report's sentence per ``design.output_length`` of run.json."""


def output_length_lines(design: Mapping[str, Any] | None) -> list[str]:
    """One sentence on how output lengths were set; none for runs that did not record it."""
    kind = design.get("output_length") if design else None
    return [OUTPUT_LENGTH_TEXT[kind]] if kind in OUTPUT_LENGTH_TEXT else []


def interference_lines(rounds: pd.DataFrame | None) -> list[str]:
    """One sentence: the cells measured under interference, or the most others took."""
    if rounds is None or rounds.empty or "host_other_cpu_share" not in rounds:
        return []
    share = pd.to_numeric(rounds["host_other_cpu_share"], errors="coerce")
    if share.isna().all():
        return ["Interference: not measured (no /proc on the host)."]
    flag = rounds.get("interference_flag")
    flagged = (
        rounds[flag.map(lambda v: str(v).lower() == "true")]
        if flag is not None
        else rounds.iloc[0:0]
    )
    if flagged.empty:
        return [
            f"Interference: none seen; other processes took at most {share.max():.0%} of "
            f"the host's CPU during any cell (flag above {OTHER_SHARE_LIMIT:.0%}; "
            "rounds.csv)."
        ]
    where = ", ".join(
        f"`{v}` {t}"
        for (v, t) in dict.fromkeys(
            zip(flagged["variant"], flagged["tier"], strict=True)
        )
    )
    return [
        f"**Interference: {len(flagged)} of {len(rounds)} cells were measured while other "
        f"processes took more than {OTHER_SHARE_LIMIT:.0%} of the host's CPU (up to "
        f"{share.max():.0%}) or held a GPU**: {where}. Their figures may read slow; the "
        "intervals over rounds include them (rounds.csv has each cell)."
    ]
