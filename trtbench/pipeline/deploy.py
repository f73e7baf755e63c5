"""Deploy built variants: render, validate and write their model repositories, and serve them.

This is the library behind ``trtbench deploy`` and the deploy stage of ``trtbench run``. It is
the one place that joins the build manifest (``trtbench.builders.manifest``) with the Triton
repository code (``trtbench.triton_repo``); the two only exchange plain data.

Typical use::

    repo = deploy_variant(run_dir, "medusa", spec.deploy)      # RUN_DIR/model_repo/medusa
    with serve(run_dir, "medusa", spec.deploy) as server:      # a ready TritonServer
        meta = read_repo_metadata(repo)                         # model name, streaming, …
        ... gRPC to server.grpc_url, model meta.model_name ...
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from trtbench.builders.manifest import BuildManifest, changed_model_files, read_manifest
from trtbench.builders.trtllm.llmapi_files import check_llm_api_yaml
from trtbench.core import stacks
from trtbench.core.errors import ConfigError, DeployError
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.vllm_deploy import group_by_server, recorded_spec
from trtbench.spec.bench import DeploySpec
from trtbench.spec.llmapi import runtime_problem
from trtbench.triton_repo.interface import (
    METADATA_NAME,
    RepoMetadata,
    read_repo_metadata,
)
from trtbench.triton_repo.render import render_repository
from trtbench.triton_repo.server import ServerConfig, TritonServer
from trtbench.triton_repo.validate import (
    ensure_valid,
    validate_files,
    validate_repository,
)
from trtbench.triton_repo.write import write_repository
from trtbench.trtllm_server.server import TrtllmServer
from trtbench.vllm_server.server import VllmServer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeployedVariant:
    """One rendered (or checked) repository.

    Attributes:
        variant: variant name.
        repo: ``RUN_DIR/model_repo/<variant>``.
        metadata: its ``trtbench.json``.
    """

    variant: str
    repo: Path
    metadata: RepoMetadata


def as_run_dir(run_dir: RunDir | Path) -> RunDir:
    """Accept a RunDir or a path."""
    return run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))


def load_deploy_spec(run_dir: RunDir | Path) -> DeploySpec:
    """The spec's ``deploy`` section as recorded in ``run.json`` by ``trtbench build``.

    Returns:
        The recorded DeploySpec, or the defaults when run.json holds none.

    Raises:
        ConfigError: run.json's deploy section is invalid (names the field).
    """
    rd = as_run_dir(run_dir)
    data = rd.read_run_json().get("build", {}).get("spec", {}).get("deploy")
    if data is None:
        return DeploySpec()
    try:
        return DeploySpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = "".join(f".{p}" for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        raise ConfigError(
            f"{rd.run_json}: deploy{field}: {msg}; fix the spec and build again"
        ) from None


def resolve_deploy_spec(
    run_dir: RunDir | Path, overrides: dict[str, object] | None = None
) -> DeploySpec:
    """:func:`load_deploy_spec` with ``overrides`` (CLI options; None values ignored).

    Args:
        run_dir: the run directory (its run.json holds the spec's deploy section).
        overrides: DeploySpec fields to replace (``{"grpc_port": 8001, "bind_address": …}``).

    Raises:
        ConfigError: an override is invalid (names the option, e.g. ``--grpc-port`` or
            ``--bind-address``), or the result is (equal ports, spec and options together).
    """
    base = load_deploy_spec(run_dir)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    try:
        return DeploySpec.model_validate({**base.model_dump(), **given})
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        if not err["loc"]:  # a rule across fields (equal ports)
            raise ConfigError(f"deploy options: {msg}") from None
        option = "--" + str(err["loc"][0]).replace("_", "-")
        raise ConfigError(f"{option}: {msg}") from None


def select_variants(run_dir: RunDir | Path, names: Sequence[str] = ()) -> list[str]:
    """The variants to deploy: ``names`` (each must be built) or every built one.

    Raises:
        DeployError: nothing is built, or a named variant has no engine dir / build.json.
    """
    rd = as_run_dir(run_dir)
    built = rd.built_variants()
    for name in names:
        if name not in built:
            read_manifest(
                rd.engine_dir(name)
            )  # raises BuildError naming what is missing
    if names:
        return list(dict.fromkeys(names))
    if not built:
        raise DeployError(
            f"no built variant in {rd.root / 'engines'}; run `trtbench build SPEC --out "
            f"{rd.root}` first"
        )
    return built


def render_variant(
    run_dir: RunDir | Path, variant: str, deploy: DeploySpec
) -> dict[str, str]:
    """Render (not write) the repository of one variant: ``{relative path: text}``.

    Raises:
        BuildError: the engine dir is missing or not built (no/invalid build.json).
        DeployError: the manifest cannot be deployed (missing engine role, Medusa tree).
        ConfigError: an LLM-API variant's ``llm_api.yaml`` (which a user may edit after the
            build) fails the contract of the TensorRT-LLM version it was built for.
    """
    rd = as_run_dir(run_dir)
    engine_dir = rd.engine_dir(variant)
    manifest = read_manifest(engine_dir)
    server = manifest.variant.get("server")
    serving = stacks.server(server or stacks.TRITON)  # none recorded: Triton
    if not serving.model_repository:
        label = serving.label
        raise DeployError(
            f"variant {variant} is served by {label} (server: {server}) and has no Triton "
            f"repository; `trtbench deploy --serve` or `trtbench run` start its {label} "
            "server"
        )
    if stacks.backend(manifest.backend).llmapi:
        problem = runtime_problem(manifest.mode, deploy.llmapi_runtime, variant)
        if problem:
            raise ConfigError(problem)
        built_for = (manifest.model_extra or {}).get("tensorrt_llm") or {}
        plan = engine_dir / "llm_api.yaml"
        if plan.is_file() and built_for.get("version"):
            check_llm_api_yaml(plan, str(built_for["version"]))
    return render_repository(manifest, engine_dir, deploy)


def deploy_variant(
    run_dir: RunDir | Path, variant: str, deploy: DeploySpec | None = None
) -> Path:
    """Render, validate and write ``RUN_DIR/model_repo/<variant>``.

    Args:
        run_dir: the run directory.
        variant: a built variant.
        deploy: deploy options (default: :func:`load_deploy_spec`).

    Returns:
        The repository path.

    Raises:
        BuildError: engine dir missing or not built.
        DeployError: the rendered repository is invalid, names a model folder that is
            gone (:func:`gone_model_dirs`), or cannot be written.
    """
    rd = as_run_dir(run_dir)
    deploy = deploy if deploy is not None else load_deploy_spec(rd)
    files = render_variant(rd, variant, deploy)
    repo = rd.model_repo(variant)
    ensure_valid(validate_files(files), str(repo))
    _ensure_model_dirs(rd, variant, files)
    write_repository(files, repo)
    ensure_valid(validate_repository(repo), str(repo))
    log.info("model repository %s written", repo)
    return repo


def check_variant(
    run_dir: RunDir | Path, variant: str, deploy: DeploySpec | None = None
) -> DeployedVariant:
    """Validate without writing: the repository as it would be rendered now, and the one
    already written (if any).

    Raises:
        BuildError: engine dir missing or not built.
        DeployError: either repository is invalid (the message names the first problem),
            or a model file the build hashed changed since (``changed_model_files``).
    """
    rd = as_run_dir(run_dir)
    deploy = deploy if deploy is not None else load_deploy_spec(rd)
    repo = rd.model_repo(variant)
    files = render_variant(rd, variant, deploy)
    manifest = read_manifest(rd.engine_dir(variant))
    if changed := changed_model_files(manifest):
        raise DeployError(
            f"variant {variant}: {len(changed)} model file(s) changed since the build "
            f"(first: {changed[0]}); the engine no longer matches its model: rebuild with "
            f"`trtbench build SPEC --out {rd.root}`"
        )
    ensure_valid(validate_files(files), f"{repo} (as rendered)")
    _ensure_model_dirs(rd, variant, files, manifest)
    if repo.exists():
        ensure_valid(validate_repository(repo), str(repo))
    meta = RepoMetadata.model_validate_json(files[METADATA_NAME])
    return DeployedVariant(variant, repo, meta)


def gone_model_dirs(manifest: BuildManifest, files: Mapping[str, str]) -> list[str]:
    """The model folders (the tokenizer's, each role's) that the rendered repository
    ``files`` names and that are not there: ``role folder /path``. A folder the repository
    does not name (an engine that carries its weights) may be gone: a run directory moved
    to another host still deploys."""
    named = "\n".join(files.values())
    dirs = {"tokenizer": manifest.tokenizer_dir}
    dirs |= {r: f.path for r, f in manifest.models.items() if f is not None}
    return [
        f"{role} folder {path}"
        for role, path in dirs.items()
        if path and path in named and not Path(path).is_dir()
    ]


def _ensure_model_dirs(
    rd: RunDir,
    variant: str,
    files: Mapping[str, str],
    manifest: BuildManifest | None = None,
) -> None:
    manifest = manifest or read_manifest(rd.engine_dir(variant))
    if gone := gone_model_dirs(manifest, files):
        raise DeployError(
            f"variant {variant}: its {gone[0]} is gone and the repository loads it when "
            f"the server starts; put it back, or rebuild with `trtbench build SPEC --out "
            f"{rd.root}`"
        )


def _with_repository(rd: RunDir, names: Sequence[str]) -> list[str]:
    """The variants of ``names`` whose server is served from a Triton model repository
    (:attr:`~trtbench.core.stacks.Server.model_repository`), in the given order."""
    return [
        name
        for kind, group in group_by_server(rd, names).items()
        if stacks.server(kind).model_repository
        for name in group
    ]


def deploy_run(
    run_dir: RunDir | Path,
    variants: Sequence[str] = (),
    deploy: DeploySpec | None = None,
    *,
    write: bool = True,
) -> list[DeployedVariant]:
    """Deploy the Triton-served variants of a run (``write=False``: only check them, write
    nothing); ``server: vllm`` and ``server: trtllm-serve`` variants have no repository and
    are left out (see :func:`trtbench.pipeline.vllm_deploy.describe_vllm`,
    :func:`trtbench.pipeline.trtllm_deploy.describe_trtllm_serve`).

    Args:
        run_dir: the run directory.
        variants: variant names (default: every built variant).
        deploy: deploy options (default: :func:`load_deploy_spec`).
        write: render and write each repository; False = :func:`check_variant`.

    Raises:
        BuildError, DeployError: see :func:`deploy_variant` and :func:`check_variant`.
    """
    rd = as_run_dir(run_dir)
    deploy = deploy if deploy is not None else load_deploy_spec(rd)
    out = []
    for name in _with_repository(rd, select_variants(rd, variants)):
        if write:
            repo = deploy_variant(rd, name, deploy)
            out.append(DeployedVariant(name, repo, read_repo_metadata(repo)))
        else:
            out.append(check_variant(rd, name, deploy))
    return out


def server_config(
    run_dir: RunDir | Path, variant: str, meta: RepoMetadata, deploy: DeploySpec
) -> ServerConfig:
    """How to start tritonserver for one deployed variant (pure): the repository and log of
    ``variant`` in ``run_dir``, the models ``meta`` lists, ports, bind address, binary and
    timeout from ``deploy``."""
    rd = as_run_dir(run_dir)
    return ServerConfig(
        model_repo=rd.model_repo(variant).resolve(),
        log_path=rd.server_log(variant),
        tritonserver=deploy.tritonserver,
        grpc_port=deploy.grpc_port,
        http_port=deploy.http_port,
        metrics_port=deploy.metrics_port,
        bind_address=deploy.bind_address,
        models=tuple(meta.models),
        ready_timeout_s=deploy.ready_timeout_s,
        world_size=meta.world_size,
        tensorrt_llm_models=tuple(meta.tensorrt_llm_models),
        mpirun=deploy.mpirun,
    )


@contextlib.contextmanager
def serve(
    run_dir: RunDir | Path,
    variant: str,
    deploy: DeploySpec | None = None,
    *,
    render: bool = False,
) -> Iterator[TritonServer]:
    """A running tritonserver for one variant, stopped (whole process group) on exit.

    Args:
        run_dir: the run directory.
        variant: a deployed variant (``render=True`` deploys it first).
        deploy: deploy options (default: :func:`load_deploy_spec`).
        render: render and write the repository before starting.

    Yields:
        The ready :class:`TritonServer` (``grpc_url``, ``http_url``, ``metrics_url``); the
        repository's metadata is ``read_repo_metadata(RunDir(run_dir).model_repo(variant))``.
        The server log is ``RUN_DIR/server/<variant>.log``.

    Raises:
        DeployError: the repository is missing or invalid.
        ServerStartError: binary not found, port in use, a model failed to load, timeout.
    """
    rd = as_run_dir(run_dir)
    deploy = deploy if deploy is not None else load_deploy_spec(rd)
    if render:
        repo = deploy_variant(rd, variant, deploy)  # validates what it wrote
    else:
        repo = rd.model_repo(variant)
        ensure_valid(validate_repository(repo), str(repo))
    meta = read_repo_metadata(repo)
    with TritonServer(server_config(rd, variant, meta, deploy)) as server:
        yield server


@contextlib.contextmanager
def serve_variants(
    run_dir: RunDir | Path,
    variants: Sequence[str] = (),
    deploy: DeploySpec | None = None,
    render: bool = True,
) -> Iterator[list[tuple[str, TritonServer | VllmServer | TrtllmServer]]]:
    """Deploy the variants and serve each from its own server until the block exits: a
    tritonserver, for ``server: vllm`` a vLLM server, for ``server: trtllm-serve`` a
    trtllm-serve (these two from the spec recorded in run.json, with ``deploy``).

    ``render=False`` serves the repositories already written (``trtbench deploy`` ran).

    Raises:
        ConfigError: several variants with fixed ports (they would collide); a vLLM
            variant without a usable ``deploy.vllm_python``, a trtllm-serve one without
            ``deploy.trtllm_serve`` or with an ``llm_api.yaml`` its contract refuses.
        BuildError, DeployError, ServerStartError: see :func:`deploy_variant`, :func:`serve`.
    """
    rd = as_run_dir(run_dir)
    deploy = deploy if deploy is not None else load_deploy_spec(rd)
    names = select_variants(rd, variants)
    fixed = [p for p in (deploy.grpc_port, deploy.http_port, deploy.metrics_port) if p]
    if fixed and len(names) > 1:
        raise ConfigError(
            f"fixed ports ({', '.join(map(str, fixed))}) cannot serve {len(names)} variants "
            "at once; pass one --variant or leave the ports out to pick free ones"
        )
    launch = {
        name: stacks.server(kind).launch
        for kind, group in group_by_server(rd, names).items()
        for name in group
    }
    own = [name for name in names if launch[name] is not None]
    spec = recorded_spec(rd, deploy) if own else None
    with contextlib.ExitStack() as stack:
        servers: list[tuple[str, TritonServer | VllmServer | TrtllmServer]] = []
        for name in names:
            if (path := launch[name]) is not None and spec is not None:
                server = stacks.load(path)(rd, name, spec, deploy.http_port)
                servers.append((name, stack.enter_context(server)))
            else:
                servers.append(
                    (name, stack.enter_context(serve(rd, name, deploy, render=render)))
                )
        yield servers
