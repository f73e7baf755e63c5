"""Where log records go: warnings on the terminal, everything from INFO into the run's log.

The terminal shows one progress line per stage and the results; log records at WARNING and above go to stderr
(``-v``: INFO and above, ``--debug``: DEBUG, ``--log-level``: as given). A command that has a
run directory also appends every record from INFO up (DEBUG under ``--debug``) to
``RUN_DIR/trtbench.log``, so what the terminal leaves out is still on disk.

Handlers installed here carry a name and replace their earlier selves, so several commands
run in one process (tests, notebooks) never pile handlers up on the root logger.
"""

from __future__ import annotations

import datetime
import logging
import sys
from pathlib import Path
from typing import TextIO

import click

from trtbench import __version__
from trtbench.core.run_dir import RunDir

TERMINAL_HANDLER = "trtbench-terminal"
RUN_LOG_HANDLER = "trtbench-run-log"
DETAILED_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class PlainFormatter(logging.Formatter):
    """``warning: message``: the level in lower case, as trtbench's other terminal lines."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}" + (
            "\n" + self.formatException(record.exc_info) if record.exc_info else ""
        )


class StderrHandler(logging.StreamHandler):
    """A stream handler on ``sys.stderr`` as it is when each record comes: a live progress
    line (``trtbench.commands.stage_lines``) redirects stderr so that records print above
    it instead of through it."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass  # always the current sys.stderr


def _replace_handler(handler: logging.Handler) -> None:
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == handler.get_name()]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)


def terminal_level(log_level: str | None, verbose: bool, debug: bool) -> int:
    """The level shown on stderr: ``--log-level`` when given, else DEBUG with ``--debug``,
    INFO with ``-v``, WARNING otherwise."""
    if log_level:
        return logging.getLevelName(log_level.upper())
    if debug:
        return logging.DEBUG
    return logging.INFO if verbose else logging.WARNING


def terminal_shows(level: int) -> bool:
    """Whether records at ``level`` reach the terminal (``-v`` shows INFO)."""
    handlers = [
        h for h in logging.getLogger().handlers if h.get_name() == TERMINAL_HANDLER
    ]
    return any(level >= h.level for h in handlers)


def configure_logging(level: int, debug: bool) -> None:
    """Send records at ``level`` and above to stderr, and let records from INFO up (DEBUG
    under ``debug``) reach the run log that :func:`log_to_run_dir` adds.

    Args:
        level: the terminal level (:func:`terminal_level`).
        debug: ``--debug`` (the root logger passes DEBUG records on).
    """
    handler = StderrHandler()
    handler.set_name(TERMINAL_HANDLER)
    handler.setLevel(level)
    plain = level >= logging.WARNING
    handler.setFormatter(
        PlainFormatter() if plain else logging.Formatter(DETAILED_FORMAT)
    )
    _replace_handler(handler)
    logging.getLogger().setLevel(min(level, logging.DEBUG if debug else logging.INFO))


class RunLogHandler(logging.Handler):
    """Appends records to a run's ``trtbench.log``, creating the folder on the first record.

    A command that fails before it logs anything leaves no run directory behind. When the
    file cannot be written, one line says so on stderr and the handler stops (the terminal
    keeps its records); no traceback.
    """

    def __init__(self, path: Path, heading: str = "") -> None:
        super().__init__()
        self.path = path
        self.heading = heading  # written before the first record, to tell runs apart
        self.stream: TextIO | None = None
        self.failed = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.failed:
            return
        try:
            if self.stream is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.stream = self.path.open("a", encoding="utf-8")
                if self.heading:
                    self.stream.write(self.heading + "\n")
            self.stream.write(self.format(record) + "\n")
            self.stream.flush()
        except OSError as exc:
            self.failed = True
            sys.stderr.write(
                f"trtbench: warning: cannot write the run log {self.path} "
                f"({exc.strerror or exc}); log records go to the terminal only\n"
            )

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
            self.stream = None
        super().close()


def log_to_run_dir(run_dir: RunDir) -> None:
    """Append every record the root logger passes on to ``RUN_DIR/trtbench.log``
    (:class:`RunLogHandler`; replaces the run log of an earlier command in this process).
    The first record of the command comes after a heading: time, version, command, options."""
    ctx = click.get_current_context(silent=True)
    heading = ""
    if ctx is not None:
        params = " ".join(
            f"{k}={v}" for k, v in ctx.params.items() if v not in (None, ())
        )
        when = datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        )
        heading = f"=== {when} trtbench {__version__}: {ctx.command_path} {params}"
    handler = RunLogHandler(run_dir.log_file, heading)
    handler.set_name(RUN_LOG_HANDLER)
    handler.setFormatter(logging.Formatter(DETAILED_FORMAT))
    _replace_handler(handler)


def note_in_run_log(message: str, level: int = logging.ERROR) -> None:
    """Write ``message`` to the current command's ``trtbench.log`` only (not the terminal,
    which prints it itself): how a command ended, kept with the run. No-op until the run
    log holds a record: a command that fails before it logged anything still leaves no run
    directory behind (:class:`RunLogHandler`)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, RunLogHandler) and handler.stream is not None:
            record = logging.LogRecord(
                "trtbench", level, __file__, 0, message, None, None
            )
            handler.handle(record)
