"""The serving stacks and build backends trtbench runs, each named once and described once.

A variant's ``server`` is one of :data:`SERVERS` and its ``backend`` one of :data:`BACKENDS`
(the spec's ``Server`` and ``Backend`` literals hold the same names). Modules name them by
these constants, never by a string of their own (``tests/unit/core/test_methods.py`` reads
every module's syntax tree for a comparison with a literal), so a typo is an import error.

What a server or backend is, callers ask its record (:func:`server`, :func:`backend`: a
:class:`Server` or :class:`Backend`) instead of comparing its name
(``tests/unit/core/test_stacks.py`` refuses such a comparison outside this module): which
protocol it speaks, whether trtbench writes it a Triton model repository, which backends it
serves, whether a build makes TensorRT engines or an LLM-API plan. The functions that
start a server, build a variant or render its repository are named as lazy
``module:function`` paths (:func:`load`), so this ground floor imports nothing above it.

A server trtbench does not start (SGLang, any other OpenAI-compatible server) is no server
here: ``trtbench loadtest --api openai-chat|openai-completions --url`` measures it as it
runs (``profiling/loadtest/clients/target.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from trtbench.core.errors import ConfigError

TRITON, VLLM, TRTLLM_SERVE = "triton", "vllm", "trtllm-serve"
"""Servers: trtbench's Triton model repository in tritonserver, ``vllm serve``, and
TensorRT-LLM's own OpenAI server."""
SERVERS = (TRITON, VLLM, TRTLLM_SERVE)

REFERENCE, TRTLLM, TRTLLM_PYTORCH = "reference", "trtllm", "trtllm-pytorch"
"""Build backends: trtbench's PyTorch engine, TensorRT engines (``trtllm-build``), and
TensorRT-LLM's LLM API (its PyTorch backend)."""
BACKENDS = (REFERENCE, TRTLLM, TRTLLM_PYTORCH)

ClientProtocol = Literal["triton-grpc", "openai"]
Record = TypeVar("Record")


@dataclass(frozen=True)
class Server:
    """One serving stack (a variant's ``server``).

    Attributes:
        name: the spec's ``server`` value (build.json and the CSVs hold it too).
        label: its name in prose (``vLLM``).
        protocol: what the load test speaks to it: Triton's gRPC (``triton-grpc``) or an
            OpenAI-compatible HTTP API (``openai``).
        model_repository: trtbench writes a Triton model repository for the variant and
            tritonserver serves it; its models run the build (the reference engine, the
            engines, or the LLM-API plan with ``deploy.llmapi_runtime``), so the
            ``handicap`` and ``llmapi_runtime`` apply.
        backends: the backends whose builds it serves; the first is the one a refusal
            suggests.
        own_engine: it loads ``models.*`` into an engine of its own and maps the variant
            onto that engine's options (vLLM's ``--speculative-config``); the build only
            checks the directories, so the backend's per-method checks do not apply.
        llmapi_counters: its variant's LLM-API plan turns on TensorRT-LLM's speculative
            counters (``COUNTER_OPTIONS``), which the load test reads from the server.
        executable: the ``deploy`` field naming the program that runs it
            (``tritonserver``, ``vllm_python``, ``trtllm_serve``).
        launch: ``module:function`` making a (not yet started) OpenAI server of a built
            variant, ``(run_dir, variant, spec, port=None) -> server``; None: tritonserver,
            started from the variant's model repository (``pipeline/deploy.py``).
        tokenizer_dir: ``module:function`` of the tokenizer directory the build recorded,
            ``(run_dir, variant) -> Path``; None: the repository's metadata names it.
        describe: ``module:function`` of the line ``trtbench deploy`` prints for a variant
            it writes no repository for (the command that serves it), ``(run_dir, variant,
            spec) -> str``; None: it writes the repository and describes that.
    """

    name: str
    label: str
    protocol: ClientProtocol
    model_repository: bool
    backends: tuple[str, ...]
    own_engine: bool = False
    llmapi_counters: bool = False
    executable: str = ""
    launch: str | None = None
    tokenizer_dir: str | None = None
    describe: str | None = None


@dataclass(frozen=True)
class Backend:
    """One build backend (a variant's ``backend``).

    Attributes:
        name: the spec's ``backend`` value (build.json's ``backend``).
        reference_engine: it builds for trtbench's own PyTorch engine (Hugging Face
            directories run as they are; on a machine without a GPU, on its CPU).
        engines: it builds TensorRT engines (``trtllm-build``, the engine path).
        llmapi: it writes a TensorRT-LLM LLM-API plan (``llm_api.yaml``) that TensorRT-LLM
            (or, behind Triton with ``llmapi_runtime: reference``, the reference engine) runs.
        build: ``module:function`` of its build function, ``(spec, variant, out, *,
            dry_run, describe) -> BuildManifest``.
        repository: ``module:function`` rendering its Triton repository, ``(manifest,
            engine_dir, deploy) -> {path: text}``.
    """

    name: str
    reference_engine: bool
    engines: bool
    llmapi: bool
    build: str
    repository: str

    @property
    def tensorrt_llm(self) -> bool:
        """Whether its build is TensorRT-LLM's (engines or an LLM-API plan): checked against
        a TensorRT-LLM contract, launched with ``mpirun`` across several GPUs."""
        return self.engines or self.llmapi


SERVER_STACKS: dict[str, Server] = {
    s.name: s
    for s in (
        Server(
            TRITON,
            "Triton",
            "triton-grpc",
            model_repository=True,
            backends=BACKENDS,
            executable="tritonserver",
        ),
        Server(
            VLLM,
            "vLLM",
            "openai",
            model_repository=False,
            backends=(REFERENCE,),
            own_engine=True,
            executable="vllm_python",
            launch="trtbench.pipeline.vllm_deploy:vllm_server_for",
            tokenizer_dir="trtbench.pipeline.vllm_deploy:vllm_tokenizer_dir",
            describe="trtbench.pipeline.vllm_deploy:describe_vllm",
        ),
        Server(
            TRTLLM_SERVE,
            "trtllm-serve",
            "openai",
            model_repository=False,
            backends=(TRTLLM_PYTORCH,),
            llmapi_counters=True,
            executable="trtllm_serve",
            launch="trtbench.pipeline.trtllm_deploy:trtllm_server_for",
            tokenizer_dir="trtbench.pipeline.trtllm_deploy:trtllm_tokenizer_dir",
            describe="trtbench.pipeline.trtllm_deploy:describe_trtllm_serve",
        ),
    )
}
"""Every server by name, in :data:`SERVERS` order."""

BACKEND_STACKS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            REFERENCE,
            reference_engine=True,
            engines=False,
            llmapi=False,
            build="trtbench.builders.reference.build:build_reference_variant",
            repository="trtbench.triton_repo.render:render_reference",
        ),
        Backend(
            TRTLLM,
            reference_engine=False,
            engines=True,
            llmapi=False,
            build="trtbench.builders.trtllm.backend:build_trtllm_variant",
            repository="trtbench.triton_repo.render_trtllm:render_trtllm",
        ),
        Backend(
            TRTLLM_PYTORCH,
            reference_engine=False,
            engines=False,
            llmapi=True,
            build="trtbench.builders.trtllm.llmapi_build:build_llmapi_variant",
            repository="trtbench.triton_repo.render_llmapi:render_llmapi",
        ),
    )
}
"""Every backend by name, in :data:`BACKENDS` order."""


def server(name: str) -> Server:
    """The :class:`Server` called ``name`` (a variant's ``server``).

    Raises:
        ConfigError: ``name`` is no server (one line naming the known ones).
    """
    return _named(SERVER_STACKS, "server", name)


def backend(name: str) -> Backend:
    """The :class:`Backend` called ``name`` (a variant's or build.json's ``backend``).

    Raises:
        ConfigError: ``name`` is no backend (one line naming the known ones).
    """
    return _named(BACKEND_STACKS, "backend", name)


def _named(table: dict[str, Record], kind: str, name: str) -> Record:
    if name not in table:
        raise ConfigError(f"{kind} {name!r} is unknown; use one of {', '.join(table)}")
    return table[name]


def has(kind: Literal["server", "backend"], name: object, fact: str) -> bool:
    """Whether the server (``kind="server"``) or backend called ``name`` has ``fact``, a
    boolean attribute of its record; False where ``name`` is none of them (a CSV row's
    missing value, a name this version does not know)."""
    table = SERVER_STACKS if kind == "server" else BACKEND_STACKS
    record = table.get(name) if isinstance(name, str) else None
    return bool(getattr(record, fact, False))


def load(path: str) -> Callable[..., Any]:
    """The function a ``module:function`` path names (:attr:`Server.launch`,
    :attr:`Backend.build`, ...), its module imported now.

    Raises:
        ImportError, AttributeError: the path names nothing (a bug of this module).
    """
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)
