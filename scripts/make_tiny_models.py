#!/usr/bin/env python3
"""Make (once per machine) the small real models the reference backend serves, and show them.

    scripts/make_tiny_models.py [--root DIR] [--force]

Default root: ``$TRTBENCH_CACHE/tiny-models`` (``~/.cache/trtbench/tiny-models``). Returns in
well under a second when the cache is complete; a build from scratch takes 1.5–3 minutes on
2 CPU cores. Exit code 2 with one line on stderr when the models cannot be made.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from trtbench.builders.reference.tiny_models import ensure_tiny_models, read_quality
from trtbench.errors import TrtbenchError
from trtbench.paths import tiny_models_dir


def _describe(paths: dict[str, Path], quality: dict) -> list[str]:
    lines = [f"{name:7s} {path}" for name, path in paths.items()]
    heads = ", ".join(f"{a:.3f}" for a in quality["medusa_head_top1_accuracy"])
    build = quality["build"]
    lines += [
        f"draft greedy agreement with target: {quality['draft_greedy_agreement']:.3f}",
        f"medusa head top-1 accuracy (head 1, 2, ...): {heads}",
        f"held-out loss: target {quality['target_heldout_loss']:.3f}, "
        f"draft {quality['draft_heldout_loss']:.3f} nats/token",
        f"last build: {build['built'] or 'quality only'} in {build['wall_s']:.1f} s wall, "
        f"{build['cpu_s']:.1f} s CPU, {build['torch_threads']} threads",
    ]
    return lines


@click.command(help=__doc__)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Cache directory [default: $TRTBENCH_CACHE/tiny-models].",
)
@click.option("--force", is_flag=True, help="Rebuild every model even if cached.")
def main(root: Path | None, force: bool) -> None:
    logging.basicConfig(level=logging.INFO, format="[tiny-models] %(message)s")
    root = root if root is not None else tiny_models_dir()
    try:
        paths = ensure_tiny_models(root, force=force)
        quality = read_quality(root)
    except TrtbenchError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    for line in _describe(paths, quality):
        click.echo(line)


if __name__ == "__main__":
    main()
