"""Where tests find their inputs: ``tests/data/<scenario>`` and real profiler exports.

Real exports come from two places. Those whose licence allows it live in the repository under
``tests/data/third_party/`` (:func:`hta_trace`). The others (Nsight Systems exports from
repositories without a licence) are looked up outside it (:func:`external_fixture`): in
``$TRTBENCH_FIXTURES``, else in ``../shared/fixtures`` beside the clone. Where neither has the
file the test is skipped with a reason that says how to get it, except under ``CI=true``, where
a missing fixture fails the test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "tests" / "data"
FIXTURES_ENV = "TRTBENCH_FIXTURES"
SHARED_FIXTURES = REPO_ROOT.parent / "shared" / "fixtures"


def get_test_data_dir(scenario: str = "") -> Path:
    """``tests/data/<scenario>``.

    Raises:
        FileNotFoundError: it does not exist (a typo never passes silently).
    """
    path = DATA_DIR / scenario
    if not path.exists():
        raise FileNotFoundError(f"test data {path} is missing")
    return path


def hta_trace(name: str) -> Path:
    """A Kineto trace kept in the repository: ``tests/data/third_party/hta/<name>.json.gz``
    (MIT, from Holistic Trace Analysis; origin in the README beside it)."""
    return get_test_data_dir(f"third_party/hta/{name}.json.gz")


def fixture_roots() -> list[Path]:
    """Folders searched for external fixtures, in order: ``$TRTBENCH_FIXTURES``, then
    ``../shared/fixtures`` beside the clone."""
    given = os.environ.get(FIXTURES_ENV)
    roots = [Path(given)] if given else []
    return [*roots, SHARED_FIXTURES]


def external_fixture(relpath: str) -> Path:
    """A real profiler export not kept in the repository, e.g. ``nsys/llama3_demo.sqlite``.

    Returns:
        The first existing ``<root>/<relpath>`` of :func:`fixture_roots`.

    Raises:
        pytest.skip.Exception: it is in none of them (reason: where it was looked for, how
            to get it).
        pytest.fail.Exception: the same under ``CI=true``: CI must run every test.
    """
    roots = fixture_roots()
    for root in roots:
        path = root / relpath
        if path.is_file():
            return path
    where = " or ".join(str(r) for r in roots)
    reason = (
        f"real profiler export {relpath} not found in {where}: set {FIXTURES_ENV} to a "
        "folder holding it (origins in tests/data/README.md) or put shared/fixtures "
        "beside the clone"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: fixtures are required)")
    pytest.skip(reason)
