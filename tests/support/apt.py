"""Debian packages a test needs, installed with apt-get when their programs are missing (as
root; the callers say why they cannot be had otherwise)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence


def apt_install(packages: Sequence[str], programs: Sequence[str]) -> str | None:
    """``apt-get install -y --no-install-recommends PACKAGES`` unless every one of
    ``programs`` is on PATH already; why it failed (None: the programs are there)."""
    if all(shutil.which(p) for p in programs):
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", *packages],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0 or not all(shutil.which(p) for p in programs):
        return (
            f"apt-get install {' '.join(packages)} failed: {done.stderr.strip()[-300:]}"
        )
    return None
