"""Where trtbench keeps machine-wide caches, and environment-variable expansion for spec paths."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

CACHE_ENV = "TRTBENCH_CACHE"
_VAR = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return the cache root: ``$TRTBENCH_CACHE`` or ``~/.cache/trtbench``."""
    env = os.environ if environ is None else environ
    value = env.get(CACHE_ENV)
    return Path(value).expanduser() if value else Path.home() / ".cache" / "trtbench"


def tiny_models_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return where the small real models (target, draft, medusa) are made and cached."""
    return cache_dir(environ) / "tiny-models"


def expand_vars(text: str, environ: Mapping[str, str] | None = None) -> str:
    """Expand ``$VAR``, ``${VAR}`` and ``${VAR:-default}`` like a POSIX shell.

    ``TRTBENCH_CACHE`` defaults to :func:`cache_dir` when unset, so bundled specs can say
    ``${TRTBENCH_CACHE}/tiny-models/target``.

    Raises:
        KeyError: a variable without a default is not set (the message names it).
    """
    env = dict(os.environ if environ is None else environ)
    env.setdefault(CACHE_ENV, str(cache_dir(env)))

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        default = match.group(2)
        if name in env and env[name] != "":
            return env[name]
        if default is not None:
            return default
        raise KeyError(name)

    return _VAR.sub(replace, text)
