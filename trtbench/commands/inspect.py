"""``trtbench inspect``: describe a TensorRT-LLM engine directory from its config.json."""

from __future__ import annotations

from pathlib import Path

import click

from trtbench.builders.trtllm.inspection import render_engine_inspection


@click.command("inspect")
@click.argument("engine_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    show_default=True,
    help="Print the summaries as JSON.",
)
def inspect_engine(engine_dir: Path, as_json: bool) -> None:
    """Mode, draft length, heads, plugins, shapes, TP/PP, dtype, bytes per rank of ENGINE_DIR.

    ENGINE_DIR is an engine output directory (config.json + rank*.engine) or a run's
    engines/<variant> directory (both engines of a draft_target variant). CPU only.
    """
    click.echo(render_engine_inspection(engine_dir, as_json))
