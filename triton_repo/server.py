"""A managed ``tritonserver`` process: start it, wait until ready, stop it.

The binary is found by :func:`~trtbench.triton_repo.binary.find_tritonserver` (DESIGN.md order,
including the nvidia-pytriton wheel with the libpython fix). Ports are the ones given (checked
free) or picked free; if a picked port is taken between the check and the bind, the start is
retried with new ports. For TP×PP > 1 (TensorRT-LLM in an NGC image) the server runs under
``mpirun`` as one MPMD segment per rank, the way ``launch_triton_server.py`` builds it
(research/triton_backend.md §4): every rank gets its own Python-backend shared-memory prefix
and ``--disable-auto-complete-config``; ranks > 0 load only the TensorRT-LLM models.

Every service binds ``ServerConfig.bind_address`` (default ``127.0.0.1``: this host only); a
wider address logs a warning. Clients dial :func:`~trtbench.triton_repo.ports.dial_host` of it
(``grpc_url`` …), never ``localhost``. The log is appended to, one header line per start;
reasons for a failure come only from what was written since the latest start.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trtbench.errors import ServerStartError
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
from trtbench.triton_repo.server_log import log_errors, read_since, start_header

log = logging.getLogger(__name__)

START_ATTEMPTS = 3
_DYING_S = 0.1  # how long health() waits for a process that stopped answering to exit
_PORT_TAKEN = ("already in use", "Address already in use")


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


# No proxy: the server is on this host (or an address given literally), never behind one.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _not_ok(url: str, timeout_s: float) -> str | None:
    """None when ``url`` answers 200 within ``timeout_s``, else why not (never raises)."""
    try:
        with _DIRECT.open(url, timeout=timeout_s) as resp:
            return None if resp.status == 200 else f"HTTP {resp.status} from {url}"
    except urllib.error.HTTPError as exc:
        exc.close()
        return f"HTTP {exc.code} from {url}"
    except Exception as exc:  # URLError, timeouts, resets: every failure is an answer
        reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        return f"no HTTP answer from {url} within {timeout_s:g} s: {reason}"


def _http_ok(url: str) -> bool:
    return _not_ok(url, 2.0) is None


def _exit_text(code: int | None) -> str:
    if code is None or code >= 0:
        return f"exited with code {code}"
    try:
        return f"exited with code {code} (signal {signal.Signals(-code).name})"
    except ValueError:
        return f"exited with code {code} (signal {-code})"


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
        # Byte offset in the log where the latest start's output begins.
        self._log_offset = 0

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
        cfg.log_path.parent.mkdir(parents=True, exist_ok=True)
        fixed = None not in (cfg.grpc_port, cfg.http_port, cfg.metrics_port)
        for attempt in range(1, START_ATTEMPTS + 1):
            self.ports = choose_ports(
                cfg.grpc_port, cfg.http_port, cfg.metrics_port, host=cfg.bind_address
            )
            self.argv = self.build_argv(self.binary, self.ports)
            log.info("starting %s", " ".join(self.argv))
            self._launch(attempt)
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

    def _launch(self, attempt: int) -> None:
        """Append a header to the log, remember where this start's output begins, start."""
        with open(self.config.log_path, "ab") as log_file:
            log_file.write(start_header(attempt, self.argv).encode())
            log_file.flush()
            self._log_offset = log_file.tell()
            self.process = subprocess.Popen(  # noqa: S603 - argv built above
                self.argv,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=server_env(self.binary, self._environ),
                start_new_session=True,
                # Not the user's folder: Python models get the working directory on their
                # import path, and a ./trtbench checkout there would shadow the package.
                cwd=self.config.log_path.parent,
            )
        log.info("tritonserver pid %d, log %s", self.process.pid, self.config.log_path)

    def _log_since_start(self) -> str:
        return read_since(self.config.log_path, self._log_offset)

    def log_reason(self) -> str:
        """The error lines the server logged since its latest start, joined with ``; ``
        (``no error lines in the log since its start`` when there are none). Never raises."""
        try:
            reasons = log_errors(self._log_since_start())
        except Exception as exc:  # a reason must never fail the caller
            return f"log unreadable: {exc}"
        return (
            "; ".join(reasons)
            if reasons
            else "no error lines in the log since its start"
        )

    def health(self, timeout_s: float = 0.5) -> str | None:
        """Whether the server still serves: None when its process runs and
        ``/v2/health/ready`` answers 200 within ``timeout_s`` seconds, else one line saying why.

        ``tritonserver exited with code -9 (signal SIGKILL): <log errors since its latest
        start> (log: PATH)`` or ``tritonserver is not ready (HTTP 503 from URL)``. Cheap (one
        ``waitpid`` and one local HTTP request; the log is read only once it has exited) and
        safe to call from another thread while the server runs. Never raises. A killed
        server may read "not ready" for a moment before it reads "exited".

        Args:
            timeout_s: seconds to wait for the readiness answer; a server that does not
                answer costs up to ``timeout_s`` + 0.1 s (a last wait for its exit).
        """
        try:
            proc, ports = self.process, self.ports
            if proc is None or ports is None:
                return "tritonserver has not been started"
            if proc.poll() is None:
                url = f"http://{self.dial_host}:{ports.http}/v2/health/ready"
                not_ok = _not_ok(url, timeout_s)
                if not_ok is None:
                    return None
                # A killed server refuses connections a moment before it can be reaped.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=min(_DYING_S, timeout_s))
                if proc.returncode is None:  # running: it answers badly, or not at all
                    return f"tritonserver is not ready ({not_ok})"
            return (
                f"tritonserver {_exit_text(proc.returncode)}: {self.log_reason()} "
                f"(log: {self.config.log_path})"
            )
        except Exception as exc:  # never raise into a load generator's watchdog
            return f"tritonserver health check failed: {type(exc).__name__}: {exc}"

    def _failure(self, what: str) -> ServerStartError:
        cfg = self.config
        return ServerStartError(
            f"tritonserver {what}: {self.log_reason()} (log: {cfg.log_path})"
        )

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
                text = self._log_since_start()
                if any(p in text for p in _PORT_TAKEN):
                    raise _PortTaken
                raise self._failure(f"{_exit_text(code)} before it was ready")
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
