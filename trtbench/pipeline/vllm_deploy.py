"""Deploy ``server: vllm`` variants: no Triton repository, a vLLM server per variant.

A ``server: vllm`` variant is built like a reference variant (``engines/<variant>/build.json``
records the checked Hugging Face directories); deploying it means mapping it onto ``vllm
serve`` (:func:`trtbench.vllm_server.args.serve_argv`) from the interpreter
``deploy.vllm_python`` and, to serve, starting :class:`~trtbench.vllm_server.server.VllmServer`
(127.0.0.1, log in ``RUN_DIR/server/<variant>.log``, stopped with its process group). The
spec it is served from is the one ``trtbench build`` recorded in ``run.json``
(:func:`recorded_spec`). Which server a built variant has is its build.json's
(:func:`server_of`, :func:`group_by_server`: Triton, vLLM or trtllm-serve, the last deployed
by :mod:`trtbench.pipeline.trtllm_deploy`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import get_args

from pydantic import TypeAdapter, ValidationError

from trtbench.builders.manifest import read_manifest
from trtbench.core.errors import ConfigError
from trtbench.core.run_dir import RunDir
from trtbench.spec.bench import BenchSpec, DeploySpec, VariantSpec
from trtbench.spec.serving import Server
from trtbench.vllm_server.args import serve_argv
from trtbench.vllm_server.server import VllmServer, VllmServerConfig

PORT_PLACEHOLDER = 0  # shown as PORT in a described command line


def server_of(run_dir: RunDir, variant: str) -> str:
    """The server the built ``variant`` is served by, as its build.json records it
    (``triton``, ``vllm`` or ``trtllm-serve``; ``triton`` when it says none).

    Raises:
        BuildError: the variant is not built (no or invalid build.json).
    """
    manifest = read_manifest(run_dir.engine_dir(variant))
    return str(manifest.variant.get("server") or "triton")


def group_by_server(run_dir: RunDir, names: Sequence[str]) -> dict[str, list[str]]:
    """``names`` by the server each is served by: ``{"triton": […], "vllm": […],
    "trtllm-serve": […]}`` (every key present), each list in the given order.

    Raises:
        BuildError: a variant is not built.
    """
    groups: dict[str, list[str]] = {kind: [] for kind in get_args(Server)}
    for name in names:
        groups.setdefault(server_of(run_dir, name), []).append(name)
    return groups


def recorded_spec(run_dir: RunDir, deploy: DeploySpec | None = None) -> BenchSpec:
    """The bench spec ``trtbench build`` recorded in ``run.json`` (``deploy`` replaces its
    deploy section, e.g. with command-line overrides).

    Raises:
        ConfigError: run.json holds no spec, or it no longer validates (names the field).
    """
    data = run_dir.read_run_json().get("build", {}).get("spec")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{run_dir.run_json} records no build spec; run `trtbench build SPEC --out "
            f"{run_dir.root}` first"
        )
    data = {**data, "variants": [_as_written(v) for v in data.get("variants") or []]}
    if deploy is not None:
        data = {**data, "deploy": deploy.model_dump(mode="json")}
    try:
        return BenchSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise ConfigError(
            f"{run_dir.run_json}: build.spec.{field}: {err['msg']}; build again"
        ) from None


def _as_written(variant: object) -> object:
    """A recorded variant without the fields left at their defaults, as a user writes it
    (some fields may only be given for some modes, even as null)."""
    if not isinstance(variant, dict):
        return variant
    fields = VariantSpec.model_fields
    return {
        k: v
        for k, v in variant.items()
        if k not in fields
        or fields[k].is_required()
        or v != _json(fields[k].get_default(call_default_factory=True))
    }


def _json(value: object) -> object:
    return TypeAdapter(object).dump_python(value, mode="json")


def vllm_server_for(
    run_dir: RunDir, variant: str, spec: BenchSpec, port: int | None = None
) -> VllmServer:
    """A (not yet started) vLLM server for ``variant`` of ``spec``.

    Raises:
        ConfigError: unknown variant, no usable ``deploy.vllm_python``.
    """
    config = VllmServerConfig.from_spec(spec, spec.variant(variant), run_dir, port)
    return VllmServer(config)


def vllm_tokenizer_dir(run_dir: RunDir, variant: str) -> Path:
    """The tokenizer directory the build recorded for ``variant`` (the target's).

    Raises:
        BuildError: the variant is not built.
    """
    return Path(read_manifest(run_dir.engine_dir(variant)).tokenizer_dir)


def describe_vllm(run_dir: RunDir, variant: str, spec: BenchSpec) -> str:
    """One line: the variant and the ``vllm serve`` command that serves it (port: PORT,
    picked free at start).

    Raises:
        ConfigError: the variant cannot be mapped, or no usable vLLM interpreter.
    """
    server = vllm_server_for(run_dir, variant, spec)
    cfg = server.config
    argv = serve_argv(
        cfg.python, cfg.variant, cfg.models, PORT_PLACEHOLDER, cfg.settings
    )
    line = shlex.join(argv).replace(f"--port {PORT_PLACEHOLDER}", "--port PORT")
    return f"{variant}: served by vLLM, model {variant} (log {cfg.log_path}): {line}"
