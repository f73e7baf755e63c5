"""The report's "Speculative acceptance" section, from a run directory's summary.csv and
loadtest/acceptance.csv (read back validated by ``load_run``).

Hand-worked: ``dt`` (K = 4) streams per-step counts; accepted per verify step
[2, 4, 0, 3] and [1, 3] → 6 steps, Σ accepted 13, Σ proposed 24: acceptance length
1 + 13/6 = 3.17, rate 13/24 = 0.542, position rates 5/6 = 0.833, 4/6 = 0.667, 3/6 = 0.500,
1/6 = 0.167. ``trt`` reports request totals only: a note, no position rates.
"""

from __future__ import annotations

import pytest

from tests.support.run_factory import write_build
from tests.support.streams import stream
from trtbench.core.errors import DataFileError
from trtbench.core.export import records_to_frame, write_csv
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.report import write_report
from trtbench.profiling.loadtest.files.schemas import SUMMARY_SCHEMA
from trtbench.profiling.loadtest.stats.acceptance import (
    ACCEPTANCE_SCHEMA,
    acceptance_table,
)
from trtbench.profiling.loadtest.stats.metrics import summarize


@pytest.fixture
def run_dir(tmp_path):
    streams = [
        stream("baseline", "b0", [(1, 0, 0), (1, 0, 0), (1, 0, 0)]),
        stream("dt", "d0", [(1, 0, 0), (3, 4, 2), (5, 4, 4), (1, 4, 0), (2, 4, 3)]),
        stream("dt", "d1", [(1, 0, 0), (2, 4, 1), (4, 4, 3)]),
        stream("trt", "t0", [(1, 0, 0), (3, 0, 0), (2, 0, 0)], totals=(8, 3)),
    ]
    req = records_to_frame([s[0] for s in streams])
    resp = records_to_frame([r for s in streams for r in s[1]])
    rd = RunDir(tmp_path / "run")
    write_csv(summarize(req, resp, baseline="baseline"), rd.summary_csv, SUMMARY_SCHEMA)
    write_csv(acceptance_table(req, resp), rd.acceptance_csv, ACCEPTANCE_SCHEMA)
    write_build(rd.root, "baseline", "baseline")
    write_build(rd.root, "dt", "draft_target", draft_len=4)
    write_build(rd.root, "trt", "draft_target", draft_len=4)
    return rd


def test_report_shows_position_rates_per_speculative_variant(run_dir):
    text = write_report(run_dir.root).report_path.read_text()
    section = text[text.index("## Speculative acceptance") :]
    assert "### `dt`" in section and "### `trt`" in section
    assert "### `baseline`" not in section  # nothing proposed
    assert (
        "| tier | acceptance length | draft acceptance rate | verify steps | source | j=1 | j=2 | j=3 | j=4 |"
        in section
    )
    assert (
        "| c1 | 3.17 | 0.542 | 6 | server_per_step | 0.833 | 0.667 | 0.500 | 0.167 |"
        in section
    )
    # trt: 2 verify steps (3 token responses − 1), 3 accepted: 1 + 3/2 = 2.50, 3/8 = 0.375.
    assert "| c1 | 2.50 | 0.375 | 2 | server_request_totals |" in section
    assert "`trt` c1: the server reports request totals only" in section


def test_damaged_acceptance_csv_is_refused(run_dir):
    path = run_dir.acceptance_csv
    path.write_text(
        path.read_text().replace(",position,1,6,5,", ",position,one,6,5,", 1)
    )
    with pytest.raises(DataFileError, match="acceptance.csv"):
        write_report(run_dir.root)
