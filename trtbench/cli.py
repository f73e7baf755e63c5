"""The ``trtbench`` command line: a click group whose commands live in ``trtbench.commands``.

The CLI only parses options, calls one library function per command and prints. Library
errors (:class:`trtbench.core.errors.TrtbenchError`) become one line on stderr and exit code 2;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from dataclasses import dataclass

import click

from trtbench import __version__
from trtbench.commands.logs import (
    configure_logging,
    note_in_run_log,
    terminal_level,
)
from trtbench.core.errors import TrtbenchError
from trtbench.core.stop_signals import StopSignal, stop_signals

# command name -> "module:attribute", imported only when the command runs.
COMMANDS: dict[str, str] = {
    "build": "trtbench.commands.build:build",
    "inspect": "trtbench.commands.inspect:inspect_engine",
    "deploy": "trtbench.commands.deploy:deploy",
    "loadtest": "trtbench.commands.loadtest:loadtest",
    "run": "trtbench.commands.run:run",
    "collect": "trtbench.commands.collect:collect",
    "profile": "trtbench.commands.profile:profile",
    "analyze": "trtbench.commands.analyze:analyze",
    "report": "trtbench.commands.report:report",
    "compare": "trtbench.commands.compare:compare",
    "plan": "trtbench.commands.plan:plan",
    "calibrate": "trtbench.commands.calibrate:calibrate",
    "follow-up": "trtbench.commands.followup:follow_up",
}


@dataclass(frozen=True)
class Env:
    """Global options, passed to every command as ``ctx.obj``."""

    debug: bool = False


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="trtbench")
@click.option("--debug", is_flag=True, help="Show tracebacks and DEBUG logs.")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Show INFO logs on the terminal too (they always go to RUN_DIR/trtbench.log).",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default=None,
    help="Terminal log level.  [default: WARNING; INFO with -v; DEBUG with --debug]",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool, verbose: bool, log_level: str | None) -> None:
    """Build, deploy, load-test and profile speculative decoding: draft model, Medusa,
    EAGLE-3, MTP and n-gram against a baseline.

    Backends: `trtllm` (TensorRT-LLM engines, NGC container, GPU), `trtllm-pytorch`
    (its LLM API) and `reference` (PyTorch, CPU or GPU); a variant with `server: vllm`
    is served by vLLM, one with `server: trtllm-serve` by trtllm-serve. Every stage reads and writes one run directory; the terminal
    shows progress and results, the full log is RUN_DIR/trtbench.log.
    """
    configure_logging(terminal_level(log_level, verbose, debug), debug)
    ctx.obj = Env(debug=debug)


def hoist_debug(args: list[str]) -> list[str]:
    """Move ``--debug`` given after a sub-command to the group (not past a ``--``)."""
    cut = args.index("--") if "--" in args else len(args)
    head, tail = args[:cut], args[cut:]
    if "--debug" not in head:
        return args
    return ["--debug", *[a for a in head if a != "--debug"], *tail]


def os_error_line(exc: OSError) -> str:
    """One line for an ``OSError``: the path(s), the system's reason and what to check."""
    paths = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
    why = exc.strerror or str(exc)
    where = f"{paths}: " if paths else ""
    return f"{where}{why}; check the path, its permissions and free disk space"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI, map errors to one line and an exit code.

    Usage errors (unknown option, bad value), library errors
    (:class:`~trtbench.core.errors.TrtbenchError`) and ``OSError`` (unwritable path, full disk)
    print one ``trtbench: error: …`` line and exit 2 (a library error may carry another
    ``exit_code``: 1 when a server died mid-measurement); ``--debug`` (anywhere before
    ``--``) prints a library error's traceback first and exits with the same code, and
    re-raises the others with theirs. SIGINT, SIGTERM and SIGHUP stop any
    command (:mod:`trtbench.core.stop_signals`): what finished is kept and the exit code is
    128 + the signal number.
    """
    args = hoist_debug(list(sys.argv[1:] if argv is None else argv))
    debug = bool(args) and args[0] == "--debug"
    try:
        with stop_signals():
            cli.main(args=args, prog_name="trtbench", standalone_mode=False)
    except StopSignal as exc:
        note_in_run_log(f"stopped: {exc} (exit {exc.exit_code})")
        click.echo(f"trtbench: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.UsageError as exc:
        where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        message = " ".join(exc.format_message().split())
        click.echo(f"trtbench: error: {message}{where}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except TrtbenchError as exc:
        note_in_run_log(f"error: {exc} (exit {exc.exit_code})")
        if debug:  # the traceback, then the same line and exit code as without --debug
            traceback.print_exc()
        click.echo(f"trtbench: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        if debug:
            raise
        click.echo(f"trtbench: error: {os_error_line(exc)}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
