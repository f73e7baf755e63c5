"""Claiming a run directory for one command: its writer lock and its log file."""

from __future__ import annotations

import click

from trtbench.commands.logs import log_to_run_dir
from trtbench.core.run_dir import RunDir
from trtbench.core.run_lock import run_dir_lock


def claim_run_dir(run_dir: RunDir) -> None:
    """Take ``run_dir``'s writer lock until the command ends, then log into it.

    Raises:
        RunDirBusyError: another trtbench process writes into it (exit 2, its PID named).
    """
    ctx = click.get_current_context()
    ctx.with_resource(run_dir_lock(run_dir.root, ctx.command_path))
    log_to_run_dir(run_dir)
