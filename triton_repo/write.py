"""Write a rendered model repository to disk (thin; all content comes from ``render.py``).

The files go to a temporary sibling folder first, which then replaces the destination, so a
repository is never half-written and no stale model from an earlier render survives. Every
model folder (one holding ``config.pbtxt``) gets a ``1/`` version folder, even when nothing
lives in it (ensembles, TensorRT-LLM models): Triton needs a numeric version folder per model
(triton-inference-server/server ``docs/user_guide/model_repository.md``).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from trtbench.core.errors import DeployError
from trtbench.core.run_dir import current_umask

log = logging.getLogger(__name__)

VERSION_DIR = "1"


def _fill(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        if not path.resolve().is_relative_to(root.resolve()):
            raise DeployError(f"refusing to write {rel!r} outside the model repository")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for config in root.glob("*/config.pbtxt"):
        (config.parent / VERSION_DIR).mkdir(exist_ok=True)


def write_repository(files: Mapping[str, str], dest: Path) -> Path:
    """Write ``{relative path: text}`` as the model repository ``dest`` (replacing it).

    Returns:
        ``dest``.

    Raises:
        DeployError: the destination cannot be written (the message names it), or a path
            points outside it.
    """
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    except OSError as exc:
        raise DeployError(
            f"cannot create the model repository {dest}: {exc.strerror}; check the run "
            "directory's permissions and free space"
        ) from None
    try:
        _fill(staging, files)
        staging.chmod(0o777 & ~current_umask())  # like mkdir under the umask
        old = None
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old.{os.getpid()}")
            dest.rename(old)
        staging.rename(dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise DeployError(
            f"cannot write the model repository {dest}: {exc}; check the run directory's "
            "permissions and free space"
        ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.debug("wrote %d files to %s", len(files), dest)
    return dest
