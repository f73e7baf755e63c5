"""The command line of a cluster run: options refused where they mean nothing, collect on a
directory that holds no cluster run."""

from __future__ import annotations

from tests.support.cli import run_cli
from trtbench.cluster.driver import shard_command
from trtbench.cluster.slurm import SlurmOptions
from trtbench.commands.cluster import SLURM_KEYS, with_spec_cluster
from trtbench.spec.cluster import ClusterSpec


def test_slurm_options_need_the_slurm_executor(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: x\nbackend: reference\nmodels: {target: /nonexistent}\n"
        "variants: [{name: base, mode: baseline}]\n"
    )
    code, _, err = run_cli(
        ["run", spec, "--slurm-partition", "gpu", "--no-wait"], capsys
    )
    assert code == 2
    assert "--slurm-partition, --no-wait need --executor slurm" in err
    assert not (tmp_path / "runs").exists()


def test_collect_refuses_a_directory_without_a_cluster_run(tmp_path, capsys):
    code, _, err = run_cli(["collect", tmp_path], capsys)
    assert code == 2
    assert f"{tmp_path} holds no cluster run (no cluster/state.json)" in err


def test_run_help_lists_the_cluster_options(capsys):
    code, out, _ = run_cli(["run", "--help"], capsys)
    assert code == 0
    for flag in (
        "--executor",
        "--container-image",
        "--variants-per-shard",
        "--no-wait",
    ):
        assert flag in out


def _spec(tmp_path, cluster: str) -> object:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: x\nbackend: reference\nmodels: {target: /nonexistent}\n"
        "variants: [{name: a, mode: baseline}, {name: b, mode: baseline}]\n" + cluster
    )
    return spec


def test_the_spec_can_choose_the_slurm_executor(tmp_path, capsys):
    """cluster: {executor: slurm} takes the Slurm path without the flag: there a spec
    with no baseline among the variants run is refused (the local path has no such
    rule), and nothing is written."""
    spec = _spec(tmp_path, "cluster: {executor: slurm}\n")
    code, _, err = run_cli(["run", spec, "--variant", "a"], capsys)
    assert code == 2
    assert "--executor slurm needs a variant with mode: baseline" not in err
    spec.write_text(
        spec.read_text().replace("{name: b, mode: baseline}", "{name: b, mode: ngram}")
    )
    code, _, err = run_cli(["run", spec, "--variant", "b"], capsys)
    assert code == 2
    assert "--executor slurm needs a variant with mode: baseline" in err
    assert not (tmp_path / "runs").exists()


def test_command_line_options_win_over_the_spec_cluster_section():
    cluster = ClusterSpec(
        executor="slurm", partition="gpu", gpus=8, sbatch_args=("--qos=high",)
    )
    given = {k: None for k in SLURM_KEYS} | {
        "sbatch_args": (),
        "no_wait": False,
        "slurm_partition": "debug",
    }
    options = with_spec_cluster(cluster, given)
    assert options["slurm_partition"] == "debug"  # given: the command line's
    assert options["slurm_gpus"] == 8  # not given: the spec's
    assert options["sbatch_args"] == ("--qos=high",)
    assert options["variants_per_shard"] == 1 and options["poll_s"] == 10.0


def test_a_bad_cluster_section_names_its_field(tmp_path, capsys):
    for cluster, field in (
        ("cluster: {executor: pbs}\n", "cluster.executor"),
        ("cluster: {variants_per_shard: 0}\n", "cluster.variants_per_shard"),
        ("cluster: {partitoin: gpu}\n", "cluster.partitoin"),
    ):
        code, _, err = run_cli(["run", _spec(tmp_path, cluster)], capsys)
        assert code == 2
        assert field in err


def test_a_shard_runs_locally_whatever_the_spec_says(tmp_path):
    """A spec with cluster: {executor: slurm} must not make each shard submit again."""
    argv = shard_command(tmp_path / "spec.yaml", SlurmOptions(), ["trtbench"])
    assert argv == [
        "trtbench",
        "run",
        str(tmp_path / "spec.yaml"),
        "--executor",
        "local",
    ]


def test_report_refuses_a_merged_cluster_run(tmp_path, capsys):
    """A fresh user's trtbench report on a merged cluster run compared shards across
    nodes against one shard's baseline and overwrote the cluster's recommendation."""
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "state.json").write_text("{}")
    (tmp_path / "report.md").write_text("the cluster's report")
    code, _, err = run_cli(["report", tmp_path], capsys)
    assert code == 2
    assert f"{tmp_path} is a cluster run (cluster/state.json)" in err
    assert f"trtbench collect {tmp_path} --no-wait" in err
    assert (tmp_path / "report.md").read_text() == "the cluster's report"


def test_a_zero_on_the_command_line_is_given_not_unset():
    """--variants-per-shard 0 must reach the check that refuses it, not fall back to the
    spec's value as if it had not been given."""
    given = {k: None for k in SLURM_KEYS} | {
        "sbatch_args": (),
        "no_wait": False,
        "variants_per_shard": 0,
    }
    options = with_spec_cluster(ClusterSpec(variants_per_shard=2), given)
    assert options["variants_per_shard"] == 0
