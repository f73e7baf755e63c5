"""``load_run`` and ``trtbench report`` / ``compare`` on run directories whose files were
written by the real writers and then damaged: exit 2 and one line naming the file (and the
line), never a traceback, a skipped file or a dropped row."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.support.cli import run_cli
from tests.support.run_factory import (
    summary_row,
    write_breakdown,
    write_build,
    write_repo_metadata,
    write_steps,
    write_summary,
)
from trtbench.core.errors import DataFileError
from trtbench.core.run_dir import RunDir
from trtbench.profiling.loadtest.files.schemas import SUMMARY_SCHEMA
from trtbench.profiling.memory.breakdown import MEMORY_BREAKDOWN_SCHEMA
from trtbench.profiling.report.run_data import load_run
from trtbench.profiling.traces.schemas import STEP_SCHEMA

GIB = 1024**3


def make_run(root):
    rows = [
        summary_row(v, c, tpot=t, tok_s=c * 100.0)
        for v, ts in {"baseline": (10.0, 12.0), "medusa": (5.0, 8.0)}.items()
        for c, t in zip((1, 4), ts, strict=True)
    ]
    write_summary(root, rows)
    write_build(root, "baseline", "baseline")
    write_build(root, "medusa", "medusa", choices=[[0], [0, 0], [1]])
    write_repo_metadata(root, "baseline", "baseline", streaming=True)
    write_repo_metadata(root, "medusa", "medusa", streaming=True)
    write_breakdown(
        root,
        [
            {
                "variant": "baseline",
                "mode": "baseline",
                "weight_source": "files",
                "weights_total_bytes": 16 * GIB,
                "peak_device_used_bytes": 60 * GIB,
            },
            {
                "variant": "medusa",
                "mode": "medusa",
                "weight_source": "files",
                "weights_total_bytes": 17 * GIB,
                "peak_device_used_bytes": 61 * GIB,
            },
        ],
    )
    write_steps(root, "baseline-eager", [1_400_000, 1_500_000, 1_300_000])
    RunDir(root).update_run_json("loadtest", {"medusa": {"endpoint": "stream"}})
    return root


@pytest.fixture
def run(tmp_path):
    return make_run(tmp_path / "run")


def report_error(capsys, *args) -> str:
    """The one stderr line of a ``trtbench`` command that must exit 2."""
    code, _, err = run_cli(list(args), capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("trtbench: error: "), err
    return err.removeprefix("trtbench: error: ").rstrip("\n")


def test_an_intact_run_reads_every_row(run):
    schemas = {
        "summary": SUMMARY_SCHEMA,
        "memory_breakdown": MEMORY_BREAKDOWN_SCHEMA,
        "steps": STEP_SCHEMA,
    }
    data = load_run(run, schemas)
    assert len(data.summary) == 4 and len(data.steps) == 3
    assert list(data.steps.columns) == ["trace", *(c.name for c in STEP_SCHEMA)]
    assert data.memory_breakdown["variant"].tolist() == ["baseline", "medusa"]
    pd.testing.assert_frame_equal(load_run(run).summary, data.summary)
    assert data.variants["medusa"].tree_nodes == 3
    assert data.run["schema_version"] == 1


def test_summary_truncated_names_the_line_in_report_and_compare(run, tmp_path, capsys):
    path = RunDir(run).summary_csv
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    message = report_error(capsys, "report", run)
    assert message.startswith(f"{path} line 4: ")
    assert message.endswith("or delete the file")
    good = make_run(tmp_path / "good")
    assert report_error(capsys, "compare", good, run) == message


def test_summary_without_a_required_column(run, capsys):
    path = RunDir(run).summary_csv
    pd.read_csv(path).drop(columns=["variant"]).to_csv(path, index=False)
    assert report_error(capsys, "report", run).startswith(
        f"{path} lacks the required column(s) variant; "
    )
    frame = pd.read_csv(make_run(run.parent / "b") / "loadtest/summary.csv")
    frame.drop(columns=["request_count"]).to_csv(path, index=False)
    with pytest.raises(
        DataFileError, match="lacks the required column.s. request_count"
    ):
        load_run(run, {"summary": SUMMARY_SCHEMA})


def test_summary_with_a_garbled_number(run, capsys):
    path = RunDir(run).summary_csv
    frame = pd.read_csv(path, dtype=str)
    frame.loc[2, "duration_s"] = "1.0s"
    frame.to_csv(path, index=False)
    assert report_error(capsys, "report", run).startswith(
        f"{path} line 4: column duration_s holds '1.0s', not a number; "
    )


def test_a_summary_row_without_a_variant_is_refused_not_dropped(run, capsys):
    path = RunDir(run).summary_csv
    frame = pd.read_csv(path, dtype=str)
    frame.loc[1, "variant"] = None
    frame.to_csv(path, index=False)
    assert report_error(capsys, "report", run).startswith(
        f"{path} line 3: column variant is empty; "
    )


def test_an_unknown_tier_status_is_refused(run, capsys):
    path = RunDir(run).summary_csv
    frame = pd.read_csv(path, dtype=str)
    frame.loc[1, "tier_status"] = "bogus"
    frame.to_csv(path, index=False)
    assert report_error(capsys, "report", run).startswith(
        f"{path} line 3: tier_status 'bogus' is not one of complete, partial, failed, "
        "interrupted; "
    )


def test_a_summary_without_rows_is_refused(run, capsys):
    path = RunDir(run).summary_csv
    path.write_text(path.read_text().splitlines(keepends=True)[0])
    assert report_error(capsys, "report", run).startswith(f"{path} has no rows; ")


def test_garbled_build_json(run, capsys):
    path = RunDir(run).build_json("medusa")
    path.write_text(path.read_text()[:50])
    message = report_error(capsys, "report", run)
    assert message.startswith(f"{path} line ")
    assert "not valid JSON" in message
    assert message.endswith(
        "run `trtbench build` again for this variant, or delete its engines/ folder"
    )


def test_build_json_with_wrong_types(run, capsys):
    path = RunDir(run).build_json("medusa")
    doc = json.loads(path.read_text())
    doc["medusa"]["choices"] = [[0], ["a"]]
    path.write_text(json.dumps(doc))
    assert "the Medusa choices are not lists of integers" in report_error(
        capsys, "report", run
    )
    doc["medusa"] = "three heads"
    path.write_text(json.dumps(doc))
    assert report_error(capsys, "report", run).startswith(
        f"{path}: medusa is 'three heads' (str), expected dict; "
    )


def test_repo_metadata_from_a_newer_trtbench(run, capsys):
    path = RunDir(run).repo_metadata("baseline")
    doc = json.loads(path.read_text())
    doc["schema_version"] = 99
    path.write_text(json.dumps(doc))
    assert report_error(capsys, "report", run) == (
        f"{path} has schema_version 99 but this trtbench reads up to 1; upgrade trtbench "
        "(pip install -U trtbench) or re-run with this version"
    )


def test_steps_csv_with_a_short_row(run, capsys):
    path = RunDir(run).traces_dir / "baseline-eager" / "steps.csv"
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = ",".join(lines[2].split(",")[:5]) + "\n"
    path.write_text("".join(lines))
    message = report_error(capsys, "report", run)
    assert message.startswith(f"{path} line 3: 5 fields where the header has ")
    assert "trtbench analyze" in message


def test_memory_breakdown_empty_file_is_corrupt_not_absent(run, capsys):
    path = RunDir(run).memory_breakdown_csv
    path.write_text("")
    assert report_error(capsys, "report", run).startswith(
        f"{path} is empty (no header line); "
    )


def test_run_json_with_a_wrong_section_type(run, capsys):
    rd = RunDir(run)
    doc = json.loads(rd.run_json.read_text())
    doc["loadtest"]["medusa"] = "stream"
    rd.run_json.write_text(json.dumps(doc))
    assert report_error(capsys, "report", run).startswith(
        f"{rd.run_json}: loadtest.medusa is 'stream' (str), expected dict; "
    )


@pytest.mark.parametrize(
    ("where", "column", "value", "expected"),
    [
        (
            "summary",
            "concurrency",
            "4x",
            "line 3: column concurrency holds '4x', not an integer",
        ),
        ("steps", "graph_launches", "one", "line 2: column graph_launches holds 'one'"),
    ],
)
def test_unsuffixed_columns_the_report_uses_are_typed(
    run, capsys, where, column, value, expected
):
    rd = RunDir(run)
    path = {
        "summary": rd.summary_csv,
        "steps": rd.traces_dir / "baseline-eager/steps.csv",
    }[where]
    frame = pd.read_csv(path, dtype=str)
    frame.loc[{"summary": 1, "steps": 0}[where], column] = value
    frame.to_csv(path, index=False)
    assert report_error(capsys, "report", run).startswith(f"{path} {expected}")
