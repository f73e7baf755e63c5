"""``trtbench run``, ``report`` and ``collect`` end with the answer: recommendation.json's
sentence and report.md's path (then report.html's, where written) after the files they
wrote (hand-made outcomes and runs; the sentence is read from the file)."""

from __future__ import annotations

import json

import pandas as pd

from tests.support.cli import run_cli
from tests.support.report_runs import make_split_run
from trtbench.cluster.driver import ClusterOutcome
from trtbench.commands.cluster import print_cluster_outcome
from trtbench.commands.terminal import print_outcome
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.loadtest import LoadtestOutcome


def test_the_last_lines_are_the_recommendation_and_the_report(tmp_path, capsys):
    rd = RunDir(tmp_path / "run")
    rd.root.mkdir()
    report = rd.root / "report.md"
    report.write_text("# report\n")
    sentence = (
        "Serve `medusa` (Medusa) at every measured concurrency: best at 4 of 4 tiers."
    )
    (rd.root / "recommendation.json").write_text(
        json.dumps({"schema_version": 1, "answer": sentence})
    )
    print_outcome(LoadtestOutcome(pd.DataFrame(), rd, files=[report]))
    out = capsys.readouterr().out.rstrip().splitlines()
    assert out[-2:] == [f"recommendation: {sentence}", f"report: {report}"]


def test_without_a_readable_recommendation_nothing_is_claimed(tmp_path, capsys):
    rd = RunDir(tmp_path / "run")
    rd.root.mkdir()
    report = rd.root / "report.md"
    report.write_text("# report\n")
    (rd.root / "recommendation.json").write_text('{"answer": ')  # cut short
    print_outcome(LoadtestOutcome(pd.DataFrame(), rd, files=[report]))
    assert "recommendation:" not in capsys.readouterr().out


def test_what_was_written_is_one_line_and_the_follow_up_prints_no_answer(
    tmp_path, capsys
):
    rd = RunDir(tmp_path / "run")
    (rd.root / "plots").mkdir(parents=True)
    report = rd.root / "report.md"
    report.write_text("# report\n")
    plots = [rd.root / "plots" / f"{name}.png" for name in ("ttft", "tpot", "memory")]
    for plot in plots:
        plot.write_bytes(b"png")
    (rd.root / "recommendation.json").write_text(
        json.dumps({"schema_version": 1, "answer": "Serve `medusa`."})
    )
    outcome = LoadtestOutcome(pd.DataFrame(), rd, files=[report, *plots])
    # the follow-up's own stage: its table and answer are not the check's
    print_outcome(outcome, results=False)
    out = capsys.readouterr().out
    assert out == f"wrote {report}, 3 plots in {rd.root / 'plots'}/\n"


def test_report_ends_with_the_recommendation_and_the_report(tmp_path, capsys):
    """``trtbench report`` on a hand-made run: the sentence it prints last is the one it
    wrote to recommendation.json, then report.md's path (as ``trtbench run`` ends)."""
    root = make_split_run(tmp_path / "run")
    code, out, err = run_cli(["report", root], capsys)
    assert code == 0, err
    sentence = json.loads((root / "recommendation.json").read_text())["answer"]
    assert sentence.startswith("Serve `ngram`")  # tests/support/report_runs.py
    lines = out.rstrip().splitlines()
    assert lines[-3:] == [
        f"recommendation: {sentence}",
        f"report: {root / 'report.md'}",
        f"page: {root / 'report.html'}",  # written beside it
    ]
    assert f"wrote {root / 'report.md'}, {root / 'recommendation.json'}, " in out


def test_collect_ends_with_the_recommendation_and_the_report(tmp_path, capsys):
    """A gathered cluster run (``trtbench collect``): the files, then the answer last."""
    rd = RunDir(tmp_path / "run")
    report = rd.root / "report.md"
    files = (report, rd.root / "recommendation.json")
    sentence = (
        "Best per tier by output tok/s over each shard's own baseline: c1 `ngram`."
    )
    print_cluster_outcome(ClusterOutcome(rd, (), True, pd.DataFrame(), sentence, files))
    out = capsys.readouterr().out.rstrip().splitlines()
    assert out[-2:] == [f"recommendation: {sentence}", f"report: {report}"]
    assert f"wrote {files[1]}" in out
