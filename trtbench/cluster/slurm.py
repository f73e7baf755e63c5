"""Slurm's own command line, nothing more: the job-array script, ``sbatch --parsable``,
``squeue``, ``scontrol show job -o`` and ``scancel`` (https://slurm.schedmd.com/sbatch.html,
squeue.html, scontrol.html, scancel.html).

Every shard is one task of a job array (``--array=0,2``: the shards still to measure), so
``$SLURM_ARRAY_TASK_ID`` picks the shard's variants. With a container image the shard runs
under pyxis, ``srun --container-image=IMAGE [--container-mounts=…]`` inside the batch
script (https://github.com/NVIDIA/pyxis#usage); without one, directly on the node.

Job states come from ``squeue`` while a task is pending or running and from ``scontrol show
job -o`` after it ends (kept ``MinJobAge`` seconds, 300 by default; accounting through
``sacct`` may be disabled). The parsers are pure; the calls raise
:class:`~trtbench.core.errors.NotAvailableError` with the command's own message.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trtbench.core.errors import ConfigError, NotAvailableError

COMMANDS = ("sbatch", "squeue", "scontrol", "scancel")
"""The Slurm commands the driver runs (looked up before anything is submitted)."""
PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
"""A shard's phase as the terminal shows it."""
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "RESV_DEL_HOLD",
    }
)
"""Job states in which a task has not ended (squeue's JOB STATE CODES)."""
TIME_RE = re.compile(r"^(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2}|UNLIMITED|INFINITE)$")
"""``--time`` formats sbatch accepts: minutes, minutes:seconds, hours:minutes:seconds,
days-hours, days-hours:minutes, days-hours:minutes:seconds."""
COMMAND_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SlurmOptions:
    """What every shard's job asks Slurm for (``None``: the cluster's default).

    Attributes:
        partition, account: ``--partition``, ``--account``.
        time: ``--time`` (e.g. ``2:00:00``; Slurm's formats, :data:`TIME_RE`).
        gpus: GPUs per shard (``--gpus``, on one node).
        cpus: CPUs per shard (``--cpus-per-task``).
        container_image: a pyxis image (``nvcr.io#nvidia/…``, a squashfs file); the shard's
            ``trtbench`` runs inside it through ``srun --container-image``.
        container_mounts: pyxis ``--container-mounts`` (``SRC:DST[,…]``): the shared storage
            the run directory, spec and models are on.
        sbatch_args: further ``sbatch`` arguments as given (``--qos=high``, ``--begin=…``).
        poll_s: seconds between two looks at the queue.
        max_running: at most this many array tasks run at once (``--array=…%N``; None: no
            limit).
    """

    partition: str | None = None
    account: str | None = None
    time: str | None = None
    gpus: int | None = None
    cpus: int | None = None
    container_image: str | None = None
    container_mounts: str | None = None
    sbatch_args: tuple[str, ...] = field(default_factory=tuple)
    poll_s: float = 10.0
    max_running: int | None = None

    def as_json(self) -> dict[str, object]:
        """The options as run.json and state.json keep them."""
        return {
            "partition": self.partition,
            "account": self.account,
            "time": self.time,
            "gpus": self.gpus,
            "cpus": self.cpus,
            "container_image": self.container_image,
            "container_mounts": self.container_mounts,
            "sbatch_args": list(self.sbatch_args),
            "poll_s": self.poll_s,
            "max_running": self.max_running,
        }


@dataclass(frozen=True)
class TaskState:
    """One array task as Slurm reports it.

    Attributes:
        job_id: the array's job id (``SLURM_ARRAY_JOB_ID``).
        task: the array task id (the shard's index).
        state: Slurm's job state (``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``,
            ``CANCELLED``, ``TIMEOUT``, …).
        reason: why it waits or ended (squeue ``%R``, scontrol ``Reason``), may be empty.
        exit_code: ``code:signal`` (scontrol ``ExitCode``), empty while it runs.
        node: the node it runs or ran on, may be empty.
    """

    job_id: str
    task: int
    state: str
    reason: str = ""
    exit_code: str = ""
    node: str = ""

    @property
    def phase(self) -> str:
        """pending | running | done | failed (:func:`phase_of`)."""
        return phase_of(self.state)


def phase_of(state: str) -> str:
    """The terminal's word for a Slurm job state: ``PENDING`` (and other not-yet-started
    holds) → pending, an active state → running, ``COMPLETED`` → done, anything else that
    ended (FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, …) → failed."""
    base = state.split()[0].rstrip("+") if state else ""
    if base in ("PENDING", "REQUEUE_HOLD", "REQUEUED", "RESV_DEL_HOLD"):
        return PENDING
    if base in ACTIVE_STATES:
        return RUNNING
    return DONE if base == "COMPLETED" else FAILED


def check_options(options: SlurmOptions) -> None:
    """Check the options and that Slurm's commands are here, before any submission.

    Raises:
        ConfigError: a ``--time`` Slurm does not read, GPUs, CPUs or running shards
            below 1, a poll
            interval ≤ 0, mounts without an image.
        NotAvailableError: a Slurm command is not on PATH.
    """
    if options.time is not None and not TIME_RE.match(options.time):
        raise ConfigError(
            f"--slurm-time {options.time!r} is not a Slurm time; give minutes, "
            "H:MM:SS or D-HH[:MM[:SS]] (e.g. 2:00:00)"
        )
    for name, value in (
        ("--slurm-gpus", options.gpus),
        ("--slurm-cpus", options.cpus),
        ("--max-running-shards", options.max_running),
    ):
        if value is not None and value < 1:
            raise ConfigError(f"{name} is {value}; give 1 or more, or leave it out")
    if options.poll_s <= 0:
        raise ConfigError(f"--poll-s is {options.poll_s}; give a positive number")
    if options.container_mounts and not options.container_image:
        raise ConfigError(
            "--container-mounts needs --container-image (pyxis mounts into the image)"
        )
    missing = [c for c in COMMANDS if shutil.which(c) is None]
    if missing:
        raise NotAvailableError(
            f"{', '.join(missing)} not found on PATH: --executor slurm submits with "
            "Slurm's own commands; run on a login node of the cluster (or use "
            "--executor local)"
        )


def job_script(
    name: str,
    shards: Sequence[tuple[int, Sequence[str]]],
    command: Sequence[str],
    shards_dir: Path,
    options: SlurmOptions,
) -> str:
    """The batch script of the job array (pure).

    Args:
        name: the job name (``trtbench-<spec name>``).
        shards: (array task id, its ``trtbench run`` arguments after ``command``) per shard.
        command: the shard's argv before those (``trtbench run SPEC``).
        shards_dir: ``RUN/shards``; task K writes ``sK/`` there: its run directory, and
            ``host.txt``, ``gpus.csv`` (nvidia-smi: name, uuid, driver) and ``exit_code``.
        options: partition, account, time, GPUs, CPUs, container.

    Returns:
        The script text (bash; ``#SBATCH`` lines for the options, the array is given to
        ``sbatch --array`` per submission).
    """
    q = shlex.quote
    head = [
        "#!/bin/bash",
        f"#SBATCH --job-name={q(name)}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
    ]
    for flag, value in (
        ("--partition", options.partition),
        ("--account", options.account),
        ("--time", options.time),
        ("--gpus", options.gpus),
        ("--cpus-per-task", options.cpus),
    ):
        if value is not None:
            head.append(f"#SBATCH {flag}={q(str(value))}")
    cases = [
        f"  {task}) ARGS=({' '.join(q(a) for a in args)}) ;;" for task, args in shards
    ]
    run = " ".join(q(c) for c in command)
    if options.container_image:
        pyxis = [f"--container-image={q(options.container_image)}"]
        if options.container_mounts:
            pyxis.append(f"--container-mounts={q(options.container_mounts)}")
        run = f"srun --ntasks=1 {' '.join(pyxis)} {run}"
    image = q(options.container_image or "")
    body = [
        'SHARD="s${SLURM_ARRAY_TASK_ID}"',
        'case "$SLURM_ARRAY_TASK_ID" in',
        *cases,
        '  *) echo "no shard $SLURM_ARRAY_TASK_ID in this script" >&2; exit 2 ;;',
        "esac",
        f'DIR={q(str(shards_dir))}/"$SHARD"',
        'mkdir -p "$DIR"',
        '{ echo "host=$(hostname)"; echo "node=${SLURMD_NODENAME:-}";',
        '  echo "job=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}";',
        f"  printf 'container_image=%s\\n' {image}; }} > \"$DIR/host.txt\"",
        "if command -v nvidia-smi >/dev/null; then",
        "  nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader"
        ' > "$DIR/gpus.csv" 2>/dev/null || true',
        "fi",
        f'{run} "${{ARGS[@]}}" --out "$DIR"',
        "code=$?",
        'echo "$code" > "$DIR/exit_code"',
        'exit "$code"',
    ]
    return "\n".join([*head, "", *body]) + "\n"


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NotAvailableError(
            f"{argv[0]} could not run ({exc}); check that Slurm's commands work here"
        ) from exc


def submit(
    script: Path,
    array: Sequence[int],
    log_pattern: Path,
    args: Sequence[str] = (),
    max_running: int | None = None,
) -> str:
    """``sbatch --parsable --array=…[%N] --output=LOG [ARGS…] script``; the array's job id.

    Args:
        script: the batch script (:func:`job_script`).
        array: the array task ids to run (the shards still to measure).
        log_pattern: stdout and stderr of each task (``%A_%a.log``: job id, task id).
        args: further sbatch arguments (``SlurmOptions.sbatch_args``).
        max_running: at most this many tasks at once (the ``%N`` suffix of ``--array``,
            https://slurm.schedmd.com/job_array.html); None: no limit.

    Raises:
        NotAvailableError: sbatch refused (its message, e.g. an unknown partition).
    """
    throttle = "" if max_running is None else f"%{max_running}"
    argv = [
        "sbatch",
        "--parsable",
        f"--array={','.join(str(t) for t in array)}{throttle}",
        f"--output={log_pattern}",
        *args,
        str(script),
    ]
    done = _run(argv)
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip()).splitlines()
        why = lines[-1].strip() if lines else f"exit code {done.returncode}"
        raise NotAvailableError(  # one line: sbatch's last (its most specific)
            f"sbatch refused the shards: {why}; check that a Slurm controller is "
            "reachable (`sinfo`), --slurm-partition, --slurm-account and the other "
            "Slurm options"
        )
    return parse_parsable(done.stdout)


def parse_parsable(text: str) -> str:
    """The job id of ``sbatch --parsable``'s output (``ID`` or ``ID;CLUSTER``).

    Raises:
        NotAvailableError: no job id in it.
    """
    first = text.strip().splitlines()[0] if text.strip() else ""
    job = first.split(";", 1)[0].strip()
    if not job.isdigit():
        raise NotAvailableError(f"sbatch printed no job id: {text.strip()!r}")
    return job


def parse_squeue(text: str) -> list[TaskState]:
    """Array tasks of ``squeue -h -r -o '%i|%T|%R|%N'`` (pure).

    ``%i`` is ``JOB_TASK`` for an array task (``-r``: one line per task, pending ones
    too); a line that is not an array task is skipped.
    """
    found = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2 or "_" not in parts[0]:
            continue
        job, task = parts[0].split("_", 1)
        if not task.isdigit():
            continue
        reason = parts[2] if len(parts) > 2 else ""
        node = parts[3] if len(parts) > 3 else ""
        found.append(TaskState(job, int(task), parts[1], reason, "", node))
    return found


def task_ids(text: str) -> list[int]:
    """The task ids of an ``ArrayTaskId`` / ``--array`` value: ``3`` → [3], ``0-2,5%2`` →
    [0, 1, 2, 5] (``%N`` is a throttle); [] for anything else."""
    found: list[int] = []
    for part in text.split("%", 1)[0].split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return []
        found += range(int(low), int(high or low) + 1)
    return found


def parse_scontrol(text: str) -> list[TaskState]:
    """Array tasks of ``scontrol show job -o ID`` (pure): one line per task with
    ``ArrayJobId``, ``ArrayTaskId`` (a single number once the task exists), ``JobState``,
    ``Reason``, ``ExitCode`` and ``NodeList``. The line of tasks not yet split off
    (``ArrayTaskId=1-3,5%2``: a range list and a throttle) stands for each of them."""
    found = []
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "ArrayJobId" not in fields:
            continue
        node = fields.get("NodeList", "")
        reason = fields.get("Reason", "")
        for task in task_ids(fields.get("ArrayTaskId", "")):
            found.append(
                TaskState(
                    fields["ArrayJobId"],
                    task,
                    fields.get("JobState", ""),
                    "" if reason == "None" else reason,
                    fields.get("ExitCode", ""),
                    "" if node == "(null)" else node,
                )
            )
    return found


class SlurmQueryError(NotAvailableError):
    """squeue or scontrol failed for a reason other than an unknown job id (the controller
    busy or restarting): the caller looks again later rather than judge the shards."""


FORGOTTEN = "Invalid job id specified"
"""What squeue and scontrol say of a job the controller no longer holds."""


def _query(argv: Sequence[str]) -> str:
    done = _run(argv)
    if done.returncode == 0:
        return done.stdout
    if FORGOTTEN in done.stderr:
        return ""
    raise SlurmQueryError(f"{argv[0]} failed: {done.stderr.strip() or done.returncode}")


def query_tasks(job_ids: Sequence[str]) -> dict[tuple[str, int], TaskState]:
    """Every known task of the arrays ``job_ids``: ``squeue`` for those queued or running,
    ``scontrol show job -o`` for the rest. A task Slurm no longer knows (ended more than
    ``MinJobAge`` ago: "Invalid job id specified") is absent.

    Raises:
        SlurmQueryError: squeue or scontrol failed otherwise (nothing is judged from it).
    """
    if not job_ids:
        return {}
    queued = _query(
        ["squeue", "-h", "-r", "-j", ",".join(job_ids), "-o", "%i|%T|%R|%N"]
    )
    states = {(t.job_id, t.task): t for t in parse_squeue(queued)}
    for job in job_ids:
        for t in parse_scontrol(_query(["scontrol", "show", "job", "-o", job])):
            key = (t.job_id, t.task)
            if key not in states or phase_of(t.state) in (DONE, FAILED):
                states[key] = t
    return states


def cancel(job_ids: Sequence[str]) -> list[str]:
    """``scancel`` each array; the messages of those it could not cancel (an ended job is
    not an error)."""
    problems = []
    for job in job_ids:
        done = _run(["scancel", job])
        if done.returncode != 0 and "already completing" not in done.stderr:
            problems.append(f"scancel {job}: {done.stderr.strip()}")
    return problems
