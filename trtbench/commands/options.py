"""Options and arguments that several commands share, as reusable decorators.

Each returns a click decorator, so a command lists what it takes in one line per shared flag
and every command spells the flag, its type and its help the same way::

    @click.command("run")
    @spec_argument
    @variants_option("run", "every variant in the spec")
    @run_dir_option()
    def run(spec: Path, variants: tuple[str, ...], out: Path | None) -> None: ...

Also: peers' spellings of an option (``--result-dir`` for ``--out``), a hidden deprecated
name that still works (:func:`deprecated_alias`), and the parser of comma-separated lists.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from trtbench.core.errors import ConfigError
from trtbench.core.run_dir import RunDir

F = TypeVar("F", bound=Callable[..., object])
T = TypeVar("T")

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


RESULT_DIR_ALIAS = "--result-dir"
"""vLLM's (``vllm bench serve --result-dir``) name for ``--out``, accepted beside it."""


def run_dir_option(default: Path | None = None) -> Callable[[F], F]:
    """``--out RUN_DIR`` (also ``--result-dir``): the run directory written (``default``;
    None: runs/<spec name>)."""
    if default is None:
        return click.option(
            "--out",
            RESULT_DIR_ALIAS,
            "out",
            type=click.Path(path_type=Path, file_okay=False),
            default=None,
            help=f"Run directory. Default: {RUNS_ROOT}/<spec name>.",
        )
    return click.option(
        "--out",
        RESULT_DIR_ALIAS,
        "out",
        type=click.Path(path_type=Path, file_okay=False),
        default=default,
        show_default=True,
        help="Run directory.",
    )


def deprecated_alias(
    old: str, new: str, dest: str, param_type: click.ParamType | None = None
) -> Callable[[F], F]:
    """A hidden ``old`` option that still works for ``new``: its value goes to ``dest`` and
    using it prints one deprecation line on stderr. The command merges ``dest`` into
    ``new``'s value with :func:`merge_alias`.

    Args:
        old: the former name (``--endpoint``).
        new: the name to use (``--response-mode``), named in the note.
        dest: the parameter that receives the old option's value.
        param_type: its values (``new``'s type).
    """

    def note(ctx: click.Context, param: click.Parameter, value: object) -> object:
        if value is not None:
            click.echo(
                f"trtbench: note: {old} is deprecated; use {new} (same values)",
                err=True,
            )
        return value

    return click.option(
        old, dest, type=param_type, hidden=True, default=None, callback=note
    )


def merge_alias(value: T | None, old_value: T | None, old: str, new: str) -> T | None:
    """``new``'s value, else the deprecated ``old`` option's (:func:`deprecated_alias`).

    Raises:
        click.UsageError: both given with different values (exit 2, one line).
    """
    if old_value is None:
        return value
    if value is not None and value != old_value:
        raise click.UsageError(
            f"{old} {old_value} and {new} {value} disagree; give {new} only"
        )
    return old_value


def spec_run_dir(out: Path | None, spec_name: str) -> RunDir:
    """The run directory of ``--out``, or ``runs/<spec name>`` when it was not given."""
    return RunDir(out if out is not None else RUNS_ROOT / spec_name)


def parse_list(text: str | None, kind: type, option: str) -> list | None:
    """``"1,8,16"`` → ``[1, 8, 16]``; raises ConfigError naming ``option``."""
    if text is None:
        return None
    parts = text.split(",")
    try:
        if any(not part.strip() for part in parts):
            raise ValueError
        return [kind(part) for part in parts]
    except ValueError:
        raise ConfigError(
            f"{option}: {text!r} is not a comma-separated list of numbers (e.g. 1,8,16)"
        ) from None
