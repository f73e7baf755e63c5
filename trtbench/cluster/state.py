"""``RUN/cluster/state.json``: what the driver submitted, so that a later ``trtbench collect``
or a second ``trtbench run --executor slurm`` finds the jobs, keeps what finished and
resubmits only what is missing.

Layout of a cluster run (beside the merged files of an ordinary run)::

    RUN/cluster/state.json         this file
    RUN/cluster/shards.sbatch      the job-array script (slurm.job_script)
    RUN/cluster/logs/<job>_<task>.log   each task's stdout and stderr
    RUN/cluster/shards.csv         which shard measured what, where (gather)
    RUN/shards/s<K>/               shard K's own run directory (+ host.txt, gpus.csv,
                                   exit_code)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtbench.cluster.shards import Shard
from trtbench.core.data_files import read_json_document
from trtbench.core.errors import DataFileError
from trtbench.core.run_dir import RunDir, write_json_atomic

STATE_SCHEMA_VERSION = 1
STATE_FIX = "delete RUN/cluster/ to start the cluster run over (the shards' dirs stay)"


@dataclass(frozen=True)
class Submission:
    """One shard handed to Slurm: task ``task`` of array ``job_id``."""

    shard: str
    job_id: str
    task: int
    submitted_at: str


@dataclass(frozen=True)
class ClusterState:
    """What state.json holds.

    Attributes:
        spec: the spec file (absolute path) every shard runs.
        spec_sha256: its content's SHA-256 when first submitted (a changed spec is refused).
        baseline: the baseline variant, measured in every shard.
        shards: the shards, index order.
        options: the Slurm options (``SlurmOptions.as_json``).
        submissions: every submission, oldest first (the last one per shard is current).
        cancelled: the driver cancelled the jobs (a stop signal).
    """

    spec: str
    spec_sha256: str
    baseline: str
    shards: tuple[Shard, ...]
    options: dict[str, Any] = field(default_factory=dict)
    submissions: tuple[Submission, ...] = ()
    cancelled: bool = False

    def current(self) -> dict[str, Submission]:
        """Shard name → its latest submission (shards never submitted are absent)."""
        return {s.shard: s for s in self.submissions}

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": STATE_SCHEMA_VERSION,
            "spec": self.spec,
            "spec_sha256": self.spec_sha256,
            "baseline": self.baseline,
            "shards": [
                {"index": s.index, "variants": list(s.variants)} for s in self.shards
            ],
            "options": self.options,
            "submissions": [vars(s) for s in self.submissions],
            "cancelled": self.cancelled,
        }


def cluster_dir(rd: RunDir) -> Path:
    """``RUN/cluster``."""
    return rd.root / "cluster"


def state_path(rd: RunDir) -> Path:
    return cluster_dir(rd) / "state.json"


def shard_dir(rd: RunDir, shard: Shard) -> Path:
    """``RUN/shards/s<K>``: shard K's own run directory."""
    return rd.root / "shards" / shard.name


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of the file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_state(rd: RunDir) -> ClusterState | None:
    """state.json read back (None: this run directory has no cluster run).

    Raises:
        DataFileError: truncated, not an object, a newer schema, a missing key.
    """
    path = state_path(rd)
    if not path.is_file():
        return None
    doc = read_json_document(
        path, max_schema_version=STATE_SCHEMA_VERSION, fix=STATE_FIX
    )
    try:
        return ClusterState(
            spec=str(doc["spec"]),
            spec_sha256=str(doc["spec_sha256"]),
            baseline=str(doc["baseline"]),
            shards=tuple(
                Shard(int(s["index"]), tuple(s["variants"])) for s in doc["shards"]
            ),
            options=dict(doc.get("options", {})),
            submissions=tuple(
                Submission(
                    str(s["shard"]),
                    str(s["job_id"]),
                    int(s["task"]),
                    str(s["submitted_at"]),
                )
                for s in doc.get("submissions", [])
            ),
            cancelled=bool(doc.get("cancelled", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataFileError(
            f"{path}: {type(exc).__name__}: {exc}; {STATE_FIX}"
        ) from exc


def write_state(rd: RunDir, state: ClusterState) -> None:
    """Write state.json atomically (never half-written)."""
    write_json_atomic(state_path(rd), state.as_json())
