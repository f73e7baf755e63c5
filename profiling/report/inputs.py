"""The schemas of the CSVs a report reads back, by the names ``trtbench.profiling.report.run_data.load_run``
takes (the core cannot import them itself)."""

from __future__ import annotations

from trtbench.core.export import Schema
from trtbench.profiling.loadtest.files.outputs import OUTPUTS_SCHEMA
from trtbench.profiling.loadtest.files.rounds_table import ROUNDS_SCHEMA
from trtbench.profiling.loadtest.files.schemas import SUMMARY_SCHEMA
from trtbench.profiling.loadtest.stats.acceptance import ACCEPTANCE_SCHEMA
from trtbench.profiling.loadtest.stats.categories import (
    CATEGORY_ACCEPTANCE_SCHEMA,
    CATEGORY_SCHEMA,
)
from trtbench.profiling.memory.breakdown import MEMORY_BREAKDOWN_SCHEMA
from trtbench.profiling.traces.schemas import STEP_SCHEMA

RUN_CSV_SCHEMAS: dict[str, Schema] = {
    "summary": SUMMARY_SCHEMA,
    "memory_breakdown": MEMORY_BREAKDOWN_SCHEMA,
    "steps": STEP_SCHEMA,
    "acceptance": ACCEPTANCE_SCHEMA,
    "outputs": OUTPUTS_SCHEMA,
    "rounds": ROUNDS_SCHEMA,
    "categories": CATEGORY_SCHEMA,
    "category_acceptance": CATEGORY_ACCEPTANCE_SCHEMA,
}
