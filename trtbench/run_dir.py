"""The run directory: every stage reads and writes files here (layout in DESIGN.md).

``RunDir`` only computes paths and merges ``run.json``; it never decides what goes in them.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

METADATA_NAME = "trtbench.json"
"""File name of the repository metadata in ``model_repo/<variant>/`` (written by deploy)."""


@contextlib.contextmanager
def atomic_target(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` when the block ends.

    Readers never see a half-written file; on an exception the temporary file is removed
    and ``path`` is left as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON through a temporary file and rename (never half-written)."""
    with atomic_target(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


@dataclass(frozen=True)
class RunDir:
    """Paths inside ``runs/<name>/``.

    Args:
        root: the run directory (created on first write, not here).
    """

    root: Path

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    def engine_dir(self, variant: str) -> Path:
        return self.root / "engines" / variant

    def build_json(self, variant: str) -> Path:
        return self.engine_dir(variant) / "build.json"

    def model_repo(self, variant: str) -> Path:
        return self.root / "model_repo" / variant

    def repo_metadata(self, variant: str) -> Path:
        """``model_repo/<variant>/trtbench.json``: which model to call, streaming, outputs."""
        return self.model_repo(variant) / METADATA_NAME

    def server_log(self, variant: str) -> Path:
        return self.root / "server" / f"{variant}.log"

    @property
    def loadtest_dir(self) -> Path:
        return self.root / "loadtest"

    @property
    def requests_csv(self) -> Path:
        return self.loadtest_dir / "requests.csv"

    @property
    def responses_csv(self) -> Path:
        return self.loadtest_dir / "responses.csv"

    @property
    def summary_csv(self) -> Path:
        return self.loadtest_dir / "summary.csv"

    @property
    def memory_csv(self) -> Path:
        return self.root / "memory.csv"

    @property
    def memory_breakdown_csv(self) -> Path:
        return self.root / "memory_breakdown.csv"

    @property
    def server_metrics_csv(self) -> Path:
        return self.root / "server_metrics.csv"

    @property
    def traces_dir(self) -> Path:
        return self.root / "traces"

    @property
    def log_file(self) -> Path:
        """``trtbench.log``: every log record of the commands run on this directory."""
        return self.root / "trtbench.log"

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"

    @property
    def plots_dir(self) -> Path:
        return self.root / "plots"

    def built_variants(self) -> list[str]:
        """Names of variants whose ``build.json`` exists, sorted."""
        engines = self.root / "engines"
        if not engines.is_dir():
            return []
        return sorted(p.name for p in engines.iterdir() if (p / "build.json").is_file())

    def read_run_json(self) -> dict[str, Any]:
        """Return ``run.json`` as a dict ({} when absent)."""
        if not self.run_json.is_file():
            return {}
        return json.loads(self.run_json.read_text())

    def update_run_json(self, section: str, data: Any) -> dict[str, Any]:
        """Set one top-level ``section`` of ``run.json`` (merging dicts one level deep).

        Returns:
            The whole document as written.
        """
        doc = self.read_run_json()
        current = doc.get(section)
        if isinstance(current, dict) and isinstance(data, dict):
            current.update(data)
        else:
            doc[section] = data
        write_json_atomic(self.run_json, doc)
        return doc
