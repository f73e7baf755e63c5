"""Paths inside a bench spec: ``$VAR`` / ``${VAR:-default}`` expanded, relative paths made
absolute against the spec file's folder (used by :func:`trtbench.spec.bench.parse_spec`)."""

from __future__ import annotations

from pathlib import Path

from trtbench.core.errors import ConfigError
from trtbench.core.paths import expand_vars


def resolve_paths(
    data: object, base: Path, keys: set[str], in_paths: bool = False
) -> object:
    """``data`` (a parsed spec) with env vars expanded and relative paths made absolute
    (against ``base``) in every string under one of ``keys`` (pure apart from the
    environment).

    Raises:
        ConfigError: an environment variable that is not set (names it and the fix).
    """
    if isinstance(data, dict):
        return {
            k: resolve_paths(v, base, keys, in_paths or k in keys)
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [resolve_paths(v, base, keys, in_paths) for v in data]
    if in_paths and isinstance(data, str):
        try:
            text = expand_vars(data)
        except KeyError as exc:
            raise ConfigError(
                f"environment variable {exc.args[0]} in {data!r} is not set; set it or "
                f"write ${{{exc.args[0]}:-default}}"
            ) from None
        path = Path(text).expanduser()
        return str(path if path.is_absolute() else (base / path).resolve())
    return data
