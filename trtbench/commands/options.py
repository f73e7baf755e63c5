"""Options and arguments that several commands share, as reusable decorators.

Each returns a click decorator, so a command lists what it takes in one line per shared flag
and every command spells the flag, its type and its help the same way::

    @click.command("run")
    @spec_argument
    @variants_option("run", "every variant in the spec")
    @run_dir_option()
    def run(spec: Path, variants: tuple[str, ...], out: Path | None) -> None: ...
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from trtbench.core.run_dir import RunDir

F = TypeVar("F", bound=Callable[..., object])

RUNS_ROOT = Path("runs")

spec_argument = click.argument("spec", type=click.Path(path_type=Path, dir_okay=False))
"""``SPEC``: the bench spec YAML."""


def run_dir_argument(name: str = "run_dir") -> Callable[[F], F]:
    """A run-directory argument (``RUN_DIR``; ``run_a`` / ``run_b`` for compare)."""
    return click.argument(name, type=click.Path(path_type=Path, file_okay=False))


def variants_option(verb: str, default: str) -> Callable[[F], F]:
    """``--variant NAME`` (repeatable) into ``variants``: the variants to ``verb``.

    Args:
        verb: what the command does to them (``build``, ``deploy``, ``run``).
        default: which variants when none is given (``every variant in the spec``).
    """
    return click.option(
        "--variant",
        "variants",
        multiple=True,
        help=f"Variant to {verb} (repeatable). Default: {default}.",
    )


def run_dir_option(default: Path | None = None) -> Callable[[F], F]:
    """``--out RUN_DIR``: the run directory written (``default``; None: runs/<spec name>)."""
    if default is None:
        return click.option(
            "--out",
            type=click.Path(path_type=Path, file_okay=False),
            default=None,
            help=f"Run directory. Default: {RUNS_ROOT}/<spec name>.",
        )
    return click.option(
        "--out",
        type=click.Path(path_type=Path, file_okay=False),
        default=default,
        show_default=True,
        help="Run directory.",
    )


def spec_run_dir(out: Path | None, spec_name: str) -> RunDir:
    """The run directory of ``--out``, or ``runs/<spec name>`` when it was not given."""
    return RunDir(out if out is not None else RUNS_ROOT / spec_name)
