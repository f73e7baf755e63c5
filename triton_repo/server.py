"""A managed ``tritonserver`` process: start it, wait until ready, stop it.

The binary is found by :func:`~trtbench.triton_repo.binary.find_tritonserver` (its search
order, including the nvidia-pytriton wheel with the libpython fix). Ports are the ones given
(checked free) or picked free; if a picked port is taken between the check and the bind, the
start is retried with new ports. For TP×PP > 1 (TensorRT-LLM in an NGC image) the server
runs under ``mpirun`` as one MPMD segment per rank, the way ``launch_triton_server.py``
(NVIDIA/TensorRT-LLM ``triton_backend/scripts/``) builds it: every rank gets its own
Python-backend shared-memory prefix and ``--disable-auto-complete-config``; ranks > 0 load
only the TensorRT-LLM models.

Every service binds ``ServerConfig.bind_address`` (default ``127.0.0.1``: this host only); a
wider address logs a warning. Clients dial :func:`~trtbench.triton_repo.ports.dial_host` of it
(``grpc_url`` …), never ``localhost``. The log is appended to, one header line per start;
reasons for a failure come only from what was written since the latest start.

The process handling is :class:`~trtbench.core.managed_process.ManagedProcess`: the process runs in
its own session; :meth:`TritonServer.stop` signals the whole process group (SIGTERM, then
SIGKILL after a grace period), so no child (Python stubs, MPI ranks) outlives a run. Errors
are one line and carry the log lines that say why.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trtbench.core.errors import ServerStartError
from trtbench.core.managed_process import ManagedProcess, ProcessWording, http_get
from trtbench.triton_repo.binary import (
    TritonBinary,
    find_tritonserver,
    mpirun_argv,
    prepare_backend_dir,
    server_argv,
    server_env,
)
from trtbench.triton_repo.ports import (
    DEFAULT_BIND_ADDRESS,
    Ports,
    choose_ports,
    dial_host,
    is_loopback,
)
from trtbench.triton_repo.server_log import HEADER, log_reason

log = logging.getLogger(__name__)

WORDING = ProcessWording(
    label="tritonserver",
    header=HEADER,
    not_serving="is not ready",
    port_taken=("already in use", "Address already in use"),
    ports="its ports",
    retry_with="new ports",
    slow="models load slowly",
    poll_s=0.25,
    # A Python-backend model can hang in its start on a loaded host: initialize() has
    # returned, the stub and the server wait on each other and use no CPU (seen under a
    # CPU burner; triton-inference-server/server#5211 and python_backend#408 are kin).
    stall_s=60.0,
)


@dataclass(frozen=True)
class ServerConfig:
    """What to serve and how.

    Attributes:
        model_repo: the Triton model repository.
        log_path: file that receives the server's stdout and stderr.
        tritonserver: explicit binary (else searched, see ``binary.py``).
        grpc_port, http_port, metrics_port: fixed ports (None: pick free ones).
        bind_address: IP literal every service binds (``--grpc-address``,
            ``--http-address``, ``--metrics-address``); ``127.0.0.1`` serves this host only.
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
    bind_address: str = DEFAULT_BIND_ADDRESS
    models: tuple[str, ...] = ()
    ready_timeout_s: float = 300.0
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    world_size: int = 1
    tensorrt_llm_models: tuple[str, ...] = ()
    mpirun: str = "mpirun"
    wrapper_argv: tuple[str, ...] = ()


class TritonServer(ManagedProcess):
    """Context manager around one tritonserver process (or one mpirun of ranks).

    Example::

        with TritonServer(ServerConfig(repo, log, models=("ensemble",))) as server:
            client = grpcclient.InferenceServerClient(server.grpc_url)

    Ready means ``/v2/health/ready`` and ``/v2/models/M/ready`` of every ``config.models``
    answer 200; :meth:`health` asks ``/v2/health/ready`` (``tritonserver is not ready (HTTP
    503 from URL)``, ``tritonserver exited with code -9 (signal SIGKILL): <log errors since
    its latest start> (log: PATH)``).

    Raises (on enter):
        ServerStartError: binary or mpirun missing, port in use, process exit or timeout
            before ready; one line with the log lines that say why and the log's path.
    """

    wording = WORDING

    def __init__(self, config: ServerConfig, environ: Mapping[str, str] | None = None):
        super().__init__(config.log_path, config.ready_timeout_s)
        self.config = config
        self._environ = dict(os.environ if environ is None else environ)
        self.ports: Ports | None = None
        self.binary: TritonBinary | None = None

    @property
    def dial_host(self) -> str:
        """The host clients dial: ``127.0.0.1`` (also for 0.0.0.0), ``[::1]`` (also for ::)."""
        return dial_host(self.config.bind_address)

    @property
    def grpc_url(self) -> str:
        """``HOST:PORT`` for gRPC clients (RuntimeError before the server is started)."""
        return f"{self.dial_host}:{self._ports().grpc}"

    @property
    def http_url(self) -> str:
        """``http://HOST:PORT`` (RuntimeError before the server is started)."""
        return f"http://{self.dial_host}:{self._ports().http}"

    @property
    def metrics_url(self) -> str:
        """``http://HOST:PORT/metrics`` (RuntimeError before the server is started)."""
        return f"http://{self.dial_host}:{self._ports().metrics}/metrics"

    def _ports(self) -> Ports:
        if self.ports is None:
            raise RuntimeError("the server has not been started")
        return self.ports

    def build_argv(self, binary: TritonBinary, ports: Ports) -> list[str]:
        """The full command line for ``ports`` (mpirun MPMD when world_size > 1), behind
        ``config.wrapper_argv`` when one is set."""
        cfg = self.config
        backend_dir = prepare_backend_dir(
            binary, (cfg.log_path.parent / "backends").resolve()
        )
        argv = server_argv(
            binary.path,
            Path(cfg.model_repo).resolve(),  # the server runs in the log's folder
            ports,
            backend_dir,
            cfg.extra_args,
            bind_address=cfg.bind_address,
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
        """Launch the process and block until it (and ``config.models``) are ready.

        Logs a WARNING when ``config.bind_address`` is not a loopback address.

        Raises:
            ServerStartError: see the class; also equal given ports, or a bind address
                that is not an IP literal.
            RuntimeError: this server is already running (a second launch would orphan it).
        """
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(
                f"tritonserver pid {self.process.pid} is already running"
            )
        cfg = self.config
        if not is_loopback(cfg.bind_address):
            log.warning(
                "tritonserver binds %s (--bind-address / deploy.bind_address): anyone who "
                "can reach this host on its ports can send it requests",
                cfg.bind_address,
            )
        self.binary = find_tritonserver(cfg.tritonserver, self._environ)
        fixed = None not in (cfg.grpc_port, cfg.http_port, cfg.metrics_port)
        self._start_attempts(fixed, ", ".join(["server", *cfg.models]))
        return self

    def stop(self, grace_s: float = 15.0) -> int | None:
        """SIGTERM the server, SIGKILL its process group after ``grace_s``; return the exit code.

        Only the leader (tritonserver, or the mpirun / nsys wrapper in front of it) gets
        SIGTERM: tritonserver unloads its models and stops the Python backend stubs itself.
        Signalling the stubs at the same moment leaves Triton waiting for models whose stub
        is already gone ("Found 1 live models") until the grace period runs out. Children
        (Python backend stubs, MPI ranks) share the group: none survives.
        """
        return self._stop_group(grace_s)

    # --- the hooks of ManagedProcess ------------------------------------------------------

    def _next_argv(self) -> list[str]:
        cfg = self.config
        self.ports = choose_ports(
            cfg.grpc_port, cfg.http_port, cfg.metrics_port, host=cfg.bind_address
        )
        assert self.binary is not None  # found by start()
        return self.build_argv(self.binary, self.ports)

    def _launch_env(self) -> dict[str, str]:
        assert self.binary is not None  # found by start()
        return server_env(self.binary, self._environ)

    def _ready_urls(self) -> dict[str, str]:
        """``{"server": …/v2/health/ready, MODEL: …/v2/models/MODEL/ready, …}``
        (RuntimeError before the server is started)."""
        urls = {"server": f"{self.http_url}/v2/health/ready"}
        return urls | {
            m: f"{self.http_url}/v2/models/{m}/ready" for m in self.config.models
        }

    def _waiting_for(self) -> str | None:
        urls = self._ready_urls()
        if "--allow-metrics=false" not in self.config.extra_args:
            # Triton opens its metrics port after HTTP and gRPC: a scraper started at
            # "ready" found it refusing connections.
            urls["metrics"] = self.metrics_url
        waiting = [name for name, url in urls.items() if http_get(url, 2.0)[0]]
        return ", ".join(waiting) or None

    def _health_url(self) -> str | None:
        """``/v2/health/ready`` (None before a start)."""
        return None if self.ports is None else self._ready_urls()["server"]

    def _reason_in(self, text: str) -> str:
        """The error lines logged since the latest start, joined with ``; ``."""
        return log_reason(text)
