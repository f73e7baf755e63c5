"""``--repeats`` and ``--exclude-first-s`` bad input: exit 2 and one line naming the option,
before connecting (nothing listens at --url, so an error about the input came first)."""

from __future__ import annotations

import pytest

from tests.support.cli import run_cli
from trtbench.triton_repo.ports import free_port


def bad_input(capsys, tmp_path, *args: str) -> str:
    url = f"127.0.0.1:{free_port()}"
    code, _, err = run_cli(
        ["loadtest", "--url", url, "--out", tmp_path / "o", *args], capsys
    )
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "cannot reach" not in err  # refused before any connection
    return lines[0]


@pytest.mark.parametrize("value", ["0", "-3"])
def test_repeats_below_one(capsys, tmp_path, value):
    line = bad_input(capsys, tmp_path, "--repeats", value)
    assert "--repeats" in line and "greater than or equal to 1" in line


def test_negative_exclude_first_s_names_its_option(capsys, tmp_path):
    line = bad_input(capsys, tmp_path, "--exclude-first-s", "-1")
    assert line.count("--exclude-first-s") == 1 and "--warmup-s" not in line


@pytest.mark.parametrize("seconds", ["5", "2"])
def test_window_not_shorter_than_the_tier_duration(capsys, tmp_path, seconds):
    line = bad_input(
        capsys, tmp_path, "--duration-s", "2", "--exclude-first-s", seconds
    )
    assert f"--exclude-first-s {seconds} leaves nothing of a 2 s tier" in line


def test_spec_window_is_checked_for_trtbench_run_too():
    from trtbench.core.errors import ConfigError
    from trtbench.pipeline.preflight import check_window
    from trtbench.spec.bench import LoadtestSpec

    check_window(LoadtestSpec(duration_s=3.0, warmup_s=2.5), "loadtest.warmup_s")
    check_window(LoadtestSpec(requests_per_tier=4, warmup_s=60.0))  # known only later
    with pytest.raises(
        ConfigError, match=r"^loadtest.warmup_s 3 leaves nothing of a 3 s"
    ):
        check_window(LoadtestSpec(duration_s=3.0, warmup_s=3.0), "loadtest.warmup_s")
