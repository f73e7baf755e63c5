"""A managed vLLM server (OpenAI-compatible HTTP) for one ``server: vllm`` variant.

The process is ``<deploy.vllm_python> -m vllm.entrypoints.launchers.api_server.entry …``
(:func:`~trtbench.vllm_server.args.serve_argv`), started in its own session so that
:meth:`VllmServer.stop` reaches the API server and its engine-core and worker processes with
one signal to the group. It binds 127.0.0.1 on a given (checked free) or picked port; its
stdout and stderr are appended to ``RUN_DIR/server/<variant>.log``, one header line per start.
Ready means ``GET /health`` answers 200 and ``GET /v1/models`` lists the variant's name; a
process that exits first, or a timeout, is a one-line :class:`ServerStartError` carrying the
log's last error.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from trtbench.errors import ServerStartError
from trtbench.run_dir import RunDir
from trtbench.spec import BenchSpec, ModelsSpec, VariantSpec
from trtbench.spec_serving import resolve_vllm_python
from trtbench.triton_repo.ports import free_port, port_in_use
from trtbench.triton_repo.server_log import read_since
from trtbench.vllm_server.args import VllmSettings, serve_argv

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
START_ATTEMPTS = 3
# vLLM's own log prefix: "(EngineCore pid=12) ERROR 12-02 07:36:45 [file.py:953] message".
_PREFIX = re.compile(
    r"^(\(\S+ pid=\d+\)\s+)?(ERROR|WARNING|INFO|DEBUG)?\s*[\d-]+ [\d:]+ \[[^\]]+\]\s*"
)
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit)):\s*\S")
_GENERIC = ("See root cause above", "Engine core initialization failed")
# Telemetry off: the server must not reach out from a benchmark host.
QUIET_ENV = {
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "PYTHONUNBUFFERED": "1",
}


@dataclass(frozen=True)
class VllmServerConfig:
    """What to serve and how.

    Attributes:
        python: the interpreter with vLLM (``deploy.vllm_python``, resolved).
        variant: the ``server: vllm`` variant; its name is the served model name.
        models: the spec's model directories.
        log_path: file that receives the server's stdout and stderr.
        port: fixed HTTP port (None: pick a free one).
        ready_timeout_s: seconds to wait for readiness.
        settings: KV cache, seed and extra flags.
    """

    python: Path
    variant: VariantSpec
    models: ModelsSpec
    log_path: Path
    port: int | None = None
    ready_timeout_s: float = 300.0
    settings: VllmSettings = field(default_factory=VllmSettings)

    @classmethod
    def from_spec(
        cls,
        spec: BenchSpec,
        variant: VariantSpec,
        run_dir: RunDir,
        port: int | None = None,
    ) -> VllmServerConfig:
        """The config of ``variant`` in ``spec``, logging to ``run_dir.server_log(name)``.

        Raises:
            ConfigError: no usable ``deploy.vllm_python`` (says how to make one).
        """
        deploy = spec.deploy
        return cls(
            python=resolve_vllm_python(deploy.vllm_python),
            variant=variant,
            models=spec.models,
            log_path=run_dir.server_log(variant.name),
            port=port,
            ready_timeout_s=deploy.ready_timeout_s,
            settings=VllmSettings(
                deploy.vllm_kv_cache_gib, spec.loadtest.seed, tuple(deploy.vllm_args)
            ),
        )


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str, timeout_s: float) -> tuple[str | None, bytes]:
    """(None, body) when ``url`` answers 200, else (why not, b""); never raises."""
    try:
        with _DIRECT.open(url, timeout=timeout_s) as resp:
            body = resp.read()
            return (
                None if resp.status == 200 else f"HTTP {resp.status} from {url}"
            ), body
    except urllib.error.HTTPError as exc:
        exc.close()
        return f"HTTP {exc.code} from {url}", b""
    except Exception as exc:  # refused, reset, timeout: every failure is an answer
        reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        return f"no HTTP answer from {url} within {timeout_s:g} s: {reason}", b""


def last_error(text: str) -> str:
    """The line of a vLLM log that best says why it failed (pure).

    Python exception lines (``ValueError: …``), with vLLM's ``(Proc pid=N) ERROR date
    [file:line]`` prefix removed; the last one that is not the generic "Engine core
    initialization failed. See root cause above" wins, else the last ``ERROR`` line, else
    ``no error lines in the log since its start``. At most 300 characters.
    """
    exceptions: list[str] = []
    errors: list[str] = []
    for line in text.splitlines():
        message = _PREFIX.sub("", line).strip()
        if _EXCEPTION.match(message):
            exceptions.append(message)
        elif " ERROR " in line and message:
            errors.append(message)
    specific = [m for m in exceptions if not any(g in m for g in _GENERIC)]
    found = specific or exceptions or errors
    return found[-1][:300] if found else "no error lines in the log since its start"


def _exit_text(code: int | None) -> str:
    if code is None or code >= 0:
        return f"exited with code {code}"
    with contextlib.suppress(ValueError):
        return f"exited with code {code} (signal {signal.Signals(-code).name})"
    return f"exited with code {code} (signal {-code})"


class VllmServer:
    """Context manager around one vLLM server process (and its process group).

    Example::

        with VllmServer(VllmServerConfig.from_spec(spec, variant, run_dir)) as server:
            httpx.post(f"{server.base_url}/completions", json={"model": server.model_name, …})

    Raises (on enter):
        ServerStartError: a fixed port in use, the process exited or was not ready in time;
            one line with the log's last error and the log's path.
        ConfigError: the variant cannot be mapped (see ``args.py``).
    """

    def __init__(
        self, config: VllmServerConfig, environ: Mapping[str, str] | None = None
    ):
        self.config = config
        self._environ = {**(os.environ if environ is None else environ), **QUIET_ENV}
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.argv: list[str] = []
        self._log_offset = 0
        self._started = False

    @property
    def model_name(self) -> str:
        """The name clients send as ``model``: the variant's name."""
        return self.config.variant.name

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (RuntimeError before the server is started)."""
        return f"{self._root()}/v1"

    @property
    def metrics_url(self) -> str:
        """``http://127.0.0.1:PORT/metrics``: vLLM's Prometheus counters."""
        return f"{self._root()}/metrics"

    def _root(self) -> str:
        if self.port is None:
            raise RuntimeError("the vLLM server has not been started")
        return f"http://{HOST}:{self.port}"

    def start(self) -> VllmServer:
        """Launch the server and block until it is ready.

        Raises:
            RuntimeError: this object already started a server (a second start would
                orphan or shadow it; make a new :class:`VllmServer`).
            ServerStartError, ConfigError: see the class.
        """
        if self._started:
            raise RuntimeError(
                f"vLLM server for {self.model_name} was already started (pid "
                f"{self.process.pid if self.process else None}); make a new VllmServer"
            )
        self._started = True
        cfg = self.config
        cfg.log_path.parent.mkdir(parents=True, exist_ok=True)
        if cfg.port is not None and port_in_use(cfg.port, HOST):
            raise ServerStartError(
                f"vLLM port {cfg.port} is already in use on {HOST}; stop what listens there "
                "or leave the port out to pick a free one"
            )
        for attempt in range(1, START_ATTEMPTS + 1):
            self.port = cfg.port or free_port(HOST)
            self.argv = serve_argv(
                cfg.python, cfg.variant, cfg.models, self.port, cfg.settings
            )
            self._launch(attempt)
            try:
                self._wait_ready()
                return self
            except _PortTaken:
                self.stop()
                if cfg.port is not None or attempt == START_ATTEMPTS:
                    raise self._failure("could not bind its port") from None
                log.info("a picked port was taken; retrying with another")
            except BaseException:
                self.stop()
                raise
        return self

    def _launch(self, attempt: int) -> None:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        header = f"==== trtbench: vllm start {stamp} (attempt {attempt}): {shlex.join(self.argv)} ====\n"
        with open(self.config.log_path, "ab") as log_file:
            log_file.write(header.encode())
            log_file.flush()
            self._log_offset = log_file.tell()
            self.process = subprocess.Popen(  # noqa: S603 - argv built by serve_argv
                self.argv,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=self._environ,
                start_new_session=True,
                cwd=self.config.log_path.parent,
            )
        log.info(
            "vLLM pid %d on port %d, log %s",
            self.process.pid,
            self.port,
            self.config.log_path,
        )

    def log_reason(self) -> str:
        """The log's last error since the latest start (see :func:`last_error`); never raises."""
        try:
            return last_error(read_since(self.config.log_path, self._log_offset))
        except Exception as exc:  # a reason must never fail the caller
            return f"log unreadable: {exc}"

    def _failure(self, what: str) -> ServerStartError:
        return ServerStartError(
            f"vLLM server for variant {self.model_name} {what}: {self.log_reason()} "
            f"(log: {self.config.log_path})"
        )

    def _wait_ready(self) -> None:
        cfg = self.config
        deadline = time.monotonic() + cfg.ready_timeout_s
        waiting = "/health"
        while time.monotonic() < deadline:
            proc = self.process
            if proc is None or proc.poll() is not None:
                text = read_since(cfg.log_path, self._log_offset)
                if "Address already in use" in text:
                    raise _PortTaken
                code = None if proc is None else proc.returncode
                raise self._failure(f"{_exit_text(code)} before it was ready")
            if _get(f"{self._root()}/health", 2.0)[0] is None:
                waiting = "/v1/models"
                not_ok, body = _get(f"{self.base_url}/models", 2.0)
                if not_ok is None and self.model_name in _model_ids(body):
                    return
            time.sleep(0.5)
        raise self._failure(
            f"was not ready after {cfg.ready_timeout_s:g} s (waiting for {waiting}; raise "
            "deploy.ready_timeout_s if the model loads or compiles slowly)"
        )

    def health(self, timeout_s: float = 0.5) -> str | None:
        """None when the process runs and ``/health`` answers 200 within ``timeout_s``, else
        one line saying why (``vLLM server exited with code -9 (signal SIGKILL): <last error>
        (log: PATH)``). Never raises; safe from another thread."""
        try:
            proc = self.process
            if proc is None or self.port is None:
                return "vLLM server has not been started"
            if proc.poll() is None:
                not_ok = _get(f"{self._root()}/health", timeout_s)[0]
                if not_ok is None:
                    return None
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=min(0.1, timeout_s))
                if proc.returncode is None:
                    return f"vLLM server is not healthy ({not_ok})"
            return (
                f"vLLM server {_exit_text(proc.returncode)}: {self.log_reason()} "
                f"(log: {self.config.log_path})"
            )
        except Exception as exc:  # never raise into a load generator's watchdog
            return f"vLLM health check failed: {type(exc).__name__}: {exc}"

    def stop(self, grace_s: float = 20.0) -> int | None:
        """SIGTERM the server, SIGKILL its whole process group after ``grace_s`` (and always
        at the end, so no engine-core or worker process outlives it); return the exit code.

        The API server shuts its engine core down on SIGTERM itself; signalling the group at
        once would leave it waiting on children already gone.
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
                    "vLLM did not exit %.0f s after SIGTERM; killed it", grace_s
                )
            finally:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.returncode

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _PortTaken(Exception):
    """A picked port was taken before vLLM bound it (retry with another)."""


def _model_ids(body: bytes) -> list[str]:
    """The ``id`` of every model a ``/v1/models`` answer lists ([] when unreadable)."""
    try:
        data = json.loads(body).get("data", [])
        return [m.get("id") for m in data if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return []
