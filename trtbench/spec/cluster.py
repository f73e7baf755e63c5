"""Bench-spec section ``cluster:``: run the matrix on this machine or as Slurm shards.

Every field has a ``trtbench run`` option of the same meaning (``--executor``,
``--slurm-partition``, …, docs/slurm.md); an option given on the
command line wins over the spec. ``executor: slurm`` makes ``trtbench run SPEC`` submit the
shards without ``--executor slurm``; each shard itself runs with ``--executor local``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Executor = Literal["local", "slurm"]


class ClusterSpec(BaseModel):
    """``cluster:``: where the matrix runs (None: the cluster's own default).

    Attributes:
        executor: ``local`` (every variant on this machine) or ``slurm``.
        partition, account: sbatch ``--partition``, ``--account``.
        time: sbatch ``--time`` per shard (Slurm's formats, e.g. ``2:00:00``).
        gpus: GPUs per shard (sbatch ``--gpus``); cpus: sbatch ``--cpus-per-task``.
        container_image, container_mounts: pyxis' ``srun --container-image`` /
            ``--container-mounts`` for each shard.
        sbatch_args: further sbatch arguments as given (``--qos=high``).
        variants_per_shard: non-baseline variants per shard (each shard also measures the
            baseline).
        max_running_shards: at most this many shards run at once (the job array's ``%N``
            throttle; None: as many as Slurm schedules).
        poll_s: seconds between two looks at the queue.
        shard_command: how a shard starts trtbench on its node (a command line).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    executor: Executor = "local"
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    gpus: int | None = Field(default=None, ge=1)
    cpus: int | None = Field(default=None, ge=1)
    container_image: str | None = None
    container_mounts: str | None = None
    sbatch_args: tuple[str, ...] = ()
    variants_per_shard: int = Field(default=1, ge=1)
    max_running_shards: int | None = Field(default=None, ge=1)
    poll_s: float = Field(default=10.0, gt=0)
    shard_command: str | None = None


OPTION_OF_FIELD = {
    "partition": "slurm_partition",
    "account": "slurm_account",
    "time": "slurm_time",
    "gpus": "slurm_gpus",
    "cpus": "slurm_cpus",
    "container_image": "container_image",
    "container_mounts": "container_mounts",
    "sbatch_args": "sbatch_args",
    "variants_per_shard": "variants_per_shard",
    "max_running_shards": "max_running_shards",
    "poll_s": "poll_s",
    "shard_command": "shard_command",
}
"""Each field's keyword among ``trtbench run``'s Slurm options (commands/cluster.py)."""
