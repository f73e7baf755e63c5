"""Session fixtures shared by every test folder: the small real models (made once, cached).

Data files are found through :mod:`tests.support.data`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_models() -> dict[str, Path]:
    """Paths of the small real models: ``{"target", "draft", "medusa", "eagle3"}`` (made on
    first use; a spec's ``models:`` takes the first three: ``run_specs.spec_models``)."""
    from trtbench.builders.reference.tiny_models import ensure_tiny_models
    from trtbench.paths import tiny_models_dir

    return ensure_tiny_models(tiny_models_dir())


@pytest.fixture(autouse=True)
def _drop_cli_log_handlers():
    """Each CLI call installs its terminal handler and run log on the root logger; remove
    them after the test so no file stays open and no later test logs into it."""
    yield
    from trtbench.commands.logs import RUN_LOG_HANDLER, TERMINAL_HANDLER

    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() in (TERMINAL_HANDLER, RUN_LOG_HANDLER):
            root.removeHandler(handler)
            handler.close()
