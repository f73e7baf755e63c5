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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``pytest -n N --dist loadgroup`` (``scripts/test.sh``), keep each test file
    on one worker, as ``--dist loadfile`` would: its module-scoped servers then start
    once. A file marked ``xdist_group(NAME)`` joins the files sharing that name instead
    (the session's vLLM servers, ``tests/integration/conftest.py``). Runs before
    pytest-xdist reads the marks."""
    for item in items:
        if (
            "integration" in item.keywords
            and item.get_closest_marker("xdist_group") is None
        ):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


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
