"""The lines of report.md that say how a run was measured in time and what else used the host
(pure: run.json and rounds.csv in, Markdown lines out).

* Design (run.json ``design``, :mod:`trtbench.profiling.loadtest.workload.design`): which design, how
  many rounds and server starts, and what that means for every interval of the report. A run
  that recorded no design measured each variant's passes in a row (sequential).
* Interference (rounds.csv ``host_other_cpu_share``, ``interference_flag``): how many cells
  were measured while other processes took more than their share of the host, and where.
  Where every (variant, tier) has such a cell, naming them says nothing: the report says so
  once (:func:`whole_run_interference`, in the Recommendation) and names none.
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
            f"Measurement design: **{name}**, {_rounds(design)}, "
            f"{_starts(design)} server start(s), {co}: {text}. "
            "Every interval in this report is over these rounds."
            + instance_text(design.get("instance"))
        ]
    return lines + output_length_lines(design) + interference_lines(rounds)


def _starts(design: Mapping[str, Any]) -> str:
    """``design.server_starts``; ``up to N`` for a race with fresh servers per block (the
    count planned before it, which may stop before its last block)."""
    starts = design.get("server_starts", "?")
    inst = design.get("instance")
    every = inst.get("restart_every") if isinstance(inst, Mapping) else None
    if (
        isinstance(design.get("stopping"), Mapping)
        and isinstance(every, int)
        and every > 1
    ):
        return f"up to {starts}"
    return str(starts)


def instance_text(instance: Any) -> str:
    """The sentence on the server-instance term of the intervals between variants (run.json
    ``design.instance``; ``profiling/loadtest/stats/decisions.py``, "Server instances");
    a run that recorded none (made before the term) is said to lack it."""
    if not isinstance(instance, Mapping) or not isinstance(
        instance.get("sd"), (int, float)
    ):
        return (
            " This run was recorded before intervals carried a server-instance term: "
            "its intervals between variants leave out how much two server processes of "
            'one variant differ (docs/aa_check.md, "Server instances"), so they are '
            "narrower than a run made now would state."
        )
    sd = float(instance["sd"])
    if sd <= 0:
        return " Intervals between variants carry no server-instance term (instance_sd: 0)."
    every = instance.get("restart_every")
    where = (
        f"fresh servers every {every} round(s) average it out"
        if isinstance(every, int) and every > 0
        else f"one set of servers: no such interval is narrower than about ±{1.96 * sd:.1%}"
    )
    return (
        f" Intervals between variants include how much two server processes of one "
        f"variant differ (instance SD {sd:.1%}); {where}."
    )


def _rounds(design: Mapping[str, Any]) -> str:
    """``5 round(s)`` (``design.rounds``); for a race (``rounds: auto``) the rounds it ran,
    its budget and why it stopped (``design.stopping``)."""
    stop = design.get("stopping")
    if not isinstance(stop, Mapping) or stop.get("rounds_run") is None:
        return f"{design.get('rounds')} round(s)"
    why = f", stopped: {stop['stopped_because']}" if stop.get("stopped_because") else ""
    minutes = stop.get("max_minutes")
    within = (
        f" or {minutes:g} min"
        if isinstance(minutes, (int, float)) and not isinstance(minutes, bool)
        else ""
    )
    budget = f"rounds: auto, up to {stop.get('max_rounds')}{within}{why}"
    return f"{stop['rounds_run']} round(s) ({budget})"


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


def _flagged(rounds: pd.DataFrame) -> pd.DataFrame:
    flag = rounds.get("interference_flag")
    if flag is None:
        return rounds.iloc[0:0]
    return rounds[flag.map(lambda v: str(v).lower() == "true")]


def _measured(rounds: pd.DataFrame | None) -> pd.Series | None:
    """The host's other-process share per cell; None: not recorded (no column, no rows)."""
    if rounds is None or rounds.empty or "host_other_cpu_share" not in rounds:
        return None
    return pd.to_numeric(rounds["host_other_cpu_share"], errors="coerce")


def whole_run_interference(rounds: pd.DataFrame | None) -> str | None:
    """The one sentence for a run where every (variant, tier) has a cell measured under
    interference; None otherwise (then :func:`interference_lines` names the cells)."""
    share = _measured(rounds)
    if share is None or rounds is None or share.isna().all():
        return None
    flagged = _flagged(rounds)
    keys = ["variant", "tier"]
    everywhere = len(flagged.groupby(keys)) == len(rounds.groupby(keys))
    if flagged.empty or not everywhere:
        return None
    who = (
        f"Every cell of this run ({len(rounds)} of {len(rounds)}: variant × tier × round)"
        if len(flagged) == len(rounds)
        else f"{len(flagged)} of this run's {len(rounds)} cells, in every (variant, tier),"
    )
    return (
        f"**{who} ran while other processes took more than {OTHER_SHARE_LIMIT:.0%} of the "
        f"host's CPU (up to {share.max():.0%}) or held a GPU**: absolute figures may read "
        "slow; each ratio pairs cells measured in the same round and its interval includes "
        "the disturbance. Re-run on a quiet machine before relying on a close margin "
        "(rounds.csv has each cell)."
    )


def interference_lines(rounds: pd.DataFrame | None) -> list[str]:
    """One sentence: the cells measured under interference, or the most others took; none
    where every (variant, tier) has such a cell (:func:`whole_run_interference` says it)."""
    share = _measured(rounds)
    if share is None or rounds is None:
        return []
    if share.isna().all():
        return ["Interference: not measured (no /proc on the host)."]
    if whole_run_interference(rounds) is not None:
        return []
    flagged = _flagged(rounds)
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
