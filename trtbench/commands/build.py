"""``trtbench build``: engines (or reference build manifests) for the variants of a spec."""

from __future__ import annotations

from pathlib import Path

import click

from trtbench.builders.build import build_variants, describe_build
from trtbench.run_dir import RunDir
from trtbench.spec import load_spec


@click.command("build")
@click.argument("spec", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--variant",
    "variants",
    multiple=True,
    help="Variant to build (repeatable). Default: every variant in the spec.",
)
@click.option(
    "--backend",
    type=click.Choice(["reference", "trtllm"]),
    default=None,
    help="Engine backend. Default: the spec's `backend`.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Run directory. Default: runs/<spec name>.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    show_default=True,
    help="Validate and print what would be built; write nothing.",
)
def build(
    spec: Path,
    variants: tuple[str, ...],
    backend: str | None,
    out: Path | None,
    dry_run: bool,
) -> None:
    """Build SPEC's variants into RUN_DIR/engines/<variant>/ (with build.json) and run.json."""
    bench = load_spec(spec)
    run_dir = RunDir(out if out is not None else Path("runs") / bench.name)
    for manifest in build_variants(bench, variants, backend, run_dir, dry_run):
        click.echo(describe_build(manifest, dry_run))
        if dry_run and manifest.model_extra and "dry_run_text" in manifest.model_extra:
            click.echo(manifest.model_extra["dry_run_text"])
    if not dry_run:
        click.echo(f"run dir: {run_dir.root}")
