"""report and compare name a bad argument before touching anything."""

from __future__ import annotations

from tests.support.cli import run_cli


def test_report_on_an_empty_folder_leaves_it_empty(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    code, _, err = run_cli(["report", folder], capsys)
    assert code == 2 and "summary.csv is missing" in err
    assert list(folder.iterdir()) == []  # no .trtbench.lock, no log


def test_compare_names_a_missing_run_before_searching_the_other(tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    (other / "profile_export.json").write_text("{not json")  # never read
    missing = tmp_path / "nonexist"
    code, _, err = run_cli(["compare", other, missing], capsys)
    assert code == 2
    assert f"{missing} does not exist" in err.strip().splitlines()[-1]
    code, _, err = run_cli(["compare", f"mine={missing}", other], capsys)
    assert code == 2 and f"{missing} does not exist" in err
