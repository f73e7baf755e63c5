"""docs/metrics.md names only metrics and columns trtbench writes (it cannot drift from the code)."""

from __future__ import annotations

import re
from pathlib import Path

from trtbench.profiling.loadtest.files.outputs import OUTPUTS_SCHEMA
from trtbench.profiling.loadtest.files.schemas import REQUESTS_SCHEMA, SUMMARY_SCHEMA
from trtbench.profiling.loadtest.stats.acceptance import ACCEPTANCE_SCHEMA
from trtbench.profiling.loadtest.stats.metrics import METRICS

DOC = Path(__file__).resolve().parents[4] / "docs" / "metrics.md"


def first_cell_names(text: str) -> list[str]:
    """Backticked names in the first cell of every table row (templated ones skipped)."""
    names = []
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        for name in re.findall(r"`([^`]+)`", cell):
            if not any(ch in name for ch in "<…. "):
                names.append(name)
    return names


def test_every_metric_and_column_in_the_doc_exists():
    known = {m.name for m in METRICS} | {
        "position",
        "histogram",
    }  # acceptance.csv kinds
    for schema in (SUMMARY_SCHEMA, REQUESTS_SCHEMA, ACCEPTANCE_SCHEMA, OUTPUTS_SCHEMA):
        known |= {c.name for c in schema}
    names = first_cell_names(DOC.read_text(encoding="utf-8"))
    assert len(names) >= 30  # the tables were found
    missing = [n for n in names if n not in known]
    assert missing == []


def test_every_metric_is_documented():
    text = DOC.read_text(encoding="utf-8")
    undocumented = [m.name for m in METRICS if f"`{m.name}`" not in text]
    assert undocumented == []
