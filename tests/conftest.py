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
    from trtbench.builders.tiny.tiny_models import ensure_tiny_models
    from trtbench.core.paths import tiny_models_dir

    return ensure_tiny_models(tiny_models_dir())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a test that uses the session's vLLM servers from a file the scheduler does
    not keep on their worker (``tests/support/xdist_schedule.py``): under two workers
    it would start each server a second time."""
    from tests.support.xdist_schedule import (
        SHARED_VLLM_FILES,
        SHARED_VLLM_FIXTURES,
        file_of,
    )

    for item in items:
        path = file_of(item.nodeid)
        used = SHARED_VLLM_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if used and path not in SHARED_VLLM_FILES:
            raise pytest.UsageError(
                f"{path} uses {sorted(used)}: add it to SHARED_VLLM_FILES in "
                "tests/support/xdist_schedule.py"
            )


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Each file on one worker, the vLLM-sharing files together, slowest first
    (``tests/support/xdist_schedule.py``)."""
    from tests.support.xdist_schedule import SlowestFirstFileScheduling

    return SlowestFirstFileScheduling(config, log)


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
