"""``trtbench deploy``: Triton model repositories for built variants, and serving them."""

from __future__ import annotations

import time
from pathlib import Path

import click

from trtbench.commands.claim import claim_run_dir
from trtbench.commands.logs import log_to_run_dir
from trtbench.commands.options import run_dir_argument, variants_option
from trtbench.core import stacks
from trtbench.core.errors import BuildError, DeployError
from trtbench.core.run_dir import RunDir
from trtbench.core.run_lock import run_dir_lock
from trtbench.core.stop_signals import StopSignal
from trtbench.pipeline.deploy import (
    deploy_run,
    resolve_deploy_spec,
    select_variants,
    serve_variants,
)
from trtbench.pipeline.preflight import preflight_deploy
from trtbench.pipeline.vllm_deploy import group_by_server, recorded_spec
from trtbench.triton_repo.server import TritonServer
from trtbench.trtllm_server.server import TrtllmServer
from trtbench.vllm_server.server import VllmServer


def _describe(name: str, repo: Path, model: str, streaming: bool) -> str:
    stream = "streaming" if streaming else "one response per request"
    return f"{name}: {repo} (call {model}, {stream})"


def _serving_line(name: str, server: TritonServer | VllmServer | TrtllmServer) -> str:
    if isinstance(server, (VllmServer, TrtllmServer)):
        who = "vLLM" if isinstance(server, VllmServer) else "trtllm-serve"
        return (
            f"{name}: {who} {server.base_url} (OpenAI)  metrics {server.metrics_url}  "
            f"model {server.model_name}  (log {server.config.log_path})"
        )
    return (
        f"{name}: grpc {server.grpc_url}  http {server.http_url}  metrics "
        f"{server.metrics_url}  model {','.join(server.config.models) or '?'}  "
        f"(log {server.config.log_path})"
    )


def _served_groups(
    rd: RunDir, variants: tuple[str, ...]
) -> dict[str, list[str]] | None:
    """The variants to serve by server kind, for the preflight; None when they cannot be
    read yet (nothing built, an unknown variant: deploying says so after the input
    checks)."""
    try:
        return group_by_server(rd, select_variants(rd, variants))
    except (BuildError, DeployError):
        return None


def _serve_until_interrupted(run_dir: Path, variants: tuple[str, ...], deploy) -> None:
    """Serve until SIGINT/SIGTERM/SIGHUP (:class:`StopSignal`, set up by the CLI); every
    server (its whole process group) is stopped before the signal ends the command with
    exit code 128 + its number, also when it arrives during startup."""
    try:
        with serve_variants(run_dir, variants, deploy, render=False) as servers:
            for name, server in servers:
                click.echo(_serving_line(name, server))
            click.echo("serving; press Ctrl-C to stop", err=True)
            while True:
                time.sleep(3600)
    except StopSignal:
        click.echo("stopped every server", err=True)
        raise


@click.command("deploy")
@run_dir_argument()
@variants_option("deploy", "every built variant")
@click.option(
    "--check",
    is_flag=True,
    help="Render in memory and validate (and validate what is on disk); write nothing.",
)
@click.option(
    "--serve",
    is_flag=True,
    help="Also start a server per variant (tritonserver; vLLM for server: vllm; "
    "trtllm-serve for server: trtllm-serve) and serve until Ctrl-C.",
)
@click.option(
    "--tritonserver",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="tritonserver binary. Default: deploy.tritonserver, $PATH, NGC, nvidia-pytriton.",
)
@click.option("--grpc-port", type=int, default=None, help="Default: a free port.")
@click.option("--http-port", type=int, default=None, help="Default: a free port.")
@click.option("--metrics-port", type=int, default=None, help="Default: a free port.")
@click.option(
    "--bind-address",
    default=None,
    help="IP address the server listens on. Default: deploy.bind_address (127.0.0.1, "
    "this host only); 0.0.0.0 or :: lets anyone who reaches the host send requests.",
)
@click.option(
    "--ready-timeout-s",
    type=float,
    default=None,
    help="Seconds to wait for the server and its models. Default: deploy.ready_timeout_s.",
)
def deploy(
    run_dir: Path,
    variants: tuple[str, ...],
    check: bool,
    serve: bool,
    tritonserver: Path | None,
    grpc_port: int | None,
    http_port: int | None,
    metrics_port: int | None,
    bind_address: str | None,
    ready_timeout_s: float | None,
) -> None:
    """Render and validate RUN_DIR/model_repo/<variant>/ for built variants; --serve runs them.

    Deploy options come from the spec recorded in RUN_DIR/run.json (its `deploy:`
    section); the options here override them. Variants served by vLLM or trtllm-serve have
    no repository: the command that serves each is printed instead.
    """
    if check and serve:
        raise click.UsageError(
            "--check writes nothing and --serve needs a written repository; use one"
        )
    spec = resolve_deploy_spec(
        run_dir,
        {
            "tritonserver": tritonserver,
            "grpc_port": grpc_port,
            "http_port": http_port,
            "metrics_port": metrics_port,
            "bind_address": bind_address,
            "ready_timeout_s": ready_timeout_s,
        },
    )
    rd = RunDir(run_dir)
    groups = _served_groups(rd, variants) if serve else None
    preflight_deploy(
        run_dir,
        spec,
        write=not check,
        serve=serve,
        tritonserver_option=tritonserver is not None,
        servers=groups,
    )
    if serve:
        # The lock covers writing the repositories, not the serving: a user load-tests
        # the served models into this run dir (`trtbench loadtest --out RUN`) meanwhile.
        with run_dir_lock(Path(run_dir), "trtbench deploy --serve"):
            for _ in deploy_run(run_dir, variants, spec, write=True):
                pass
        log_to_run_dir(RunDir(run_dir))
        _serve_until_interrupted(run_dir, variants, spec)
        return
    if not check:
        claim_run_dir(RunDir(run_dir))
    for item in deploy_run(run_dir, variants, spec, write=not check):
        meta = item.metadata
        click.echo(_describe(item.variant, item.repo, meta.model_name, meta.streaming))
    own = [
        (name, stacks.load(path))
        for kind, group in group_by_server(rd, select_variants(rd, variants)).items()
        if (path := stacks.server(kind).describe) is not None
        for name in group
    ]
    if own:
        bench = recorded_spec(rd, spec)
        for name, describe in own:
            click.echo(describe(rd, name, bench))
    click.echo("all repositories valid" + (" (nothing written)" if check else ""))
