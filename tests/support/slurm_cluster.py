"""A single-node Slurm cluster on this machine for the integration tests (Debian's
``slurmctld``, ``slurmd`` and ``munge``), started once per session and stopped by the fixture
that started it.

What it needs (Slurm 22.05 on Debian 12, https://slurm.schedmd.com/slurm.conf.html): root
(slurmd runs jobs as their user and sets up cgroups-free process tracking here), munged
with its key (``/etc/munge/munge.key``, made by the package), and a ``slurm.conf`` with the
host as controller and as the one node, ``proctrack/linuxproc``, ``task/none``,
``jobacct_gather/none`` and ``select/cons_tres`` (``CR_Core``). Every file the daemons
write (state, spool, pid files, logs) is under a temporary directory; the ports are free
ones. The commands find the configuration through ``SLURM_CONF``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.apt import apt_install

DAEMONS = (
    "slurmctld",
    "slurmd",
    "munged",
    "sbatch",
    "squeue",
    "scontrol",
    "scancel",
    "sinfo",
)
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class LocalSlurm:
    """A started cluster: its configuration file and the environment that uses it."""

    conf: Path
    node: str
    cpus: int

    @property
    def env(self) -> dict[str, str]:
        """``SLURM_CONF`` for the Slurm commands."""
        return {"SLURM_CONF": str(self.conf)}


def unavailable_reason() -> str | None:
    """Why a cluster cannot start here (None: it can, possibly after installing)."""
    if os.name != "posix" or os.geteuid() != 0:
        return "a local Slurm cluster needs root (slurmd runs the jobs)"
    if all(shutil.which(d) for d in DAEMONS):
        return None
    if shutil.which("apt-get") is None:
        return "slurmctld/slurmd/munge are not installed and there is no apt-get"
    return None


def install() -> str | None:
    """``apt-get install`` the daemons when absent; why it failed (None: installed)."""
    return apt_install(PACKAGES, DAEMONS)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_conf(root: Path, node: str, cpus: int) -> Path:
    """``root/slurm.conf`` for one node (module docstring); every path under ``root``."""
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    lines = [
        "ClusterName=trtbench-test",
        f"SlurmctldHost={node}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        f"NodeName={node} CPUs={cpus} State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP "
        "OverSubscribe=YES",
    ]
    conf = root / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def start_munged() -> str | None:
    """munged running (started when absent); why it could not start (None: running)."""
    if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode == 0:
        return None
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    done = subprocess.run(["munged", "--force"], capture_output=True, text=True)
    if done.returncode != 0:
        return f"munged did not start: {done.stderr.strip()}"
    return None


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def local_slurm(root: Path) -> Iterator[LocalSlurm | str]:
    """Start slurmctld and slurmd on ``root/slurm.conf``; yield the cluster, or the reason
    it could not start (then nothing is left running). Both daemons are stopped (their
    process groups) when the block ends; munged, shared with the system, stays."""
    reason = unavailable_reason() or install() or start_munged()
    if reason is not None:
        yield reason
        return
    node = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    conf = write_conf(root, node, cpus)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs = [
        subprocess.Popen(
            [daemon, "-D", "-f", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=(root / "log" / f"{daemon}.stderr").open("w"),
            env=env,
            start_new_session=True,
        )
        for daemon in ("slurmctld", "slurmd")
    ]
    try:
        why = wait_idle(env, procs, root)
        yield why if why is not None else LocalSlurm(conf, node, cpus)
    finally:
        for proc in reversed(procs):
            _stop(proc)


def wait_idle(
    env: dict[str, str], procs: list[subprocess.Popen], root: Path
) -> str | None:
    """Wait until ``sinfo`` shows the node idle; why not (None: it is)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        dead = [p.args[0] for p in procs if p.poll() is not None]
        if dead:
            log = root / "log" / f"{dead[0]}.log"
            tail = log.read_text(errors="replace")[-400:] if log.is_file() else ""
            return f"{dead[0]} exited: {tail}"
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env
        )
        if out.returncode == 0 and out.stdout.strip() == "idle":
            return None
        time.sleep(0.5)
    return f"the node was not idle within {READY_TIMEOUT_S:.0f} s (see {root}/log)"
