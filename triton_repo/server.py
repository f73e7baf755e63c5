"""A managed ``tritonserver`` process: start it, wait until ready, stop it.

The binary is found by :func:`~trtbench.triton_repo.binary.find_tritonserver` (DESIGN.md order,
including the nvidia-pytriton wheel with the libpython fix). Ports are the ones given (checked
free) or picked free; if a picked port is taken between the check and the bind, the start is
retried with new ports. For TP×PP > 1 (TensorRT-LLM in an NGC image) the server runs under
``mpirun`` as one MPMD segment per rank, the way ``launch_triton_server.py`` builds it
(research/triton_backend.md §4): every rank gets its own Python-backend shared-memory prefix
and ``--disable-auto-complete-config``; ranks > 0 load only the TensorRT-LLM models.

The process runs in its own session; :meth:`TritonServer.stop` signals the whole process group
(SIGTERM, then SIGKILL after a grace period), so no child (Python stubs, MPI ranks) outlives a
run. Errors are one line and carry the log lines that say why.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trtbench.errors import ServerStartError
from trtbench.triton_repo.binary import (
    TritonBinary,
    find_tritonserver,
    prepare_backend_dir,
    server_env,
)
from trtbench.triton_repo.ports import Ports, choose_ports
from trtbench.triton_repo.server_log import log_errors, tail

log = logging.getLogger(__name__)

START_ATTEMPTS = 3
_PORT_TAKEN = ("already in use", "Address already in use")


@dataclass(frozen=True)
class ServerConfig:
    """What to serve and how.

    Attributes:
        model_repo: the Triton model repository.
        log_path: file that receives the server's stdout and stderr.
        tritonserver: explicit binary (else searched, see ``binary.py``).
        grpc_port, http_port, metrics_port: fixed ports (None: pick free ones).
        models: models that must be ready before the server counts as started
            (empty: wait for server readiness only).
        ready_timeout_s: seconds to wait for readiness.
        extra_args: more tritonserver flags (``--log-verbose=1`` …).
        world_size: MPI ranks (TP×PP); > 1 launches under ``mpirun``.
        tensorrt_llm_models: the models ranks > 0 load (``--load-model``).
        mpirun: the MPI launcher (name on ``$PATH`` or a path).
        wrapper_argv: a command the server runs under, put in front of its argv (and in
            front of ``mpirun``), e.g. ``nsys launch --session-new=S …``. The process
            group then holds the wrapper too; stopping the server signals both.
    """

    model_repo: Path
    log_path: Path
    tritonserver: Path | None = None
    grpc_port: int | None = None
    http_port: int | None = None
    metrics_port: int | None = None
    models: tuple[str, ...] = ()
    ready_timeout_s: float = 300.0
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    world_size: int = 1
    tensorrt_llm_models: tuple[str, ...] = ()
    mpirun: str = "mpirun"
    wrapper_argv: tuple[str, ...] = ()


def server_argv(
    binary: Path,
    model_repo: Path,
    ports: Ports,
    backend_dir: Path | None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The tritonserver command line of one process (pure)."""
    argv = [
        str(binary),
        f"--model-repository={model_repo}",
        f"--grpc-port={ports.grpc}",
        f"--http-port={ports.http}",
        f"--metrics-port={ports.metrics}",
        "--allow-metrics=true",
        "--disable-auto-complete-config",
    ]
    if backend_dir is not None:
        argv.append(f"--backend-directory={backend_dir}")
    argv.extend(extra_args)
    return argv


def mpirun_argv(
    mpirun: str,
    rank_argv: Sequence[str],
    world_size: int,
    tensorrt_llm_models: Sequence[str],
) -> list[str]:
    """The MPMD launch of ``world_size`` tritonserver ranks (pure).

    ``mpirun --allow-run-as-root -n 1 <rank 0> : -n 1 <rank 1> …``; each rank is
    ``rank_argv`` plus ``--backend-config=python,shm-region-prefix-name=prefix{i}_``; ranks
    > 0 add ``--model-control-mode=explicit`` and one ``--load-model`` per TensorRT-LLM model
    (research/triton_backend.md §4, ``launch_triton_server.py``).

    Raises:
        ServerStartError: world_size < 2 or no TensorRT-LLM model for ranks > 0.
    """
    if world_size < 2:
        raise ServerStartError(f"mpirun needs world_size >= 2, got {world_size}")
    if not tensorrt_llm_models:
        raise ServerStartError(
            "a multi-GPU launch needs the TensorRT-LLM model names for ranks > 0; "
            "render the repository with `trtbench deploy` (trtbench.json lists them)"
        )
    argv = [mpirun, "--allow-run-as-root"]
    for rank in range(world_size):
        if rank:
            argv.append(":")
        argv += ["-n", "1", *rank_argv]
        argv.append(f"--backend-config=python,shm-region-prefix-name=prefix{rank}_")
        if rank:
            argv.append("--model-control-mode=explicit")
            argv += [f"--load-model={name}" for name in tensorrt_llm_models]
    return argv


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - localhost only
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class _PortTaken(Exception):
    """A picked port was taken before tritonserver bound it (retry with new ports)."""


class TritonServer:
    """Context manager around one tritonserver process (or one mpirun of ranks).

    Example::

        with TritonServer(ServerConfig(repo, log, models=("ensemble",))) as server:
            client = grpcclient.InferenceServerClient(server.grpc_url)

    Raises (on enter):
        ServerStartError: binary or mpirun missing, port in use, process exit or timeout
            before ready; one line with the log lines that say why and the log's path.
    """

    def __init__(self, config: ServerConfig, environ: Mapping[str, str] | None = None):
        self.config = config
        self._environ = dict(os.environ if environ is None else environ)
        self.process: subprocess.Popen[bytes] | None = None
        self.ports: Ports | None = None
        self.argv: list[str] = []
        self.binary: TritonBinary | None = None

    @property
    def grpc_url(self) -> str:
        return f"localhost:{self._ports().grpc}"

    @property
    def http_url(self) -> str:
        return f"http://localhost:{self._ports().http}"

    @property
    def metrics_url(self) -> str:
        return f"http://localhost:{self._ports().metrics}/metrics"

    def _ports(self) -> Ports:
        if self.ports is None:
            raise RuntimeError("the server has not been started")
        return self.ports

    def build_argv(self, binary: TritonBinary, ports: Ports) -> list[str]:
        """The full command line for ``ports`` (mpirun MPMD when world_size > 1), behind
        ``config.wrapper_argv`` when one is set."""
        cfg = self.config
        backend_dir = prepare_backend_dir(binary, cfg.log_path.parent / "backends")
        argv = server_argv(
            binary.path, cfg.model_repo, ports, backend_dir, cfg.extra_args
        )
        if cfg.world_size <= 1:
            return [*cfg.wrapper_argv, *argv]
        if shutil.which(cfg.mpirun, path=self._environ.get("PATH", "")) is None:
            raise ServerStartError(
                f"{cfg.mpirun} not found, but tp_size x pp_size = {cfg.world_size} needs MPI; "
                "run inside the NGC tritonserver trtllm image or set deploy.mpirun"
            )
        ranks = mpirun_argv(cfg.mpirun, argv, cfg.world_size, cfg.tensorrt_llm_models)
        return [*cfg.wrapper_argv, *ranks]

    def start(self) -> TritonServer:
        """Launch the process and block until it (and ``config.models``) are ready."""
        cfg = self.config
        self.binary = find_tritonserver(cfg.tritonserver, self._environ)
        cfg.log_path.parent.mkdir(parents=True, exist_ok=True)
        fixed = None not in (cfg.grpc_port, cfg.http_port, cfg.metrics_port)
        for attempt in range(1, START_ATTEMPTS + 1):
            self.ports = choose_ports(cfg.grpc_port, cfg.http_port, cfg.metrics_port)
            self.argv = self.build_argv(self.binary, self.ports)
            log.info("starting %s", " ".join(self.argv))
            self._launch()
            try:
                self._wait_ready()
                return self
            except _PortTaken:
                self.stop()
                if fixed or attempt == START_ATTEMPTS:
                    raise self._failure("could not bind its ports") from None
                log.info("a picked port was taken; retrying with new ports")
            except BaseException:
                self.stop()
                raise
        return self

    def _launch(self) -> None:
        with open(self.config.log_path, "wb") as log_file:
            self.process = subprocess.Popen(  # noqa: S603 - argv built above
                self.argv,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=server_env(self.binary, self._environ),
                start_new_session=True,
            )

    def _failure(self, what: str) -> ServerStartError:
        cfg = self.config
        text = (
            cfg.log_path.read_text(errors="replace") if cfg.log_path.is_file() else ""
        )
        reasons = log_errors(text)
        why = "; ".join(reasons) if reasons else "no error lines in the log"
        return ServerStartError(f"tritonserver {what}: {why} (log: {cfg.log_path})")

    def _not_ready(self, urls: dict[str, str]) -> list[str]:
        return [name for name, url in urls.items() if not _http_ok(url)]

    def _wait_ready(self) -> None:
        cfg = self.config
        deadline = time.monotonic() + cfg.ready_timeout_s
        urls = {"server": f"{self.http_url}/v2/health/ready"}
        urls |= {m: f"{self.http_url}/v2/models/{m}/ready" for m in cfg.models}
        waiting = list(urls)
        while time.monotonic() < deadline:
            proc = self.process
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                text = tail(cfg.log_path, 200)
                if any(p in text for p in _PORT_TAKEN):
                    raise _PortTaken
                raise self._failure(f"exited with code {code} before it was ready")
            waiting = self._not_ready(urls)
            if not waiting:
                return
            time.sleep(0.25)
        raise self._failure(
            f"was not ready after {cfg.ready_timeout_s:g} s (waiting for "
            f"{', '.join(waiting)}; raise deploy.ready_timeout_s if models load slowly)"
        )

    def stop(self, grace_s: float = 15.0) -> int | None:
        """SIGTERM the server, SIGKILL its process group after ``grace_s``; return the exit code.

        Only the leader (tritonserver, or the mpirun / nsys wrapper in front of it) gets
        SIGTERM: tritonserver unloads its models and stops the Python backend stubs itself.
        Signalling the stubs at the same moment leaves Triton waiting for models whose stub
        is already gone ("Found 1 live models") until the grace period runs out.
        """
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                log.warning(
                    "tritonserver did not exit %.0f s after SIGTERM; killed it (log %s)",
                    grace_s,
                    self.config.log_path,
                )
                _kill_group(proc)
            except BaseException:  # a second Ctrl-C while waiting: kill, then re-raise
                _kill_group(proc)
                raise
        # Children (Python backend stubs, MPI ranks) share the group; make sure none survive.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.returncode

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
