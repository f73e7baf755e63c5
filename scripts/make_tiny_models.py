#!/usr/bin/env python3
"""Make (once per machine) the small real models the reference backend serves, and show them.

    scripts/make_tiny_models.py [--root DIR] [--force] [--brief]

Default root: ``$TRTBENCH_CACHE/tiny-models`` (``~/.cache/trtbench/tiny-models``). Returns in
well under a second when the cache is complete; a build from scratch takes 1.5–3 minutes on
2 CPU cores. Exit code 2 with one line on stderr when the models cannot be made.

While building, stderr shows one bar per model built (training steps done/total, elapsed time)
under the ``[tiny-models]`` log lines; when stderr is not a terminal (CI logs) the log lines
come as plain lines, each model's steps as a line at every quarter done, and the bars once,
in their final state. The summary goes to stdout;
with ``--brief`` (``scripts/bootstrap.sh``) a complete cache is one line, the models' quality
only after a build.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from types import TracebackType

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from trtbench.builders.tiny.tiny_models import ensure_tiny_models, read_quality
from trtbench.core.errors import TrtbenchError
from trtbench.core.paths import tiny_models_dir


class Bars:
    """A ``BuildProgress`` drawn by ``rich``: one bar per model built, shown from the first one.

    A context manager: leaving it stops the display (nothing is drawn if no model was built).
    Off a terminal, where bars are drawn only at the end, a plain line says each quarter of a
    model's steps done (``[tiny-models] target: 150/600 steps``).
    """

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("{task.description:<7}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps"),
            TimeElapsedColumn(),
            console=console,
        )
        self.tasks: dict[str, TaskID] = {}
        self.console = console

    def __enter__(self) -> Bars:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.tasks:
            self.progress.stop()

    def start(self, part: str, total_steps: int) -> None:
        """Add the bar of ``part`` (and start the display with the first bar)."""
        if not self.tasks:
            self.progress.start()
        self.tasks[part] = self.progress.add_task(part, total=total_steps)

    def advance(self, part: str, steps: int = 1) -> None:
        """Move the bar of ``part`` by ``steps``."""
        task = self.progress.tasks[self.tasks[part]]
        before = int(task.completed)
        self.progress.advance(self.tasks[part], steps)
        total, done = int(task.total or 0), before + steps
        if self.console.is_terminal or total <= 0 or done >= total:
            return
        if done * 4 // total > before * 4 // total:
            self.console.print(
                f"[tiny-models] {part}: {done}/{total} steps",
                markup=False,
                highlight=False,
            )

    def finish(self, part: str) -> None:
        """Stop the clock of ``part``."""
        self.progress.stop_task(self.tasks[part])


class ConsoleLog(logging.Handler):
    """Log records as plain, unwrapped lines on ``console`` (above the bars while they show)."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        """Print one formatted record."""
        try:
            line = self.format(record)
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        except Exception:  # logging's contract: report, never raise
            self.handleError(record)


def _describe(paths: dict[str, Path], quality: dict, built_now: bool) -> list[str]:
    lines = [f"{name:7s} {path}" for name, path in paths.items()]
    heads = ", ".join(f"{a:.3f}" for a in quality["medusa_head_top1_accuracy"])
    build = quality["build"]
    lines += [
        f"draft greedy agreement with target: {quality['draft_greedy_agreement']:.3f}",
        f"medusa head top-1 accuracy (head 1, 2, ...): {heads}",
        f"eagle3 first-draft agreement: {quality.get('eagle3_greedy_agreement', 'n/a')}; "
        f"K=4 chain acceptance by position: {quality.get('eagle3_chain_acceptance', 'n/a')}"
        f" (mean accepted {quality.get('eagle3_mean_accepted', 'n/a')})",
        f"held-out text loss: target {quality['target_heldout_loss']:.3f} nats/token "
        f"(draft {quality['draft_heldout_loss']:.3f}: it learns the target's greedy "
        "tokens, not the text; its agreement above is what speculation uses)",
        ("built now" if built_now else "from the cache; last build")
        + f": {build['built'] or 'quality only'} in {build['wall_s']:.1f} s wall, "
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
@click.option(
    "--brief",
    is_flag=True,
    help="A complete cache in one line (the full summary only after a build).",
)
def main(root: Path | None, force: bool, brief: bool) -> None:
    # transformers' own tqdm bar per save ("Writing model shards") would break ours
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    console = Console(stderr=True)
    logging.basicConfig(
        level=logging.INFO,
        format="[tiny-models] %(message)s",
        handlers=[ConsoleLog(console)],
    )
    root = root if root is not None else tiny_models_dir()
    try:
        with Bars(console) as bars:
            paths = ensure_tiny_models(root, force=force, progress=bars)
        quality = read_quality(root)
    except TrtbenchError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if brief and not bars.tasks:
        click.echo(
            f"cached: {', '.join(paths)} under {root} (their quality: "
            "scripts/make_tiny_models.py)"
        )
        return
    for line in _describe(paths, quality, built_now=bool(bars.tasks)):
        click.echo(line)


if __name__ == "__main__":
    main()
