"""The shards' run directories merged into the cluster run's own (the files an ordinary run
leaves, so the same readers read them).

* Every CSV with a ``variant`` column (``loadtest/{summary,acceptance,categories,
  category_acceptance,requests,responses,outputs,rounds}.csv``, ``memory.csv``,
  ``server_metrics.csv``, ``memory_breakdown.csv``) is the rows of the finished shards, shard
  by shard, copied as text (no value is re-read or re-printed); the baseline's rows of shard
  ``sK`` are renamed ``<baseline>@sK`` (:func:`~trtbench.cluster.shards.shard_label`). A
  variant's speedup columns stay as its shard computed them: over the baseline measured in
  the same shard, on the same node, side by side in time.
* ``engines/<variant>/build.json`` of each measured variant, from its shard.
* ``cluster/shards.csv``: per shard its variants, job, Slurm state, node, host, GPU names and
  UUIDs, driver version and container image (from the ``host.txt`` and ``gpus.csv`` each task
  wrote, :func:`~trtbench.cluster.slurm.job_script`).
"""

from __future__ import annotations

import csv
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trtbench.cluster.shards import Shard, shard_label
from trtbench.core.run_dir import RunDir, atomic_target

MERGED_CSVS = (
    "loadtest/summary.csv",
    "loadtest/acceptance.csv",
    "loadtest/categories.csv",
    "loadtest/category_acceptance.csv",
    "loadtest/requests.csv",
    "loadtest/responses.csv",
    "loadtest/outputs.csv",
    "loadtest/rounds.csv",
    "memory.csv",
    "server_metrics.csv",
    "memory_breakdown.csv",
)
"""The run-directory files merged, relative to a run directory."""
SHARDS_COLUMNS = (
    "shard",
    "variants",
    "job",
    "state",
    "node",
    "host",
    "gpu_names",
    "gpu_uuids",
    "driver_version",
    "container_image",
)
"""``cluster/shards.csv``'s columns (variants, GPU names and UUIDs: ``;``-joined)."""
LOG_TAIL_LINES = 15


@dataclass(frozen=True)
class ShardHost:
    """Where a shard ran, as its task wrote it (empty strings: not recorded).

    Attributes:
        host: ``hostname`` on the node; node: ``SLURMD_NODENAME``.
        gpus: (name, uuid, driver version) per GPU (nvidia-smi; none on a CPU node).
        container_image: the pyxis image the shard ran in ('' without one).
    """

    host: str = ""
    node: str = ""
    gpus: tuple[tuple[str, str, str], ...] = ()
    container_image: str = ""

    @property
    def gpu_models(self) -> tuple[str, ...]:
        """The distinct GPU names, sorted."""
        return tuple(sorted({g[0] for g in self.gpus}))


def read_host(directory: Path) -> ShardHost:
    """``host.txt`` (``key=value`` lines) and ``gpus.csv`` (``name, uuid, driver``) of a
    shard's directory; absent files give empty fields."""
    fields: dict[str, str] = {}
    host_txt = directory / "host.txt"
    if host_txt.is_file():
        for line in host_txt.read_text(errors="replace").splitlines():
            key, _, value = line.partition("=")
            fields[key.strip()] = value.strip()
    gpus: list[tuple[str, str, str]] = []
    gpus_csv = directory / "gpus.csv"
    if gpus_csv.is_file():
        for row in csv.reader(gpus_csv.read_text(errors="replace").splitlines()):
            cells = [c.strip() for c in row]
            if len(cells) >= 3:
                gpus.append((cells[0], cells[1], cells[2]))
    return ShardHost(
        fields.get("host", ""),
        fields.get("node", ""),
        tuple(gpus),
        fields.get("container_image", ""),
    )


def log_tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last ``lines`` non-empty lines of a task's log ([] when there is none)."""
    if path is None or not path.is_file():
        return []
    text = path.read_text(errors="replace").splitlines()
    return [line for line in text if line.strip()][-lines:]


def merge_csv(sources: Sequence[tuple[Path, Shard]], out: Path, baseline: str) -> int:
    """Write the rows of ``sources`` (shard order) into ``out``; the baseline's ``variant``
    renamed per shard. Columns: the first file's, then any column a later one adds (cells
    it lacks are empty). Values are copied as the shards wrote them.

    Returns:
        Rows written (0: no source had the file; ``out`` is then not written).
    """
    present = [(p, s) for p, s in sources if p.is_file()]
    if not present:
        return 0
    columns: list[str] = []
    for path, _ in present:
        with path.open(newline="") as f:
            header = next(csv.reader(f), [])
        columns += [c for c in header if c not in columns]
    count = 0
    with atomic_target(out) as tmp, tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, restval="")
        writer.writeheader()
        for path, shard in present:
            with path.open(newline="") as src:
                for row in csv.DictReader(src):
                    if "variant" in row:
                        row["variant"] = shard_label(row["variant"], shard, baseline)
                    writer.writerow(row)
                    count += 1
    return count


def merge_run_dirs(
    rd: RunDir, finished: Sequence[tuple[Shard, RunDir]], baseline: str
) -> dict[str, int]:
    """Merge the finished shards' files into ``rd`` (module docstring); stale merged files
    from an earlier gather are replaced or, when no shard has them, removed.

    Returns:
        Run-directory file → rows written.
    """
    written = {}
    for name in MERGED_CSVS:
        out = rd.root / name
        rows = merge_csv([(r.root / name, s) for s, r in finished], out, baseline)
        if rows == 0:
            out.unlink(missing_ok=True)
        else:
            written[name] = rows
    for shard, shard_rd in finished:
        for variant in shard.variants:
            if variant == baseline:
                continue
            src = shard_rd.build_json(variant)
            if src.is_file():
                rd.build_json(variant).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, rd.build_json(variant))
    return written


def write_shards_csv(path: Path, rows: Iterable[Sequence[str]]) -> None:
    """``cluster/shards.csv`` (:data:`SHARDS_COLUMNS`, one row per shard)."""
    with atomic_target(path) as tmp, tmp.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SHARDS_COLUMNS)
        writer.writerows(rows)


@dataclass(frozen=True)
class ShardView:
    """A shard as the driver last saw it.

    Attributes:
        shard: the shard.
        job: ``<job>_<task>`` of its latest submission ('' never submitted).
        state: Slurm's state (``COMPLETED``, ``FAILED``, ``CANCELLED``, …), or ``NOT
            SUBMITTED`` / ``UNKNOWN`` (Slurm no longer knows it and it left no exit code).
        phase: pending | running | done | failed (``slurm.phase_of``).
        host: where it ran.
        log: its task log (None: never submitted).
        cells: (cells measured, cells planned) from its ``trtbench.log`` (progress).
        done: it ended ``COMPLETED`` with exit code 0 and a ``loadtest/summary.csv``.
        tail: the last lines of its log when it failed (:func:`log_tail`), else empty.
    """

    shard: Shard
    job: str
    state: str
    phase: str
    host: ShardHost
    log: Path | None
    cells: tuple[int, int]
    done: bool
    tail: tuple[str, ...] = ()
