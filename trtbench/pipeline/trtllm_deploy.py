"""Deploy ``server: trtllm-serve`` variants: no Triton repository, a trtllm-serve per variant.

A ``server: trtllm-serve`` variant is built with ``backend: trtllm-pytorch``: its build wrote
the checked ``engines/<variant>/llm_api.yaml`` (with the counter options of
:data:`~trtbench.builders.trtllm.llmapi_plan.COUNTER_OPTIONS` its version's contract lists)
and recorded the TensorRT-LLM version in build.json. Deploying it means checking that YAML
again against that version's contract (a user may edit it after the build) and, to serve,
starting :class:`~trtbench.trtllm_server.server.TrtllmServer` (``deploy.trtllm_serve``,
127.0.0.1, log in ``RUN_DIR/server/<variant>.log``, stopped with its process group). The
load test then drives it over OpenAI completions, as a vLLM variant.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from trtbench.builders.manifest import BuildManifest, read_manifest
from trtbench.builders.trtllm.llmapi_contract import load_llmapi_contract
from trtbench.builders.trtllm.llmapi_files import check_llm_api_yaml
from trtbench.core import stacks
from trtbench.core.errors import DeployError
from trtbench.core.run_dir import RunDir
from trtbench.spec.bench import BenchSpec
from trtbench.spec.serving import TRTLLM_SERVE_BACKEND, resolve_trtllm_serve
from trtbench.trtllm_server.server import (
    TrtllmServeConfig,
    TrtllmServer,
    served_model_name,
)

OPTIONS_NAME = "llm_api.yaml"  # the name builders/trtllm/llmapi_build.py writes
PORT_PLACEHOLDER = 0  # shown as PORT in a described command line


def _built(run_dir: RunDir, variant: str) -> tuple[BuildManifest, dict]:
    """The variant's manifest and its ``tensorrt_llm`` block, checked to be an LLM-API
    build (``backend: trtllm-pytorch`` with a version)."""
    manifest = read_manifest(run_dir.engine_dir(variant))
    block = (manifest.model_extra or {}).get("tensorrt_llm") or {}
    if not stacks.backend(manifest.backend).llmapi or not block.get("version"):
        raise DeployError(
            f"variant {variant} (server: trtllm-serve) was built with backend "
            f"{manifest.backend}, which writes no llm_api.yaml; build it again with "
            f"backend: {TRTLLM_SERVE_BACKEND}"
        )
    return manifest, block


def trtllm_serve_config(
    run_dir: RunDir,
    variant: str,
    spec: BenchSpec,
    port: int | None = None,
    *,
    resolve: bool = True,
) -> TrtllmServeConfig:
    """How to serve the built ``variant`` with trtllm-serve: its ``llm_api.yaml`` (checked
    against the contract of the version it was built for), the target model it was built
    for, the version's options flag, ``deploy.trtllm_serve`` and ``deploy.ready_timeout_s``.

    Args:
        run_dir: the run directory.
        variant: a built ``server: trtllm-serve`` variant.
        spec: the spec (``trtbench build`` recorded it), for its deploy section.
        port: a fixed port (None: picked at start).
        resolve: find the executable (a missing one is an error); False keeps the command
            as ``deploy.trtllm_serve`` names it where it is not found (for a printed line).

    Raises:
        BuildError: the variant is not built.
        DeployError: it was not built with backend trtllm-pytorch.
        ConfigError: its ``llm_api.yaml`` fails its version's contract; no trtllm-serve
            (with ``resolve``).
    """
    manifest, block = _built(run_dir, variant)
    contract = load_llmapi_contract(str(block["version"]))
    options = run_dir.engine_dir(variant) / str(block.get("options_file", OPTIONS_NAME))
    check_llm_api_yaml(options, contract)
    command = spec.deploy.trtllm_serve
    if resolve:
        executable = resolve_trtllm_serve(command, f"variant {variant}")
    else:
        executable = Path(shutil.which(command) or command)
    model = (block.get("llm_args") or {}).get("model") or spec.models.target
    return TrtllmServeConfig(
        executable=executable,
        variant=variant,
        model=Path(model),
        options_yaml=options.resolve(),
        options_flag=contract.serve_options_flag,
        log_path=run_dir.server_log(variant),
        port=port,
        ready_timeout_s=spec.deploy.ready_timeout_s,
    )


def trtllm_server_for(
    run_dir: RunDir, variant: str, spec: BenchSpec, port: int | None = None
) -> TrtllmServer:
    """A (not yet started) trtllm-serve for ``variant`` of ``spec``.

    Raises:
        BuildError, DeployError, ConfigError: see :func:`trtllm_serve_config`.
    """
    return TrtllmServer(trtllm_serve_config(run_dir, variant, spec, port))


def trtllm_tokenizer_dir(run_dir: RunDir, variant: str) -> Path:
    """The tokenizer directory the build recorded for ``variant`` (the target's).

    Raises:
        BuildError: the variant is not built.
    """
    return Path(read_manifest(run_dir.engine_dir(variant)).tokenizer_dir)


def describe_trtllm_serve(run_dir: RunDir, variant: str, spec: BenchSpec) -> str:
    """One line: the variant and the ``trtllm-serve`` command that serves it (port:
    ``deploy.http_port``, else PORT, picked free at start; the executable as found on ``$PATH``, else as
    ``deploy.trtllm_serve`` names it: printing needs no TensorRT-LLM here).

    Raises:
        BuildError, DeployError, ConfigError: see :func:`trtllm_serve_config`.
    """
    port = spec.deploy.http_port
    cfg = trtllm_serve_config(run_dir, variant, spec, port, resolve=False)
    line = shlex.join(cfg.argv(port or PORT_PLACEHOLDER))
    if port is None:
        line = line.replace(f"--port {PORT_PLACEHOLDER}", "--port PORT")
    return (
        f"{variant}: served by trtllm-serve, model {served_model_name(cfg.model)} "
        f"(log {cfg.log_path}): {line}"
    )
