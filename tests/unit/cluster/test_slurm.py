"""Slurm's command line: the parsers on output in Slurm's documented formats, the state
words, the option checks, and the batch script run by bash with a stand-in command."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from trtbench.cluster.slurm import (
    SlurmOptions,
    TaskState,
    check_options,
    job_script,
    parse_parsable,
    parse_scontrol,
    parse_squeue,
    phase_of,
    task_ids,
)
from trtbench.core.errors import ConfigError, NotAvailableError


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        ("PENDING", "pending"),
        ("RUNNING", "running"),
        ("COMPLETING", "running"),
        ("COMPLETED", "done"),
        ("FAILED", "failed"),
        ("CANCELLED", "failed"),
        ("CANCELLED+", "failed"),
        ("TIMEOUT", "failed"),
        ("NODE_FAIL", "failed"),
        ("OUT_OF_MEMORY", "failed"),
        ("UNKNOWN", "failed"),
        ("FAILED (exit 3)", "failed"),
    ],
)
def test_phase_of(state, phase):
    assert phase_of(state) == phase


def test_parsable_job_ids():
    assert parse_parsable("1234\n") == "1234"
    assert parse_parsable("1234;cluster-a\n") == "1234"
    with pytest.raises(NotAvailableError):
        parse_parsable("Submitted batch job 1234\n")


def test_task_ids_of_array_ranges():
    assert task_ids("3") == [3]
    assert task_ids("0-2,5%2") == [0, 1, 2, 5]
    assert task_ids("N/A") == []


def test_squeue_lines():
    text = "17_0|RUNNING|vm|vm\n17_1|PENDING|Resources|\n18|RUNNING|vm|vm\n"
    assert parse_squeue(text) == [
        TaskState("17", 0, "RUNNING", "vm", "", "vm"),
        TaskState("17", 1, "PENDING", "Resources", "", ""),
    ]


def test_scontrol_lines():
    # Two lines as `scontrol show job -o 12` printed them on Slurm 22.05 (shortened).
    text = (
        "JobId=13 ArrayJobId=12 ArrayTaskId=1 JobName=x JobState=FAILED Reason=NonZeroExitCode "
        "ExitCode=1:0 NodeList=node7 Command=/a b\n"
        "JobId=12 ArrayJobId=12 ArrayTaskId=2-3 JobName=x JobState=CANCELLED Reason=None "
        "ExitCode=0:0 NodeList=(null)\n"
    )
    assert parse_scontrol(text) == [
        TaskState("12", 1, "FAILED", "NonZeroExitCode", "1:0", "node7"),
        TaskState("12", 2, "CANCELLED", "", "0:0", ""),
        TaskState("12", 3, "CANCELLED", "", "0:0", ""),
    ]


@pytest.mark.parametrize(
    "time", ["30", "30:00", "2:00:00", "1-0", "1-12:30", "1-0:0:0"]
)
def test_slurm_times_pass(time, monkeypatch, tmp_path):
    _fake_commands(monkeypatch, tmp_path)
    check_options(SlurmOptions(time=time))


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (SlurmOptions(time="2h"), "not a Slurm time"),
        (SlurmOptions(gpus=0), "--slurm-gpus is 0"),
        (SlurmOptions(max_running=0), "--max-running-shards is 0"),
        (SlurmOptions(poll_s=0), "--poll-s"),
        (SlurmOptions(container_mounts="/a:/a"), "needs --container-image"),
    ],
)
def test_bad_options_are_refused(options, needle, monkeypatch, tmp_path):
    _fake_commands(monkeypatch, tmp_path)
    with pytest.raises(ConfigError, match=needle):
        check_options(options)


def test_missing_slurm_commands_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NotAvailableError, match="sbatch, squeue, scontrol, scancel"):
        check_options(SlurmOptions())


def _fake_commands(monkeypatch, tmp_path: Path) -> None:
    for name in ("sbatch", "squeue", "scontrol", "scancel"):
        path = tmp_path / name
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")


def test_the_script_runs_the_task_s_shard_and_records_where(tmp_path):
    """bash runs the script as Slurm would for task 1: the stand-in command sees shard
    s1's arguments and --out; host.txt and exit_code are written."""
    stand_in = tmp_path / "trtbench"
    stand_in.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/argv.txt"\nexit 3\n')
    stand_in.chmod(0o755)
    options = SlurmOptions(partition="gpu", time="1:00:00", gpus=8)
    text = job_script(
        "trtbench-x",
        [
            (0, ["--variant", "base", "--variant", "dt"]),
            (1, ["--variant", "base", "--variant", "m d"]),
        ],
        [str(stand_in), "run", "/s/spec.yaml"],
        tmp_path / "shards",
        options,
    )
    assert "#SBATCH --partition=gpu" in text and "#SBATCH --gpus=8" in text
    assert "#SBATCH --time=1:00:00" in text
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    env = {
        **os.environ,
        "SLURM_ARRAY_TASK_ID": "1",
        "SLURM_ARRAY_JOB_ID": "40",
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 3
    shard = tmp_path / "shards" / "s1"
    assert (tmp_path / "argv.txt").read_text().split("\n")[0] == (
        f"run /s/spec.yaml --variant base --variant m d --out {shard}"
    )
    assert (shard / "exit_code").read_text().strip() == "3"
    host = dict(
        line.split("=", 1) for line in (shard / "host.txt").read_text().splitlines()
    )
    assert host["job"] == "40_1" and host["container_image"] == "" and host["host"]


def test_with_an_image_the_shard_runs_under_pyxis():
    text = job_script(
        "j",
        [(0, ["--variant", "b"])],
        ["trtbench", "run", "/s/spec.yaml"],
        Path("/shared/run/shards"),
        SlurmOptions(
            container_image="nvcr.io#nvidia/x:1", container_mounts="/shared:/shared"
        ),
    )
    assert (
        "srun --ntasks=1 --container-image='nvcr.io#nvidia/x:1' "
        "--container-mounts=/shared:/shared trtbench run /s/spec.yaml" in text
    )


def test_sbatch_without_a_controller_is_one_line_and_leaves_no_cluster_folder(
    monkeypatch, tmp_path
):
    # sbatch installed, no controller: a stand-in for sbatch (no controller can be made
    # unreachable here on purpose) answering with several error lines on stderr and exit
    # 1, the shape of sbatch's answer; nothing else of Slurm is asked
    from trtbench.cluster.driver import run_on_slurm
    from trtbench.core.run_dir import RunDir
    from trtbench.spec.bench import parse_spec

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_commands(monkeypatch, bin_dir)
    (bin_dir / "sbatch").write_text(
        "#!/bin/sh\n"
        "echo 'sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error' >&2\n"
        "echo 'sbatch: error: fetch_config: DNS SRV lookup failed' >&2\n"
        "echo 'sbatch: error: _establish_config_source: failed to fetch config' >&2\n"
        "echo 'sbatch: fatal: Could not establish a configuration source' >&2\n"
        "exit 1\n"
    )
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(
        "models: {target: /m/target}\n"
        "variants: [{name: base, mode: baseline}, {name: ng, mode: ngram}]\n"
    )
    rd = RunDir(tmp_path / "run")
    options = SlurmOptions(container_image="nvcr.io#nvidia/x:1")  # no local preflight
    with pytest.raises(NotAvailableError) as err:
        run_on_slurm(
            parse_spec(spec_path.read_text()),
            spec_path,
            rd,
            (),
            options,
            say=lambda s: None,
        )
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(
        "sbatch refused the shards: sbatch: fatal: Could not establish a configuration "
        "source; check that a Slurm controller is reachable (`sinfo`)"
    )
    assert not (rd.root / "cluster").exists()  # `collect` will not find a half run
