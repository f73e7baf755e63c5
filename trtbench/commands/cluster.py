"""The Slurm executor's options of ``trtbench run`` and the terminal side of a cluster run
(``trtbench run --executor slurm``, ``trtbench collect``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click_option_group import optgroup

from trtbench.cluster.driver import ClusterOutcome, ShardsFailedError, run_on_slurm
from trtbench.cluster.report import comparison_lines
from trtbench.cluster.slurm import SlurmOptions
from trtbench.commands.terminal import say_answer
from trtbench.core.run_dir import RunDir
from trtbench.spec.bench import BenchSpec
from trtbench.spec.cluster import OPTION_OF_FIELD, ClusterSpec

F = TypeVar("F", bound=Callable[..., object])

SLURM_KEYS = (*OPTION_OF_FIELD.values(), "no_wait")
"""The keyword arguments :func:`slurm_options` adds to a command."""


def slurm_options(f: F) -> F:
    """``--executor local|slurm`` and the Slurm options (group "Cluster (--executor
    slurm)")."""
    options = [
        optgroup.group("Cluster (--executor slurm)"),
        optgroup.option(
            "--executor",
            type=click.Choice(["local", "slurm"]),
            default=None,
            help="local: every variant on this machine; slurm: shards of the matrix as "
            "a Slurm job array, each with the baseline beside its variants, gathered "
            "into RUN_DIR (docs/slurm.md). Default: the spec's "
            "cluster.executor (local). Every option below may also be given in the "
            "spec's cluster: section; the command line wins.",
        ),
        optgroup.option("--slurm-partition", default=None, help="sbatch --partition."),
        optgroup.option("--slurm-account", default=None, help="sbatch --account."),
        optgroup.option(
            "--slurm-time", default=None, help="sbatch --time per shard (e.g. 2:00:00)."
        ),
        optgroup.option(
            "--slurm-gpus",
            type=int,
            default=None,
            help="GPUs per shard (sbatch --gpus).",
        ),
        optgroup.option(
            "--slurm-cpus",
            type=int,
            default=None,
            help="CPUs per shard (sbatch --cpus-per-task).",
        ),
        optgroup.option(
            "--container-image",
            default=None,
            help="Run each shard in this image through pyxis (srun --container-image), "
            "e.g. nvcr.io#nvidia/tritonserver:26.07-trtllm-python-py3.",
        ),
        optgroup.option(
            "--container-mounts",
            default=None,
            help="pyxis --container-mounts (SRC:DST,…): the shared storage holding the "
            "spec, models and RUN_DIR.",
        ),
        optgroup.option(
            "--sbatch-arg",
            "sbatch_args",
            multiple=True,
            help="A further sbatch argument as given, e.g. --sbatch-arg=--qos=high "
            "(repeatable).",
        ),
        optgroup.option(
            "--variants-per-shard",
            type=int,
            default=None,
            help="Non-baseline variants per shard (each shard also measures the "
            f"baseline). Default: {ClusterSpec().variants_per_shard}.",
        ),
        optgroup.option(
            "--max-running-shards",
            type=int,
            default=None,
            help="At most N shards run at once (the job array's %N throttle). Default: "
            "as many as Slurm schedules.",
        ),
        optgroup.option(
            "--no-wait",
            is_flag=True,
            help="Submit and return; `trtbench collect RUN_DIR` gathers later.",
        ),
        optgroup.option(
            "--poll-s",
            type=float,
            default=None,
            help="Seconds between two looks at the queue. Default: "
            f"{ClusterSpec().poll_s:g}.",
        ),
        optgroup.option(
            "--shard-command",
            default=None,
            help="How a shard starts trtbench on its node (default: `trtbench` in a "
            "container image, else this Python's `-m trtbench.cli`).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _given(kwargs: dict[str, Any]) -> list[str]:
    """The Slurm options given on the command line: every default is None, no
    ``--sbatch-arg`` or no ``--no-wait`` (the spec's ``cluster:`` defaults the rest)."""
    unset = (None, (), False)  # by identity: 0 is given (and refused later), not unset
    return [k for k in SLURM_KEYS if not any(kwargs.get(k) is u for u in unset)]


def given_slurm_options(kwargs: dict[str, Any]) -> list[str]:
    """The Slurm options given a value other than their default (for ``--executor
    local``, which refuses them)."""
    return ["--" + k.replace("_", "-") for k in _given(kwargs)]


def with_spec_cluster(cluster: ClusterSpec, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The Slurm options in effect: each one given on the command line, else the spec's
    ``cluster:`` field of the same meaning (:data:`OPTION_OF_FIELD`)."""
    given = set(_given(kwargs))
    out = dict(kwargs)
    for field, key in OPTION_OF_FIELD.items():
        if key not in given:
            out[key] = getattr(cluster, field)
    return out


def say(line: str) -> None:
    """A status line on stderr (the terminal)."""
    click.echo(line, err=True)


def print_cluster_outcome(outcome: ClusterOutcome) -> None:
    """The merged table, the files, then the answer: the recommendation sentence and the
    path of report.md, last (as ``trtbench run`` ends); a partial run raises after printing.

    Raises:
        ShardsFailedError: a shard did not finish (exit 1).
    """
    if outcome.gathered:
        if not outcome.complete:
            missing = ", ".join(v.shard.name for v in outcome.views if not v.done)
            click.echo(
                f"PARTIAL RUN: shard(s) {missing} missing from every figure below"
            )
        if not outcome.summary.empty:
            click.echo(
                "\n".join(
                    comparison_lines(
                        outcome.summary,
                        outcome.views,
                        str(outcome.views[0].shard.variants[0]),
                    )
                )
            )
        for path in outcome.files:
            click.echo(f"wrote {path}")
        report = next((p for p in outcome.files if p.name == "report.md"), None)
        say_answer(outcome.answer, report)  # last, as `trtbench run` ends
    if outcome.gathered and not outcome.complete:
        raise ShardsFailedError(outcome.failure_message())


def run_slurm(
    bench: BenchSpec,
    spec: Path,
    run_dir: RunDir,
    variants: tuple[str, ...],
    kwargs: dict[str, Any],
    on_checked: Callable[[], None] | None = None,
) -> None:
    """``trtbench run --executor slurm``: options → :func:`run_on_slurm` → terminal."""
    options = SlurmOptions(
        partition=kwargs["slurm_partition"],
        account=kwargs["slurm_account"],
        time=kwargs["slurm_time"],
        gpus=kwargs["slurm_gpus"],
        cpus=kwargs["slurm_cpus"],
        container_image=kwargs["container_image"],
        container_mounts=kwargs["container_mounts"],
        sbatch_args=tuple(kwargs["sbatch_args"]),
        poll_s=kwargs["poll_s"],
        max_running=kwargs["max_running_shards"],
    )
    command = kwargs["shard_command"].split() if kwargs["shard_command"] else None
    outcome = run_on_slurm(
        bench,
        spec,
        run_dir,
        variants,
        options,
        kwargs["variants_per_shard"],
        not kwargs["no_wait"],
        say,
        command,
        on_checked,
    )
    print_cluster_outcome(outcome)
