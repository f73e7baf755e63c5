"""``trtbench deploy``: Triton model repositories for built variants, and serving them."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import click

from trtbench.commands.logs import log_to_run_dir
from trtbench.commands.options import run_dir_argument, variants_option
from trtbench.pipeline.deploy import (
    deploy_run,
    resolve_deploy_spec,
    serve_variants,
)
from trtbench.run_dir import RunDir


def _describe(name: str, repo: Path, model: str, streaming: bool) -> str:
    stream = "streaming" if streaming else "one response per request"
    return f"{name}: {repo} (call {model}, {stream})"


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _serve_until_interrupted(run_dir: Path, variants: tuple[str, ...], deploy) -> None:
    """Serve until SIGINT/SIGTERM; every server is stopped before returning (also when the
    signal arrives during startup). Handlers are set here because a parent may have left
    SIGINT ignored (background jobs)."""
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, _raise_interrupt) for s in signals}
    try:
        with serve_variants(run_dir, variants, deploy) as servers:
            for name, server in servers:
                click.echo(
                    f"{name}: grpc {server.grpc_url}  http {server.http_url}  "
                    f"metrics {server.metrics_url}  (log {server.config.log_path})"
                )
            click.echo("serving; press Ctrl-C to stop", err=True)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("stopped", err=True)


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
    help="Also start a tritonserver per variant and serve until Ctrl-C.",
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
    ready_timeout_s: float | None,
) -> None:
    """Render and validate RUN_DIR/model_repo/<variant>/ for built variants; --serve runs them.

    Deploy options come from the spec recorded in RUN_DIR/run.json (its `deploy:`
    section); the options here override them.
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
            "ready_timeout_s": ready_timeout_s,
        },
    )
    if not check:
        log_to_run_dir(RunDir(run_dir))
    if serve:
        _serve_until_interrupted(run_dir, variants, spec)
        return
    for item in deploy_run(run_dir, variants, spec, write=not check):
        meta = item.metadata
        click.echo(_describe(item.variant, item.repo, meta.model_name, meta.streaming))
    click.echo("all repositories valid" + (" (nothing written)" if check else ""))
