"""A managed ``trtllm-serve`` (TensorRT-LLM's OpenAI-compatible server) for one
``server: trtllm-serve`` variant.

The process is ``trtllm-serve MODEL --backend pytorch --host 127.0.0.1 --port PORT FLAG
llm_api.yaml`` (:func:`~trtbench.builders.trtllm.llmapi_plan.serve_argv`; ``FLAG`` is the
version's ``--extra_llm_api_options`` or ``--config``), started in its own session so that
:meth:`TrtllmServer.stop` reaches the server and the MPI workers it spawns with one signal to
the group. It binds 127.0.0.1 on a given (checked free) or picked port; its stdout and stderr
are appended to ``RUN_DIR/server/<variant>.log``, one header line per start.

Ready means, as ``tensorrt_llm/serve/openai_server.py`` answers: ``GET /health`` 200 (the
socket is bound early but refuses connections until the model is loaded; a loaded but
unavailable server answers 503 "LLM is unavailable"), then ``GET /v1/models`` listing the
served name: a ``ModelList`` of one ``ModelCard(id=...)`` whose id is the model directory's
name (``model_dir.name``; the argument as given when it is not a directory). A process that
exits first, or a timeout, is a one-line :class:`ServerStartError` carrying the log's last
error. The process handling is :class:`~trtbench.core.openai_process.OpenAIServerProcess`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trtbench.builders.trtllm.llmapi_plan import serve_argv
from trtbench.core.managed_process import NO_ERROR_LINES, ProcessWording
from trtbench.core.openai_process import HOST, OpenAIServerProcess

# TensorRT-LLM's log prefixes: "[12/04/2026-12:00:00] [TRT-LLM] [E] message" (its Python
# logger) and "[TensorRT-LLM][ERROR] message" (the C++ runtime).
_PREFIX = re.compile(r"^(\[[^\]]*\]\s*)*?\[(TRT-LLM|TensorRT-LLM)\]\s*(\[[A-Z]+\]\s*)?")
_ERROR = re.compile(r"\[(TRT-LLM|TensorRT-LLM)\]\s*\[(E|ERROR)\]")
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit)):\s*\S")
# Telemetry off (tensorrt_llm/commands/_telemetry.py: the opt-out every telemetry API checks,
# inherited by the workers): a benchmark host must not reach out.
QUIET_ENV = {"TRTLLM_NO_USAGE_STATS": "1", "PYTHONUNBUFFERED": "1"}
WORDING = ProcessWording(
    label="trtllm-serve",
    header="trtbench: trtllm-serve",
    not_serving="is not healthy",
    # uvicorn: "[Errno 98] error while attempting to bind on address (...): address
    # already in use"
    port_taken=("address already in use", "Address already in use"),
    ports="its port",
    retry_with="another",
    slow="the model loads or its CUDA graphs are captured slowly",
    poll_s=0.5,
)


def served_model_name(model: Path | str) -> str:
    """The ``id`` trtllm-serve lists on ``/v1/models`` and expects as ``model``: the name
    of ``model`` when it is a directory (``openai_server.py``: ``model_dir.name``), else
    ``model`` as given (a Hugging Face name)."""
    path = Path(model)
    return path.name if path.is_dir() else str(model)


@dataclass(frozen=True)
class TrtllmServeConfig:
    """What to serve and how.

    Attributes:
        executable: the ``trtllm-serve`` executable (``deploy.trtllm_serve``, resolved).
        variant: the variant's name (for messages).
        model: the target model directory (``models.target``), the server's argument.
        options_yaml: the variant's checked ``engines/<variant>/llm_api.yaml``.
        options_flag: the version's option taking it (``--extra_llm_api_options``,
            ``--config``; the contract's ``cli.trtllm-serve.options_flag``).
        log_path: file that receives the server's stdout and stderr.
        port: fixed HTTP port (None: pick a free one).
        ready_timeout_s: seconds to wait for readiness.
    """

    executable: Path
    variant: str
    model: Path
    options_yaml: Path
    options_flag: str
    log_path: Path
    port: int | None = None
    ready_timeout_s: float = 300.0

    def argv(self, port: int) -> list[str]:
        """The command line that serves on ``port`` (127.0.0.1)."""
        return serve_argv(
            self.model,
            self.options_flag,
            self.options_yaml,
            HOST,
            port,
            self.executable,
        )


def last_error(text: str) -> str:
    """The line of a trtllm-serve log that best says why it failed (pure).

    The last Python exception line (``ValueError: …``, TensorRT-LLM's log prefix removed),
    else the last error line (``[TRT-LLM] [E] …``, ``[TensorRT-LLM][ERROR] …``), else ``no
    error lines in the log since its start``. At most 300 characters.
    """
    exceptions: list[str] = []
    errors: list[str] = []
    for line in text.splitlines():
        message = _PREFIX.sub("", line).strip()
        if _EXCEPTION.match(message):
            exceptions.append(message)
        elif _ERROR.search(line) and message:
            errors.append(message)
    found = exceptions or errors
    return found[-1][:300] if found else NO_ERROR_LINES


class TrtllmServer(OpenAIServerProcess):
    """Context manager around one trtllm-serve process (and its process group).

    Example::

        with TrtllmServer(config) as server:
            httpx.post(f"{server.base_url}/completions", json={"model": server.model_name, …})

    Raises (on enter):
        ServerStartError: a fixed port in use, the process exited or was not ready in time;
            one line with the log's last error and the log's path.
    """

    wording = WORDING
    port_label = "trtllm-serve"

    def __init__(
        self, config: TrtllmServeConfig, environ: Mapping[str, str] | None = None
    ):
        super().__init__(
            config.log_path, config.ready_timeout_s, config.port, environ, QUIET_ENV
        )
        self.config = config

    @property
    def model_name(self) -> str:
        """The name clients send as ``model``: :func:`served_model_name` of the target."""
        return served_model_name(self.config.model)

    @property
    def metrics_url(self) -> str:
        """``http://127.0.0.1:PORT/prometheus/metrics``: its Prometheus text (mounted with
        ``return_perf_metrics``). Not ``/metrics``: that one is the iteration stats as JSON,
        emptied by every read, which the load test's counter reader polls."""
        return f"{self._root()}/prometheus/metrics"

    def _command(self, port: int) -> list[str]:
        return self.config.argv(port)

    def _reason_in(self, text: str) -> str:
        """:func:`last_error` of the log since the latest start."""
        return last_error(text)

    def _failure_subject(self) -> str:
        return f"trtllm-serve for variant {self.config.variant}"
