"""A managed vLLM server (OpenAI-compatible HTTP) for one ``server: vllm`` variant.

The process is ``<deploy.vllm_python> -m vllm.entrypoints.launchers.api_server.entry …``
(:func:`~trtbench.vllm_server.args.serve_argv`), started in its own session so that
:meth:`VllmServer.stop` reaches the API server and its engine-core and worker processes with
one signal to the group. It binds 127.0.0.1 on a given (checked free) or picked port; its
stdout and stderr are appended to ``RUN_DIR/server/<variant>.log``, one header line per start.
Ready means ``GET /health`` answers 200 and ``GET /v1/models`` lists the variant's name; a
process that exits first, or a timeout, is a one-line :class:`ServerStartError` carrying the
log's last error. The process handling is :class:`~trtbench.core.openai_process.OpenAIServerProcess`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trtbench.core.managed_process import NO_ERROR_LINES, ProcessWording
from trtbench.core.openai_process import OpenAIServerProcess
from trtbench.core.run_dir import RunDir
from trtbench.spec.bench import BenchSpec, ModelsSpec, VariantSpec
from trtbench.spec.serving import resolve_vllm_python
from trtbench.vllm_server.args import VllmSettings, serve_argv

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
WORDING = ProcessWording(
    label="vLLM server",
    header="trtbench: vllm",
    not_serving="is not healthy",
    port_taken=("Address already in use",),
    ports="its port",
    retry_with="another",
    slow="the model loads or compiles slowly",
    poll_s=0.5,
)


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
    return found[-1][:300] if found else NO_ERROR_LINES


class VllmServer(OpenAIServerProcess):
    """Context manager around one vLLM server process (and its process group).

    Example::

        with VllmServer(VllmServerConfig.from_spec(spec, variant, run_dir)) as server:
            httpx.post(f"{server.base_url}/completions", json={"model": server.model_name, …})

    Raises (on enter):
        ServerStartError: a fixed port in use, the process exited or was not ready in time;
            one line with the log's last error and the log's path.
        ConfigError: the variant cannot be mapped (see ``args.py``).
    """

    wording = WORDING
    port_label = "vLLM"

    def __init__(
        self, config: VllmServerConfig, environ: Mapping[str, str] | None = None
    ):
        super().__init__(
            config.log_path, config.ready_timeout_s, config.port, environ, QUIET_ENV
        )
        self.config = config

    @property
    def model_name(self) -> str:
        """The name clients send as ``model``: the variant's name."""
        return self.config.variant.name

    @property
    def metrics_url(self) -> str:
        """``http://127.0.0.1:PORT/metrics``: vLLM's Prometheus counters."""
        return f"{self._root()}/metrics"

    def _command(self, port: int) -> list[str]:
        cfg = self.config
        return serve_argv(cfg.python, cfg.variant, cfg.models, port, cfg.settings)

    def _reason_in(self, text: str) -> str:
        """:func:`last_error` of the log since the latest start."""
        return last_error(text)

    def _failure_subject(self) -> str:
        return f"vLLM server for variant {self.model_name}"
