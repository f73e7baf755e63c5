"""A managed ``tritonserver`` process: find the binary, start it, wait until ready, stop it.

Binary search order (DESIGN.md "Triton on a CPU machine"): an explicit path, ``$PATH``,
``/opt/tritonserver/bin/tritonserver`` (NGC), then the binary bundled in the
``nvidia-pytriton`` wheel. For the bundled one, a backend directory is assembled whose Python
backend stub matches the running interpreter, and the server starts with ``LD_LIBRARY_PATH`` led
by the interpreter's ``LIBDIR`` and ``PATH`` led by its ``bin/`` (the stub links libpython
dynamically and must load the same patch release as the interpreter's standard library).

The process runs in its own session; :meth:`TritonServer.stop` signals the whole process group
(SIGTERM, then SIGKILL after a grace period), so no child outlives a run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trtbench.errors import ServerStartError

log = logging.getLogger(__name__)

NGC_TRITONSERVER = Path("/opt/tritonserver/bin/tritonserver")
LOG_TAIL_LINES = 20


@dataclass(frozen=True)
class TritonBinary:
    """Where tritonserver was found and how it must be started.

    Attributes:
        path: the executable.
        source: ``explicit`` | ``PATH`` | ``ngc`` | ``pytriton``.
        pytriton_root: for ``pytriton``, the wheel's ``tritonserver/`` folder (backends, stubs).
    """

    path: Path
    source: str
    pytriton_root: Path | None = None


def _pytriton_root() -> Path | None:
    try:
        import pytriton  # noqa: PLC0415 - optional extra
    except ImportError:
        return None
    root = Path(pytriton.__file__).parent / "tritonserver"
    return root if (root / "bin" / "tritonserver").is_file() else None


def find_tritonserver(
    explicit: Path | None = None, environ: Mapping[str, str] | None = None
) -> TritonBinary:
    """Locate tritonserver in DESIGN.md order.

    Raises:
        ServerStartError: nothing found; the message lists where it looked and the fix.
    """
    env = os.environ if environ is None else environ
    if explicit is not None:
        if not (explicit.is_file() and os.access(explicit, os.X_OK)):
            raise ServerStartError(
                f"tritonserver {explicit} is not an executable file; pass --tritonserver PATH "
                "to a Triton server binary"
            )
        return TritonBinary(explicit, "explicit")
    on_path = shutil.which("tritonserver", path=env.get("PATH"))
    if on_path:
        return TritonBinary(Path(on_path), "PATH")
    if NGC_TRITONSERVER.is_file():
        return TritonBinary(NGC_TRITONSERVER, "ngc")
    root = _pytriton_root()
    if root is not None:
        return TritonBinary(root / "bin" / "tritonserver", "pytriton", root)
    raise ServerStartError(
        "tritonserver not found (looked at --tritonserver, $PATH, "
        f"{NGC_TRITONSERVER}, and the nvidia-pytriton wheel); install it with "
        "`pip install 'trtbench[cpu-server]'` or run inside an NGC tritonserver image"
    )


def prepare_backend_dir(binary: TritonBinary, dest: Path) -> Path | None:
    """For the PyTriton binary, assemble ``dest/python`` with the stub for this Python version.

    Returns:
        The backend directory to pass as ``--backend-directory``, or None for other binaries.

    Raises:
        ServerStartError: the wheel has no stub for the running Python version.
    """
    if binary.pytriton_root is None:
        return None
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = (
        binary.pytriton_root
        / "python_backend_stubs"
        / version
        / "triton_python_backend_stub"
    )
    if not stub.is_file():
        raise ServerStartError(
            f"nvidia-pytriton has no Python backend stub for Python {version}; use a Python "
            "version it ships (3.8-3.13) or a tritonserver built for this one"
        )
    python_dir = dest / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    source_dir = binary.pytriton_root / "backends" / "python"
    # Symlinks, not copies: the stub finds its bundled libraries through an $ORIGIN rpath.
    links = {p.name: p for p in source_dir.iterdir() if p.is_file()}
    links["triton_python_backend_stub"] = stub
    for name, target in links.items():
        link = python_dir / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    return dest


def server_env(binary: TritonBinary, base: Mapping[str, str]) -> dict[str, str]:
    """Environment for tritonserver: the libpython fix for the PyTriton binary (pure)."""
    env = dict(base)
    if binary.pytriton_root is not None:
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        libs = binary.pytriton_root.parent.parent / "nvidia_pytriton.libs"
        parts = [libdir, str(libs), env.get("LD_LIBRARY_PATH", "")]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in parts if p)
        bin_dir = str(Path(sys.executable).parent)
        env["PATH"] = os.pathsep.join(p for p in [bin_dir, env.get("PATH", "")] if p)
    return env


@dataclass(frozen=True)
class Ports:
    """gRPC, HTTP and metrics ports of one server."""

    grpc: int
    http: int
    metrics: int


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something already listens on (or holds) ``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def free_port() -> int:
    """A TCP port the OS reports free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def choose_ports(grpc: int | None, http: int | None, metrics: int | None) -> Ports:
    """Use the given ports (checked free) and pick free ones for the rest.

    Raises:
        ServerStartError: a given port is already in use.
    """
    chosen: dict[str, int] = {}
    for name, port in (
        ("grpc_port", grpc),
        ("http_port", http),
        ("metrics_port", metrics),
    ):
        if port is None:
            port = free_port()
            while port in chosen.values():
                port = free_port()
        elif port_in_use(port):
            raise ServerStartError(
                f"{name} {port} is already in use; stop what listens there or choose "
                f"another port (--{name.replace('_', '-')} or deploy.{name})"
            )
        chosen[name] = port
    return Ports(chosen["grpc_port"], chosen["http_port"], chosen["metrics_port"])


@dataclass(frozen=True)
class ServerConfig:
    """What to serve and how.

    Attributes:
        model_repo: the Triton model repository.
        log_path: file that receives the server's stdout and stderr.
        models: models that must be ready before the server counts as started
            (empty: wait for server readiness only).
        ready_timeout_s: seconds to wait for readiness.
        extra_args: more tritonserver flags (``--log-verbose=1`` …).
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


def server_argv(
    binary: Path,
    model_repo: Path,
    ports: Ports,
    backend_dir: Path | None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The tritonserver command line (pure)."""
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


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a text file ('' when absent)."""
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - localhost only
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


class TritonServer:
    """Context manager around one tritonserver process.

    Example::

        with TritonServer(ServerConfig(repo, log)) as server:
            client = grpcclient.InferenceServerClient(server.grpc_url)

    Raises (on enter):
        ServerStartError: binary missing, port in use, process exit or timeout before ready
            (the message carries the last log lines).
    """

    def __init__(self, config: ServerConfig, environ: Mapping[str, str] | None = None):
        self.config = config
        self._environ = dict(os.environ if environ is None else environ)
        self.process: subprocess.Popen[bytes] | None = None
        self.ports: Ports | None = None
        self.argv: list[str] = []

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

    def start(self) -> TritonServer:
        """Launch the process and block until it (and ``config.models``) are ready."""
        cfg = self.config
        binary = find_tritonserver(cfg.tritonserver, self._environ)
        self.ports = choose_ports(cfg.grpc_port, cfg.http_port, cfg.metrics_port)
        cfg.log_path.parent.mkdir(parents=True, exist_ok=True)
        backend_dir = prepare_backend_dir(binary, cfg.log_path.parent / "backends")
        self.argv = server_argv(
            binary.path, cfg.model_repo, self.ports, backend_dir, cfg.extra_args
        )
        log.info("starting %s", " ".join(self.argv))
        with open(cfg.log_path, "wb") as log_file:
            self.process = subprocess.Popen(  # noqa: S603 - argv built above
                self.argv,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=server_env(binary, self._environ),
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        cfg = self.config
        deadline = time.monotonic() + cfg.ready_timeout_s
        urls = [f"{self.http_url}/v2/health/ready"]
        urls += [f"{self.http_url}/v2/models/{m}/ready" for m in cfg.models]
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise ServerStartError(
                    f"tritonserver exited with code {self.process.returncode} before it was "
                    f"ready (log {cfg.log_path}); last lines:\n{tail(cfg.log_path)}"
                )
            if all(_http_ok(u) for u in urls):
                return
            time.sleep(0.25)
        raise ServerStartError(
            f"tritonserver was not ready after {cfg.ready_timeout_s:.0f} s (log "
            f"{cfg.log_path}); raise deploy.ready_timeout_s or read the log; last lines:\n"
            f"{tail(cfg.log_path)}"
        )

    def stop(self, grace_s: float = 15.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; return the exit code."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # Children (python backend stubs) share the group; make sure none survive.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.returncode

    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
