"""Session fixtures shared by every test folder: the small real models (made once, cached).

Data files are found through :mod:`tests.support.data`.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_models() -> dict[str, Path]:
    """Paths of the small real models: ``{"target", "draft", "medusa"}`` (made on first use)."""
    from trtbench.builders.reference.tiny_models import ensure_tiny_models
    from trtbench.paths import tiny_models_dir

    return ensure_tiny_models(tiny_models_dir())
