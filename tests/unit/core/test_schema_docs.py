"""docs/csv_schemas.md is generated from the schema constants and must be up to date."""

from __future__ import annotations

import subprocess
import sys

from tests.support.data import REPO_ROOT
from trtbench.core.export import Column, schema_markdown


def test_schema_markdown_escapes_pipes_inside_descriptions():
    text = schema_markdown((Column("source", "nvml | rss"),))
    # Header, rule and one row; the row keeps exactly three unescaped cell borders.
    row = text.splitlines()[2]
    assert row == "| `source` | nvml \\| rss |"


def test_csv_schema_doc_is_current():
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "gen_schema_docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
