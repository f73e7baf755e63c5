"""Reading a JSON object that the user pointed trtbench at (a model's or an engine's
``config.json``, a ``build.json``), with one-line errors that name the file and the fix.

Core module with no subsystem imports, so builders, profiling and the core share it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trtbench.core.errors import ConfigError, TrtbenchError


def read_json_object(
    path: Path,
    *,
    missing_fix: str,
    bad_fix: str,
    label: str = "",
    error: type[TrtbenchError] = ConfigError,
) -> dict[str, Any]:
    """The JSON object stored in ``path``.

    Args:
        path: the file.
        missing_fix: what to do when it does not exist.
        bad_fix: what to do when it cannot be read, is not JSON or not an object.
        label: put in front of every message (``"models.target: "``).
        error: the error type raised.

    Raises:
        error: ``"<label><path> does not exist; <missing_fix>"``,
            ``"<label><path> cannot be read (<why>); <bad_fix>"`` or
            ``"<label><path> is not a JSON object; <bad_fix>"``.
    """
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise error(f"{label}{path} does not exist; {missing_fix}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{label}{path} cannot be read ({exc}); {bad_fix}") from None
    if not isinstance(data, dict):
        raise error(f"{label}{path} is not a JSON object; {bad_fix}")
    return data
