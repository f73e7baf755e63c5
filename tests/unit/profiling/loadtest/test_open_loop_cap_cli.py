"""``--max-concurrency`` and its bad combinations: exit 2, one line, before connecting.

Nothing listens at ``--url``, so an error about the options proves it came first.
"""

from __future__ import annotations

import pytest

from tests.support.cli import run_cli
from trtbench.core.errors import ConfigError
from trtbench.pipeline.loadtest import tiers_of
from trtbench.spec.bench import parse_spec
from trtbench.triton_repo.ports import free_port

BASE = "models: {target: /m}\nvariants: [{name: b, mode: baseline}]\n"


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (
            ["--max-concurrency", "2"],
            ["--max-concurrency caps an open loop", "--request-rate"],
        ),
        (
            ["--concurrency", "4", "--max-concurrency", "2"],
            ["--max-concurrency caps an open loop"],
        ),
        (
            ["--request-rate", "2", "--concurrency", "4"],
            ["--concurrency cannot go with --request-rate", "use --max-concurrency"],
        ),
        (
            ["--request-rate", "2", "--max-concurrency", "0"],
            ["--max-concurrency", "greater than or equal to 1"],
        ),
    ],
)
def test_bad_cap_options_exit_2_in_one_line(capsys, tmp_path, args, needles):
    out = tmp_path / "out"
    code, _, err = run_cli(
        ["loadtest", "--url", f"127.0.0.1:{free_port()}", "--out", out, *args], capsys
    )
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trtbench: error: "), err
    assert all(n in lines[0] for n in needles), lines[0]
    assert "cannot reach" not in err
    assert not (out / "loadtest").exists()


@pytest.mark.parametrize(
    ("loadtest", "needle"),
    [
        ("{max_concurrency: 2}", "max_concurrency caps an open loop"),
        ("{request_rate: [1], concurrency: [2]}", "use max_concurrency"),
        ("{request_rate: [1], max_concurrency: 0}", "max_concurrency"),
    ],
)
def test_bad_cap_in_a_spec_names_the_field(loadtest, needle):
    with pytest.raises(ConfigError, match=needle) as info:
        parse_spec(BASE + f"loadtest: {loadtest}\n", "s.yaml")
    assert str(info.value).startswith("s.yaml: ")
    assert "\n" not in str(info.value)


def test_a_capped_rate_keeps_its_label_and_carries_the_cap():
    spec = parse_spec(
        BASE + "loadtest: {request_rate: [2.5, 4], max_concurrency: 3}\n", "s.yaml"
    )
    tiers = tiers_of(spec.loadtest)
    assert [(t.label, t.max_concurrency) for t in tiers] == [("r2.5", 3), ("r4", 3)]
    # the default concurrency list beside request_rate is not "set by the user"
    assert parse_spec(BASE + "loadtest: {request_rate: [1]}\n").loadtest.request_rate
