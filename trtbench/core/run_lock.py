"""One writer per run directory: a lock every command that writes into a run dir holds.

The lock is ``RUN_DIR/.trtbench.lock``, held with ``flock`` through the ``filelock``
library, so the kernel releases it when the holder dies (even by SIGKILL): a lock is never
stale. Beside it, ``.trtbench.owner`` names the holder (PID, command, start time) for the
message a second writer gets.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from trtbench.core.errors import RunDirBusyError

LOCK_NAME = ".trtbench.lock"
OWNER_NAME = ".trtbench.owner"


def _owner(root: Path) -> str:
    try:
        data = json.loads((root / OWNER_NAME).read_text())
        return (
            f"trtbench PID {data['pid']} (`{data['command']}`, since {data['since']})"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return "another trtbench process"


@contextlib.contextmanager
def run_dir_lock(root: Path, command: str) -> Iterator[None]:
    """Hold ``root``'s writer lock for the block (``root`` is created if needed, and removed
    again when the block wrote nothing into it).

    Args:
        root: the run directory.
        command: what the holder runs, for the other writer's message (``trtbench run``).

    Raises:
        RunDirBusyError: another process holds it; the message names its PID and command.
        OSError: ``root`` cannot be created or written.
    """
    root = Path(root)
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / LOCK_NAME), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunDirBusyError(
            f"{root} is being written by {_owner(root)}; wait for it to finish or "
            "choose another --out"
        ) from None
    owner = root / OWNER_NAME
    try:
        since = datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        )
        owner.write_text(
            json.dumps({"pid": os.getpid(), "command": command, "since": since}) + "\n"
        )
        yield
    finally:
        with contextlib.suppress(OSError):
            owner.unlink()
        lock.release()
        if created:  # a command that wrote nothing leaves no directory behind
            with contextlib.suppress(OSError):
                if [p.name for p in root.iterdir()] == [LOCK_NAME]:
                    (root / LOCK_NAME).unlink()
                    root.rmdir()
