"""docs/reliability.md names, for every fault, the tests that inject it: they must exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "reliability.md"
# `tests/x.py::test_a`, then `::test_b` shorthand for the same file
REF = re.compile(r"`(tests/[\w/]+\.py)?::(test_\w+)`")


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and n.name.startswith("test_")
    }


def _references() -> list[tuple[str, str]]:
    refs = []
    for line in DOC.read_text().splitlines():
        current = None
        for match in REF.finditer(line):
            current = match.group(1) or current
            assert current is not None, (
                f"`::{match.group(2)}` without a file before it: {line}"
            )
            refs.append((current, match.group(2)))
    return refs


def test_every_test_the_reliability_table_names_exists():
    refs = _references()
    assert len(refs) >= 40  # the table covers every fault of issue 12
    missing = [
        f"{file}::{name}"
        for file, name in refs
        if not (REPO / file).is_file() or name not in _tests_in(REPO / file)
    ]
    assert missing == []


def test_the_fault_suite_is_in_the_table():
    faults = REPO / "tests" / "integration" / "test_faults.py"
    named = {name for file, name in _references() if file.endswith("test_faults.py")}
    assert _tests_in(faults) <= named, (
        "a fault test is missing from docs/reliability.md"
    )
