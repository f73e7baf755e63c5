"""Run a command under ``nsys profile`` with the flags launch-overhead analysis needs.

Flags (Nsight Systems User Guide, CLI table,
https://docs.nvidia.com/nsight-systems/UserGuide/index.html): ``--trace=cuda,nvtx`` (CUDA API + GPU
activities + NVTX ranges; no OS-runtime tracing), ``--cuda-graph-trace=node`` (kernels of a graph
replay get their own rows, carrying the ``cudaGraphLaunch`` correlation id; the default ``graph``
keeps one row per replay), ``--sample=none --cpuctxsw=none`` (no CPU sampling or context-switch
tracing), an optional capture range (``--capture-range=nvtx`` with
``--nvtx-capture=RANGE[@DOMAIN]``, or ``cudaProfilerApi``; both with ``--capture-range-end=stop``
so the application keeps running), and ``--export=sqlite`` so ``OUT/NAME.sqlite`` is written next
to ``OUT/NAME.nsys-rep``. NVTX capture on strings that are not registered (``torch.cuda.nvtx``)
needs ``NSYS_NVTX_PROFILER_REGISTER_ONLY=0`` in the environment, which the runner sets.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from trtbench.core.errors import ConfigError, NotAvailableError, TraceParseError
from trtbench.core.stop_signals import StopSignal

logger = logging.getLogger(__name__)

CaptureRange = Literal["none", "nvtx", "cudaProfilerApi"]
# Where NGC containers and the Nsight Systems installers put the CLI when it is not on PATH.
_NSYS_GLOBS = (
    "/usr/local/cuda/bin/nsys",
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems-cli/*/bin/nsys",
)
_STDERR_TAIL = 600
STOP_GRACE_S = 30.0


@dataclass(frozen=True)
class NsysProfileSpec:
    """What to record. ``out_dir/name`` is the report stem (``.nsys-rep`` and ``.sqlite``).

    Attributes:
        out_dir: folder for the report (created).
        name: report file stem.
        capture_range: ``none`` (whole run), ``nvtx`` (needs ``nvtx_capture``) or
            ``cudaProfilerApi`` (between ``cudaProfilerStart``/``Stop``).
        nvtx_capture: ``RANGE`` or ``RANGE@DOMAIN`` that starts the capture.
        cuda_graph_trace: ``node`` (per-kernel rows of graph replays) or ``graph``.
    """

    out_dir: Path
    name: str = "report"
    capture_range: CaptureRange = "none"
    nvtx_capture: str | None = None
    cuda_graph_trace: Literal["node", "graph"] = "node"

    @property
    def sqlite_path(self) -> Path:
        """The SQLite export nsys writes."""
        return self.out_dir / f"{self.name}.sqlite"

    @property
    def report_path(self) -> Path:
        """The ``.nsys-rep`` report nsys writes."""
        return self.out_dir / f"{self.name}.nsys-rep"


def trace_flags(spec: NsysProfileSpec) -> list[str]:
    """What is traced: CUDA API + GPU activities + NVTX, graph replays per ``spec``."""
    return ["--trace=cuda,nvtx", f"--cuda-graph-trace={spec.cuda_graph_trace}"]


def collection_flags(spec: NsysProfileSpec) -> list[str]:
    """How it is collected: no CPU sampling or context switches, a SQLite export, and
    the output stem ``out_dir/name`` (overwritten)."""
    return [
        "--sample=none",
        "--cpuctxsw=none",
        "--export=sqlite",
        "--force-overwrite=true",
        f"--output={spec.out_dir / spec.name}",
    ]


def nsys_profile_argv(
    spec: NsysProfileSpec, command: list[str], nsys: str = "nsys"
) -> list[str]:
    """The ``nsys profile`` command line for ``command`` (pure).

    Raises:
        ConfigError: no command, ``nvtx`` capture without a range name, or a range name without
            ``nvtx`` capture.
    """
    if not command:
        raise ConfigError(
            "no command to profile; pass it after --, e.g. -- python serve.py"
        )
    if spec.capture_range == "nvtx" and not spec.nvtx_capture:
        raise ConfigError("--capture-range nvtx needs --nvtx-capture RANGE[@DOMAIN]")
    if spec.nvtx_capture and spec.capture_range != "nvtx":
        raise ConfigError(
            "--nvtx-capture is only used with --capture-range nvtx; add it"
        )
    argv = [nsys, "profile", *trace_flags(spec), *collection_flags(spec)]
    if spec.capture_range != "none":
        argv += [f"--capture-range={spec.capture_range}", "--capture-range-end=stop"]
    if spec.nvtx_capture:
        argv.append(f"--nvtx-capture={spec.nvtx_capture}")
    return [*argv, *command]


def wrap_with_nsys(
    spec: NsysProfileSpec, command: list[str], nsys: Path
) -> tuple[list[str], dict]:
    """``(argv, extra environment)`` to start ``command`` under nsys (e.g. a tritonserver)."""
    env = (
        {"NSYS_NVTX_PROFILER_REGISTER_ONLY": "0"}
        if spec.capture_range == "nvtx"
        else {}
    )
    return nsys_profile_argv(spec, command, str(nsys)), env


def find_nsys(explicit: Path | None = None) -> Path:
    """The ``nsys`` executable: ``explicit``, else ``PATH``, else the usual install folders.

    Raises:
        NotAvailableError: not found (or ``explicit`` is not an executable file).
    """
    if explicit is not None:
        if explicit.is_file() and os.access(explicit, os.X_OK):
            return explicit
        raise NotAvailableError(
            f"--nsys {explicit} is not an executable file; pass the nsys CLI"
        )
    found = shutil.which("nsys")
    if found:
        return Path(found)
    for pattern in _NSYS_GLOBS:
        matches = sorted(Path("/").glob(pattern.lstrip("/")))
        if matches:
            return matches[-1]
    raise NotAvailableError(
        "nsys (Nsight Systems CLI) was not found on PATH, in /usr/local/cuda/bin or "
        "/opt/nvidia/nsight-systems; install Nsight Systems or pass --nsys PATH"
    )


@dataclass(frozen=True)
class NsysProfileResult:
    """What a profiling run left: the report, its SQLite export, the command's exit code."""

    report_path: Path
    sqlite_path: Path
    returncode: int


def _forward_stop(proc: subprocess.Popen, signum: int) -> None:
    """Pass a stop signal to nsys's process group (nsys stops the application and writes
    its report); SIGKILL the group if it is still there after :data:`STOP_GRACE_S`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signum)
    try:
        proc.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_nsys_profile(
    spec: NsysProfileSpec, command: list[str], nsys: Path | None = None
) -> NsysProfileResult:
    """Profile ``command`` (stdout streams through; stderr is kept for errors).

    Raises:
        NotAvailableError: nsys not found.
        ConfigError: bad spec or command (see :func:`nsys_profile_argv`), or nsys failed.
        TraceParseError: nsys finished without writing the SQLite export.
    """
    executable = find_nsys(nsys)
    argv, extra_env = wrap_with_nsys(spec, command, executable)
    spec.out_dir.mkdir(parents=True, exist_ok=True)
    logger.info("running %s", " ".join(argv))
    proc = subprocess.Popen(  # noqa: S603 - argv built above
        argv,
        env={**os.environ, **extra_env},
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = proc.communicate()
    except StopSignal as stop:
        _forward_stop(proc, stop.signum)
        raise
    if stderr:
        logger.debug("nsys stderr: %s", stderr)
    if not spec.sqlite_path.is_file():
        if proc.returncode != 0:
            raise ConfigError(
                f"nsys profile exited with {proc.returncode}: "
                f"{stderr.strip()[-_STDERR_TAIL:]!r}; check the command after -- and the flags"
            )
        raise TraceParseError(
            f"nsys finished but wrote no {spec.sqlite_path}; check that the capture range "
            "started (NVTX range name, cudaProfilerStart) and that the command ran CUDA work"
        )
    return NsysProfileResult(spec.report_path, spec.sqlite_path, proc.returncode)
