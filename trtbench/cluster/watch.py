"""Watching the shards: each one as Slurm and its directory say it is now, the status line
the terminal shows, the wait until every shard has ended, and the cancellation.

A shard's state is Slurm's (``squeue`` / ``scontrol``); once Slurm no longer knows the task
(``MinJobAge``), the ``exit_code`` file its batch script wrote decides. It is *done* only
when it ended ``COMPLETED`` with exit code 0 and left ``loadtest/summary.csv``; its progress
is the cells its ``trtbench.log`` says were measured over the cells its design plans.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from trtbench.cluster.gather import ShardView, log_tail, read_host
from trtbench.cluster.shards import Shard
from trtbench.cluster.slurm import (
    DONE,
    FAILED,
    PENDING,
    RUNNING,
    SlurmQueryError,
    TaskState,
    cancel,
    phase_of,
    query_tasks,
)
from trtbench.cluster.state import (
    ClusterState,
    Submission,
    cluster_dir,
    shard_dir,
    write_state,
)
from trtbench.core.errors import TrtbenchError
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.measuring import plan_design
from trtbench.spec.bench import BenchSpec

CELL_LINE = re.compile(r"tier_pass: \S+ \S+( \(round \d+\))?: \d+ requests, \d+ failed")
"""A measured cell in a shard's ``trtbench.log`` (the tier pass's closing line)."""

Say = Callable[[str], None]
LAG_POLLS = 12
"""Polls a shard Slurm reports ``COMPLETED`` (exit 0:0) may wait for its files to show on
this machine (an NFS client caches attributes and directory entries for up to 60 s by
default: ``acdirmax``, nfs(5)) before it counts as a shard without results."""
LAGGING = "COMPLETED (its files not visible here yet)"


def planned_cells(spec: BenchSpec | None, shard: Shard) -> int:
    """Cells (variant × tier × round) the shard measures (0 when the spec is unreadable)."""
    if spec is None:
        return 0
    try:
        return len(plan_design(spec, spec.select(shard.variants))[1])
    except TrtbenchError:
        return 0


def cells_done(directory: Path) -> int:
    """Cells the shard's ``trtbench.log`` says were measured so far."""
    log = directory / "trtbench.log"
    if not log.is_file():
        return 0
    return sum(
        1
        for line in log.read_text(errors="replace").splitlines()
        if CELL_LINE.search(line)
    )


def _exit_code(directory: Path) -> int | None:
    path = directory / "exit_code"
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def view_of(
    rd: RunDir,
    shard: Shard,
    sub: Submission | None,
    task: TaskState | None,
    planned: int,
    wait_for_files: bool = False,
) -> ShardView:
    """The shard as Slurm and its directory say it is now (:class:`ShardView`).

    ``wait_for_files``: a task Slurm reports ``COMPLETED`` with exit code ``0:0`` whose
    ``exit_code`` or ``summary.csv`` is not visible yet is still ``running``
    (:data:`LAGGING`) instead of a shard without results.
    """
    directory = shard_dir(rd, shard)
    host = read_host(directory)
    if sub is None:
        return ShardView(
            shard, "", "NOT SUBMITTED", FAILED, host, None, (0, planned), False
        )
    log = cluster_dir(rd) / "logs" / f"{sub.job_id}_{sub.task}.log"
    code = _exit_code(directory)
    if task is not None:
        state = task.state
        if task.node and not host.node:
            host = replace(host, node=task.node)
    elif code is not None:  # Slurm forgot it (MinJobAge): its exit code decides
        state = "COMPLETED" if code == 0 else f"FAILED (exit {code})"
    else:
        state = "UNKNOWN"
    phase = phase_of(state)
    done = phase == DONE and code == 0 and RunDir(directory).summary_csv.is_file()
    lagging = task is not None and task.exit_code == "0:0" and wait_for_files
    if phase == DONE and not done and lagging:
        state, phase = LAGGING, RUNNING
    elif phase == DONE and not done:
        state, phase = f"{state} (no results: exit code {code})", FAILED
    tail = tuple(log_tail(log)) if phase == FAILED else ()
    return ShardView(
        shard,
        f"{sub.job_id}_{sub.task}",
        state,
        phase,
        host,
        log,
        (cells_done(directory), planned),
        done,
        tail,
    )


def views_now(
    rd: RunDir,
    state: ClusterState,
    spec: BenchSpec | None,
    patient: frozenset[str] = frozenset(),
) -> list[ShardView]:
    """Every shard of ``state`` as it is now (one squeue and one scontrol per array);
    the shards named in ``patient`` may wait for their files (``view_of``)."""
    current = state.current()
    tasks = query_tasks(sorted({s.job_id for s in current.values()}))
    return [
        view_of(
            rd,
            shard,
            current.get(shard.name),
            tasks.get((current[shard.name].job_id, current[shard.name].task))
            if shard.name in current
            else None,
            planned_cells(spec, shard),
            shard.name in patient,
        )
        for shard in state.shards
    ]


def status_line(views: Sequence[ShardView]) -> str:
    """``s0 done 4/4 cells on vm · s1 running 1/4 cells on vm · s2 pending``."""
    parts = []
    for v in views:
        text = f"{v.shard.name} {v.phase}"
        if v.phase != PENDING and v.cells[1]:
            text += f" {v.cells[0]}/{v.cells[1]} cells"
        if v.host.node or v.host.host:
            text += f" on {v.host.node or v.host.host}"
        if v.phase == FAILED:
            text += f" ({v.state})"
        parts.append(text)
    return "shards: " + " · ".join(parts)


def wait_for_shards(
    rd: RunDir, state: ClusterState, spec: BenchSpec | None, poll_s: float, say: Say
) -> list[ShardView]:
    """Poll until every shard has ended; say the status line whenever it changes. A shard
    whose files lag behind Slurm's ``COMPLETED`` is waited for :data:`LAG_POLLS` polls.

    Raises:
        StopSignal: a stop signal arrived (the caller cancels).
    """
    last = ""
    waited = dict.fromkeys((s.name for s in state.shards), 0)
    while True:
        patient = frozenset(n for n, polls in waited.items() if polls < LAG_POLLS)
        try:
            views = views_now(rd, state, spec, patient)
        except SlurmQueryError as exc:  # the controller busy: look again, judge nothing
            say(f"warning: {exc}; looking again in {poll_s:g} s")
            time.sleep(poll_s)
            continue
        for v in views:
            waited[v.shard.name] += v.state == LAGGING
        line = status_line(views)
        if line != last:
            say(line)
            last = line
        if all(v.phase in (DONE, FAILED) for v in views):
            return views
        time.sleep(poll_s)


def cancel_all(rd: RunDir, state: ClusterState, say: Say) -> ClusterState:
    """``scancel`` every submitted array; state.json marks the run cancelled."""
    jobs = sorted({s.job_id for s in state.current().values()})
    problems = cancel(jobs)
    say(f"cancelled job array(s) {', '.join(jobs) or '-'} (scancel)")
    for p in problems:
        say(f"warning: {p}")
    state = replace(state, cancelled=True)
    write_state(rd, state)
    return state
