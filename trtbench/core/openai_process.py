"""A managed OpenAI-compatible HTTP server process (vLLM's ``vllm serve``, TensorRT-LLM's
``trtllm-serve``): one port on 127.0.0.1, ready when ``GET /health`` answers 200 and
``GET /v1/models`` lists the served name, stopped as a process group.

:class:`OpenAIServerProcess` is the part both servers share; a subclass gives its command
line (:meth:`~OpenAIServerProcess._command`), the name clients send (``model_name``), its
Prometheus URL (``metrics_url``), how its log says why it failed (``_reason_in``) and what a
message calls it (``_failure_subject``), plus its :class:`ProcessWording` and ``port_label``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from trtbench.core.errors import ServerStartError
from trtbench.core.managed_process import ManagedProcess, http_get
from trtbench.core.tcp_ports import free_port, port_in_use

HOST = "127.0.0.1"


def model_ids(body: bytes) -> list[str]:
    """The ``id`` of every model a ``/v1/models`` answer lists ([] when unreadable)."""
    try:
        data = json.loads(body).get("data", [])
        return [m.get("id") for m in data if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return []


class OpenAIServerProcess(ManagedProcess):
    """Context manager around one OpenAI-compatible server process (and its group).

    Args:
        log_path: file that receives the server's stdout and stderr.
        ready_timeout_s: seconds to wait for readiness.
        port: fixed HTTP port (None: a free one is picked at each start attempt).
        environ: the environment (default ``os.environ``), ``quiet_env`` laid over it.
        quiet_env: variables that keep the server from reaching out (telemetry off).

    Raises (on enter):
        ServerStartError: a fixed port in use, the process exited or was not ready in time;
            one line with the log's last error and the log's path.
    """

    port_label = "server"  # a fixed port's owner in messages ("vLLM port 8000 …")

    def __init__(
        self,
        log_path: Path,
        ready_timeout_s: float,
        port: int | None,
        environ: Mapping[str, str] | None,
        quiet_env: Mapping[str, str],
    ) -> None:
        super().__init__(log_path, ready_timeout_s)
        self.fixed_port = port
        self._environ = {**(os.environ if environ is None else environ), **quiet_env}
        self.port: int | None = None
        self._started = False

    @property
    def model_name(self) -> str:
        """The name clients send as ``model`` (the subclass's)."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (RuntimeError before the server is started)."""
        return f"{self._root()}/v1"

    def _root(self) -> str:
        if self.port is None:
            raise RuntimeError(f"{self.wording.label} has not been started")
        return f"http://{HOST}:{self.port}"

    def _command(self, port: int) -> list[str]:
        """The command line that serves on ``port`` (the subclass's)."""
        raise NotImplementedError

    def start(self) -> OpenAIServerProcess:
        """Launch the server and block until it is ready.

        Raises:
            RuntimeError: this object already started a server (a second start would
                orphan or shadow it; make a new one).
            ServerStartError: see the class.
        """
        if self._started:
            raise RuntimeError(
                f"{self._failure_subject()} was already started (pid "
                f"{self.process.pid if self.process else None}); make a new "
                f"{type(self).__name__}"
            )
        self._started = True
        port = self.fixed_port
        if port is not None and port_in_use(port, HOST):
            raise ServerStartError(
                f"{self.port_label} port {port} is already in use on {HOST}; stop what "
                "listens there or leave the port out to pick a free one"
            )
        self._start_attempts(port is not None, "/health")
        return self

    def stop(self, grace_s: float = 20.0) -> int | None:
        """SIGTERM the server, SIGKILL its whole process group after ``grace_s`` (and always
        at the end, so no engine or worker process outlives it); return the exit code.

        The server shuts its own engine down on SIGTERM; signalling the group at once would
        leave it waiting on children already gone.
        """
        return self._stop_group(grace_s)

    # --- the hooks of ManagedProcess ------------------------------------------------------

    def _next_argv(self) -> list[str]:
        self.port = self.fixed_port or free_port(HOST)
        return self._command(self.port)

    def _launch_env(self) -> dict[str, str]:
        return self._environ

    def _waiting_for(self) -> str | None:
        """``/health`` until it answers 200, then ``/v1/models`` until it lists the model."""
        if http_get(f"{self._root()}/health", 2.0)[0] is not None:
            return "/health"
        not_ok, body = http_get(f"{self.base_url}/models", 2.0)
        if not_ok is None and self.model_name in model_ids(body):
            return None
        return "/v1/models"

    def _health_url(self) -> str | None:
        """``/health`` (None before a start)."""
        return None if self.port is None else f"{self._root()}/health"
