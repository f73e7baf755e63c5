"""``trtbench build``: engines (or reference build manifests) for the variants of a spec."""

from __future__ import annotations

from pathlib import Path

import click

from trtbench.builders.build import build_variants, check_variants, describe_build
from trtbench.commands.claim import claim_run_dir
from trtbench.commands.options import (
    run_dir_option,
    spec_argument,
    spec_run_dir,
    variants_option,
)
from trtbench.pipeline.preflight import preflight_build
from trtbench.spec.bench import load_spec


@click.command("build")
@spec_argument
@variants_option("build", "every variant in the spec")
@click.option(
    "--backend",
    type=click.Choice(["reference", "trtllm", "trtllm-pytorch"]),
    default=None,
    help="Backend for every variant. Default: each variant's `backend`, else the spec's.",
)
@run_dir_option()
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
    run_dir = spec_run_dir(out, bench.name)
    preflight_build(run_dir, dry_run)
    # every variant's checks before the first build, or before the run dir is touched;
    # a dry run is those checks
    checked = check_variants(bench, variants, backend, run_dir, source=str(spec))
    if dry_run:
        built = checked
    else:
        claim_run_dir(run_dir)
        built = build_variants(bench, variants, backend, run_dir, checked=True)
    for manifest in built:
        click.echo(describe_build(manifest, dry_run))
        if dry_run and manifest.model_extra and "dry_run_text" in manifest.model_extra:
            click.echo(manifest.model_extra["dry_run_text"])
    if not dry_run:
        click.echo(f"run dir: {run_dir.root}")
