"""``trtbench.core.run_dir``: files created under the user's umask, and ``run.json``'s
``schema_version`` (written, defaulted when absent, refused when newer)."""

from __future__ import annotations

import json
import os
import stat

import pandas as pd
import pytest

from tests.support.cli import run_cli
from tests.support.run_factory import summary_row, write_summary
from trtbench.core.errors import DataFileError
from trtbench.core.export import Column, write_csv
from trtbench.core.run_dir import (
    RUN_JSON_SCHEMA_VERSION,
    RunDir,
    current_umask,
    write_json_atomic,
)


@pytest.fixture
def umask():
    """Set the process umask for one test (tests run single-threaded), then restore it."""
    old = os.umask(0o022)
    os.umask(old)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("mask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)]
)
def test_written_csv_and_json_get_0666_minus_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    csv_path = write_csv(
        pd.DataFrame({"a": [1]}), tmp_path / "x.csv", (Column("a", "a"),)
    )
    json_path = tmp_path / "x.json"
    write_json_atomic(json_path, {"a": 1})
    RunDir(tmp_path / "run").update_run_json("build", {"x": 1})
    assert mode(csv_path) == expected
    assert mode(json_path) == expected
    assert mode(tmp_path / "run" / "run.json") == expected
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_current_umask_reads_proc_without_changing_it(tmp_path, umask):
    umask(0o027)
    assert current_umask() == 0o027
    assert os.umask(0o027) == 0o027  # unchanged by the read
    fake = tmp_path / "status"
    fake.write_text("Name:\tx\nUmask:\t0077\nState:\tR\n")
    assert current_umask(fake) == 0o077
    fake.write_text("Name:\tx\n")  # kernels before 4.7: no Umask line
    assert current_umask(fake) == 0o022
    assert current_umask(tmp_path / "absent") == 0o022


def test_run_json_gets_schema_version_first(tmp_path):
    rd = RunDir(tmp_path)
    rd.update_run_json("build", {"variants": {"a": {}}})
    doc = rd.update_run_json("loadtest", {"a": {"endpoint": "stream"}})
    text = json.loads(rd.run_json.read_text())
    assert list(text) == ["schema_version", "build", "loadtest"]
    assert text["schema_version"] == RUN_JSON_SCHEMA_VERSION == 1 and doc == text


def test_an_old_run_json_without_schema_version_reads_as_version_1(tmp_path):
    rd = RunDir(tmp_path)
    rd.run_json.write_text(json.dumps({"build": {"variants": {}}}))
    assert rd.read_run_json() == {"build": {"variants": {}}}
    rd.update_run_json("host", {"gpus": []})
    assert json.loads(rd.run_json.read_text())["schema_version"] == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"schema_version": 99, "build": {}}',
            "{path} has schema_version 99 but this trtbench reads up to 1; upgrade trtbench "
            "(pip install -U trtbench) or re-run with this version",
        ),
        (
            '{"schema_version": 1, "build": {"vari',
            "{path} line 1 column 33: not valid JSON",
        ),
    ],
)
def test_a_newer_or_truncated_run_json_is_refused_and_left_alone(
    tmp_path, text, message
):
    rd = RunDir(tmp_path)
    rd.run_json.write_text(text)
    with pytest.raises(DataFileError) as err:
        rd.update_run_json("loadtest", {})
    assert str(err.value).startswith(message.format(path=rd.run_json))
    assert rd.run_json.read_text() == text  # not overwritten


def test_report_on_a_run_with_a_newer_run_json_exits_2_with_one_line(tmp_path, capsys):
    write_summary(tmp_path, [summary_row("baseline", 1, tpot=10.0)])
    RunDir(tmp_path).run_json.write_text('{"schema_version": 2}')
    code, _, err = run_cli(["report", tmp_path], capsys)
    assert code == 2
    assert err == (
        f"trtbench: error: {tmp_path / 'run.json'} has schema_version 2 but this trtbench "
        "reads up to 1; upgrade trtbench (pip install -U trtbench) or re-run with this "
        "version\n"
    )
