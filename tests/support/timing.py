"""Timing figures a test measures but does not hold the code to.

A test asserts only what holds on any host (counts, orderings, causality, a bound with a
margin a saturated core keeps). The figure a quiet host should reach — a loss noticed
within a second, a TTFT within 2 ms of the server's own send stamp — is recorded here with
its target instead, and ``scripts/bench_timing.py`` runs those tests and prints each figure
beside its target. Without :data:`LOG_ENV` set, recording does nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

LOG_ENV = "TRTBENCH_TIMING_LOG"
"""Path of a JSON-lines file the figures are appended to (unset: not recorded)."""


def report_timing(figure: str, value: float, target: float, unit: str) -> None:
    """Append ``{"figure", "value", "target", "unit"}`` to the :data:`LOG_ENV` file.

    Args:
        figure: what was measured, e.g. ``"loopback: SIGKILL noticed after"``.
        value: the measured figure (a maximum or median, as ``figure`` says).
        target: what a quiet host reaches: ``value`` at most ``target`` is on target.
        unit: ``"ms"``, ``"s"``, …
    """
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = {"figure": figure, "value": float(value), "target": target, "unit": unit}
    with Path(path).open("a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
