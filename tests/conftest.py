"""Shared test fixtures: data folders and the small real models (made once, cached)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def get_test_data_dir(scenario: str = "") -> Path:
    """``tests/data/<scenario>``; raises if missing so a typo never passes silently."""
    path = REPO_ROOT / "tests" / "data" / scenario
    if not path.exists():
        raise FileNotFoundError(f"test data {path} is missing")
    return path


def get_shared_fixture(relpath: str) -> Path:
    """A real profiler output from ``../shared/fixtures`` (read-only, present in CI)."""
    path = REPO_ROOT.parent / "shared" / "fixtures" / relpath
    if not path.exists():
        raise FileNotFoundError(f"shared fixture {path} is missing")
    return path


@pytest.fixture(scope="session")
def tiny_models() -> dict[str, Path]:
    """Paths of the small real models: ``{"target", "draft", "medusa"}`` (made on first use)."""
    from trtbench.builders.reference.tiny_models import ensure_tiny_models
    from trtbench.paths import tiny_models_dir

    return ensure_tiny_models(tiny_models_dir())
