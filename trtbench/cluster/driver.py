"""``trtbench run SPEC --executor slurm`` and ``trtbench collect RUN``: the shards submitted
as one Slurm job array, watched, cancelled on a stop signal, and gathered into one run
directory.

1. Everything is checked before the first submission: the spec and variants, the Slurm
   options and commands, and (without a container image, where the shard runs with this
   machine's software) the same preflight as ``trtbench run``.
2. The shards (:mod:`~trtbench.cluster.shards`) still to measure are submitted as one
   array (``sbatch --array=K,…``); a shard that finished is kept, one still queued or
   running is waited for, one that failed, was cancelled or never ran is resubmitted (its
   earlier attempt's directory set aside as ``s<K>.attempt-<job>_<task>``). A spec that changed since the first submission is refused.
3. The driver shows each shard's state whenever one changes (pending, running with its
   cells measured, done, failed) until every shard has ended (``--no-wait``: it returns after
   submitting; ``trtbench collect`` gathers later).
4. SIGINT, SIGTERM or SIGHUP (:class:`~trtbench.core.stop_signals.StopSignal`) while waiting
   ``scancel`` every submitted array, gather what finished (a partial run) and re-raise: the
   CLI exits 128 + the signal.
5. The finished shards are merged (:mod:`~trtbench.cluster.gather`) and the report written
   (:mod:`~trtbench.cluster.report`); a shard that did not finish makes a partial run naming
   it, its Slurm state and the last lines of its log (the CLI then exits 1).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from trtbench.cluster.gather import (
    ShardView,
    merge_run_dirs,
    write_shards_csv,
)
from trtbench.cluster.report import best_per_tier, recommendation, render
from trtbench.cluster.shards import Shard, plan_shards
from trtbench.cluster.slurm import (
    FAILED,
    SlurmOptions,
    SlurmQueryError,
    check_options,
    job_script,
    submit,
)
from trtbench.cluster.state import (
    ClusterState,
    Submission,
    cluster_dir,
    file_sha256,
    read_state,
    shard_dir,
    write_state,
)
from trtbench.cluster.watch import (
    Say,
    cancel_all,
    status_line,
    views_now,
    wait_for_shards,
)
from trtbench.core.errors import ConfigError, NotAvailableError, TrtbenchError
from trtbench.core.run_dir import RunDir, write_json_atomic
from trtbench.core.stop_signals import StopSignal, signal_name
from trtbench.pipeline.preflight import preflight_run
from trtbench.pipeline.report import write_page
from trtbench.pipeline.run import baseline_of
from trtbench.spec.bench import BenchSpec, load_spec

RECOMMENDATION_JSON = "recommendation.json"


class ShardsFailedError(TrtbenchError):
    """A shard did not finish: the run directory holds a partial run (exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class ClusterOutcome:
    """What a cluster run or collect ended with.

    Attributes:
        run_dir: the merged run directory.
        views: every shard as last seen.
        gathered: the merged files were written (False: ``--no-wait`` only submitted).
        summary: the merged summary.csv (empty when nothing finished or not gathered).
        answer: the recommendation's sentence ('' when not gathered).
        files: report.md, recommendation.json, cluster/shards.csv when gathered.
        rerun: the command that resubmits what is missing.
    """

    run_dir: RunDir
    views: tuple[ShardView, ...]
    gathered: bool
    summary: pd.DataFrame
    answer: str = ""
    files: tuple[Path, ...] = ()
    rerun: str = ""

    @property
    def complete(self) -> bool:
        """Every shard finished."""
        return all(v.done for v in self.views)

    def failure_message(self) -> str:
        """The error line of a partial run: each missing shard, its state and log tail."""
        parts = []
        for v in self.views:
            if v.done:
                continue
            tail = " | ".join(v.tail[-3:])
            parts.append(
                f"shard {v.shard.name} ({', '.join(v.shard.variants)}) job {v.job or '-'}"
                f" {v.state}" + (f"; last log lines: {tail}" if tail else "")
            )
        return (
            "partial run: "
            + "; ".join(parts)
            + f". The other shards' results are in {self.run_dir.root} (report.md marks "
            f"the run partial); `{self.rerun}` (same Slurm options) resubmits only what is "
            "missing"
        )


def shard_command(
    spec_file: Path, options: SlurmOptions, base: Sequence[str] | None
) -> list[str]:
    """The shard's argv up to its ``--variant`` arguments: ``BASE run SPEC --executor
    local`` where BASE is ``base``, else ``trtbench`` inside a container image, else this
    interpreter's ``python -m trtbench.cli`` (the same software, on shared storage); local
    because the spec may say ``cluster: {executor: slurm}``."""
    if base:
        head = list(base)
    elif options.container_image:
        head = ["trtbench"]
    else:
        head = [sys.executable, "-m", "trtbench.cli"]
    return [*head, "run", str(spec_file), "--executor", "local"]


def gather(
    rd: RunDir,
    state: ClusterState,
    views: Sequence[ShardView],
    stop_signal: int | None = None,
) -> ClusterOutcome:
    """Merge the finished shards into ``rd``; write report.md, recommendation.json,
    cluster/shards.csv and run.json's ``cluster`` and ``run`` sections."""
    finished = [(v.shard, RunDir(shard_dir(rd, v.shard))) for v in views if v.done]
    merge_run_dirs(rd, finished, state.baseline)
    shards_csv = cluster_dir(rd) / "shards.csv"
    write_shards_csv(
        shards_csv,
        [
            (
                v.shard.name,
                ";".join(v.shard.variants),
                v.job,
                v.state,
                v.host.node,
                v.host.host,
                ";".join(g[0] for g in v.host.gpus),
                ";".join(g[1] for g in v.host.gpus),
                ";".join(sorted({g[2] for g in v.host.gpus})),
                v.host.container_image,
            )
            for v in views
        ],
    )
    summary = (
        pd.read_csv(rd.summary_csv) if rd.summary_csv.is_file() else pd.DataFrame()
    )
    missing = [v.shard.name for v in views if not v.done]
    doc = recommendation(
        best_per_tier(summary, views, state.baseline),
        state.baseline,
        bool(missing),
        missing,
    )
    rerun = f"trtbench run {state.spec} --executor slurm --out {rd.root}"
    write_json_atomic(rd.root / RECOMMENDATION_JSON, doc)
    rd.report_md.write_text(
        render(rd.root.name, summary, views, state.baseline, doc, rerun)
    )
    page = write_page(rd.report_md, doc.get("answer"))  # the tables; no figures
    rd.update_run_json(
        "cluster",
        {
            "executor": "slurm",
            "spec": state.spec,
            "baseline": state.baseline,
            "options": state.options,
            "complete": not missing,
            "missing": missing,
            "shards": {
                v.shard.name: {
                    "variants": list(v.shard.variants),
                    "job": v.job,
                    "state": v.state,
                    "node": v.host.node,
                    "host": v.host.host,
                    "gpus": [list(g) for g in v.host.gpus],
                    "container_image": v.host.container_image,
                    "log": None if v.log is None else str(v.log),
                    "log_tail": list(v.tail),
                }
                for v in views
            },
        },
    )
    rd.update_run_json(
        "run",
        {
            "interrupted": stop_signal is not None,
            "stop_signal": None if stop_signal is None else signal_name(stop_signal),
            "failure": None
            if not missing
            else {"error": ShardsFailedError.__name__, "missing": missing},
        },
    )
    files = (rd.report_md, page, rd.root / RECOMMENDATION_JSON, shards_csv)
    return ClusterOutcome(rd, tuple(views), True, summary, doc["answer"], files, rerun)


def _stopped(
    rd: RunDir, state: ClusterState, spec: BenchSpec | None, stop: StopSignal, say: Say
) -> None:
    """On a stop signal: scancel every array state.json names (the newest written, so a
    submission just made is in it), then gather what finished."""
    state = cancel_all(rd, read_state(rd) or state, say)
    try:
        views = views_now(rd, state, spec)
    except SlurmQueryError as exc:  # the signal's exit code matters more than a gather
        say(f"warning: {exc}; gather later with `trtbench collect {rd.root}`")
        return
    gather(rd, state, views, stop.signum)


def _wait_and_gather(
    rd: RunDir, state: ClusterState, spec: BenchSpec | None, poll_s: float, say: Say
) -> ClusterOutcome:
    try:
        views = wait_for_shards(rd, state, spec, poll_s, say)
    except StopSignal as stop:
        _stopped(rd, state, spec, stop, say)
        raise
    return gather(rd, state, views)


def set_aside_attempts(
    rd: RunDir, shards: Sequence[Shard], current: dict[str, Submission]
) -> dict[str, Path]:
    """Move each shard's directory of its earlier attempt to
    ``shards/s<K>.attempt-<job>_<task>`` (``attempt-unsubmitted`` when it was never
    submitted); an attempt is set aside, never deleted. A shard whose attempt made no
    directory (cancelled before its ``trtbench run`` started) has nothing to set aside.

    Returns:
        Shard name → the directory it was moved to, for the shards that had one.
    """
    moved = {}
    for shard in shards:
        old = shard_dir(rd, shard)
        if not old.exists():
            continue
        sub = current.get(shard.name)
        tag = f"{sub.job_id}_{sub.task}" if sub else "unsubmitted"
        aside = old.with_name(f"{shard.name}.attempt-{tag}")
        shutil.rmtree(aside, ignore_errors=True)
        old.rename(aside)
        moved[shard.name] = aside
    return moved


def submit_missing(
    rd: RunDir,
    state: ClusterState,
    spec: BenchSpec,
    options: SlurmOptions,
    command: Sequence[str] | None,
    say: Say,
) -> ClusterState:
    """Submit, as one array, every shard that failed, was cancelled or never ran (its
    directory of the earlier attempt moved to ``shards/s<K>.attempt-<job>_<task>``); keep
    those done or still queued. Returns the state written."""
    views = views_now(rd, state, spec)
    todo = [v.shard for v in views if v.phase == FAILED]
    if not todo:
        say("no shard to submit: every shard finished or is still queued")
        return state
    set_aside_attempts(rd, todo, state.current())
    logs = cluster_dir(rd) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    script = cluster_dir(rd) / "shards.sbatch"
    script.write_text(
        job_script(
            f"trtbench-{spec.name}",
            [
                (s.index, [a for v in s.variants for a in ("--variant", v)])
                for s in state.shards
            ],
            shard_command(Path(state.spec), options, command),
            rd.root.resolve() / "shards",
            options,
        )
    )
    job = submit(
        script,
        [s.index for s in todo],
        logs / "%A_%a.log",
        options.sbatch_args,
        options.max_running,
    )
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    state = replace(
        state,
        submissions=state.submissions
        + tuple(Submission(s.name, job, s.index, now) for s in todo),
        cancelled=False,
    )
    write_state(rd, state)
    say(
        f"submitted {len(todo)} of {len(state.shards)} shard(s) as job array {job}: "
        + ", ".join(f"{s.name} ({', '.join(s.variants)})" for s in todo)
    )
    return state


def run_on_slurm(
    spec: BenchSpec,
    spec_path: Path,
    rd: RunDir,
    variants: Sequence[str],
    options: SlurmOptions,
    per_shard: int = 1,
    wait: bool = True,
    say: Say = print,
    command: Sequence[str] | None = None,
    on_checked: Callable[[], None] | None = None,
) -> ClusterOutcome:
    """Submit what is missing of ``spec``'s shards, wait, gather (module docstring).

    Args:
        spec: the validated spec; spec_path: its file (every shard runs it, so it and the
            paths in it must be on storage the nodes share).
        rd: the run directory (``RUN/shards/s<K>`` are the shards' own).
        variants: ``--variant`` names (default every variant).
        options: the Slurm options.
        per_shard: non-baseline variants per shard.
        wait: wait and gather (False: return after submitting).
        say: where status lines go (the terminal).
        command: the shard's ``trtbench`` argv (default :func:`shard_command`).
        on_checked: called once every input is checked, before anything is written
            (the CLI takes the run directory's lock there).

    Returns:
        The outcome (``gathered`` False with ``wait`` False).

    Raises:
        ConfigError: no baseline, bad options, a spec changed since the first submission
            or shards that differ from it, any preflight failure (before submitting).
        NotAvailableError: Slurm commands missing, sbatch refused.
        StopSignal: after cancelling every job and gathering what finished.
    """
    names = [v.name for v in spec.select(tuple(variants))]
    baseline = baseline_of(spec, names)
    shards = tuple(plan_shards(names, baseline, per_shard))
    # The spec's own mistakes first: they are named whether or not Slurm is here.
    check_options(options)
    spec_file = spec_path.resolve()
    sha = file_sha256(spec_file)
    old = read_state(rd)
    if old is not None and (old.spec_sha256 != sha or old.shards != shards):
        what = "spec file changed" if old.spec_sha256 != sha else "shards differ"
        raise ConfigError(
            f"{rd.root} holds a cluster run of other shards ({what} since its first "
            "submission); use another --out, or the same spec, variants and "
            "--variants-per-shard"
        )
    if not options.container_image:  # the shards run this machine's software
        preflight_run(spec, rd, tuple(variants), str(spec_path))
    if on_checked is not None:
        on_checked()
    state = old or ClusterState(
        str(spec_file), sha, str(baseline), shards, options.as_json()
    )
    try:
        try:
            state = submit_missing(rd, state, spec, options, command, say)
        except NotAvailableError:
            if old is None:  # nothing was ever submitted: leave no cluster/ behind
                shutil.rmtree(cluster_dir(rd), ignore_errors=True)
            raise
        if not wait:
            say(f"collect later with: trtbench collect {rd.root}")
            views = views_now(rd, state, spec)
            return ClusterOutcome(rd, tuple(views), False, pd.DataFrame())
        views = wait_for_shards(rd, state, spec, options.poll_s, say)
    except StopSignal as stop:
        _stopped(rd, state, spec, stop, say)
        raise
    return gather(rd, state, views)


def collect(
    rd: RunDir, wait: bool = True, poll_s: float | None = None, say: Say = print
) -> ClusterOutcome:
    """Gather a cluster run submitted earlier (``--no-wait``): wait for the shards still
    queued or running (``wait``), then merge what finished.

    Raises:
        ConfigError: ``rd`` holds no cluster run (no ``cluster/state.json``).
        DataFileError: state.json is damaged.
        StopSignal: while waiting, after cancelling every job and gathering.
    """
    state = read_state(rd)
    if state is None:
        raise ConfigError(
            f"{rd.root} holds no cluster run (no cluster/state.json); pass the --out of a "
            "`trtbench run --executor slurm`"
        )
    try:
        spec = load_spec(Path(state.spec))
    except ConfigError:
        spec = None  # progress counts only
    poll = poll_s if poll_s is not None else float(state.options.get("poll_s", 10.0))
    if wait:
        return _wait_and_gather(rd, state, spec, poll, say)
    views = views_now(rd, state, spec)
    say(status_line(views))
    return gather(rd, state, views)
