"""Files of the tiny-model cache: the build lock and moving a finished part into place."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger("trtbench.builders.tiny.tiny_models")

LOCK_NAME = ".lock"


@contextlib.contextmanager
def exclusive_lock(root: Path) -> Iterator[None]:
    """Hold ``root/.lock`` (``fcntl.flock``, exclusive) for the block; wait if it is taken.

    Raises:
        OSError: ``root`` cannot be created or the lock file cannot be opened.
    """
    root.mkdir(parents=True, exist_ok=True)
    with open(root / LOCK_NAME, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info(
                "another process is building the tiny models in %s; waiting", root
            )
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished part into place (the old one, if any, is removed first)."""
    if final.exists():
        old = final.with_name(f".old-{final.name}-{os.getpid()}")
        final.rename(old)
        shutil.rmtree(old)
    tmp.rename(final)
