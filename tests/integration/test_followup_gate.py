"""``trtbench follow-up`` as a gate: a real follow-up run (tritonserver, tiny models) against
a hand-made original whose best fixed variants claim 1000 times the tiny models' throughput
(``tests/support/followup_runs.py`` scaled by 1000: ngram 150,000 tok/s [140,000, 160,000]
at c1, baseline 150,000 [140,000, 160,000] at c2). The recommended config (ngram K=4,
``max_concurrency: 1``, ``draft_len_schedule: {1: 2}``) serves a few hundred tok/s on two
cores, so the upper end of its interval stays below 140,000 at both tiers: the check fails
at c1 and c2 and the command exits 1 naming them.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.support.cli import run_cli
from tests.support.followup_runs import make_run

pytestmark = pytest.mark.integration


def test_a_significantly_worse_config_fails_the_gate(tmp_path, tiny_models, capsys):
    run = make_run(tmp_path / "run", tiny_models, scale=1000.0)
    capsys.readouterr()  # the report's own warnings
    code, out, err = run_cli(["follow-up", run], capsys)
    assert code == 1, err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            "trtbench: error: follow-up check failed at c1, c2: the recommended config is "
            "significantly worse than the best fixed variant"
        )
    )
    check = json.loads((run / "follow-up" / "check.json").read_text())
    assert (check["verdict"], check["failed"]) == ("fail", ["c1", "c2"])
    for t in check["tiers"]:  # the criterion, read off the numbers in the file
        assert t["recommended"]["high"] < t["best_estimate"]["low"] == 140_000
        assert t["recommended"]["passes"] == 3
    assert check["recommended"]["speculation"] == {
        "max_concurrency": 1,
        "draft_len_schedule": {"1": 2},
    }
    # the engine honoured the schedule: at most 2 drafts per step
    acc = pd.read_csv(run / "follow-up" / "loadtest" / "acceptance.csv")
    assert acc[acc["kind"] == "position"]["draft_position"].max() <= 2
    text = (run / "report.md").read_text()
    assert "## Follow-up check" in text
    assert "significantly worse than the best fixed variant at c1, c2: fail" in text
    assert "follow-up check" in out and " NO " in out  # the terminal table
