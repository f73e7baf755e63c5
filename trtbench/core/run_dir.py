"""The run directory: every stage reads and writes files here (layout: docs/outputs.md).

``RunDir`` only computes paths and merges ``run.json``; it never decides what goes in them.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtbench.core.data_files import read_json_document

METADATA_NAME = "trtbench.json"
"""File name of the repository metadata in ``model_repo/<variant>/`` (written by deploy)."""

RUN_JSON_SCHEMA_VERSION = 1
"""``schema_version`` of ``run.json`` written (and the newest read) by this trtbench."""
BUILD_JSON_SCHEMA_VERSION = 1
"""``schema_version`` of ``engines/<variant>/build.json`` (``builders.manifest``)."""
METADATA_SCHEMA_VERSION = 1
"""``schema_version`` of ``model_repo/<variant>/trtbench.json`` (``triton_repo.interface``)."""

RUN_JSON_FIX = (
    "fix or delete it (trtbench writes it again on the next `trtbench build`, `loadtest` "
    "or `run` into this directory)"
)


def current_umask(status: Path = Path("/proc/self/status")) -> int:
    """The process's file-mode creation mask, read without changing it.

    ``os.umask`` can only be read by setting it, which is process-global and races with
    threads creating files; Linux (4.7+) reports it in ``/proc/self/status`` (``Umask:``).
    Elsewhere, or if that line is absent, 0o022 (the usual default) is assumed.

    Args:
        status: the status file (a parameter for tests).
    """
    try:
        for line in status.read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split(":", 1)[1].strip(), 8) & 0o777
    except (OSError, ValueError):
        pass
    return 0o022


@contextlib.contextmanager
def atomic_target(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` when the block ends.

    Readers never see a half-written file; on an exception the temporary file is removed
    and ``path`` is left as it was. The file is created ``0o666 & ~umask`` (0644 under the
    usual umask 022), like any file ``open()`` creates, so a teammate can read the run:
    the kernel applies the umask to the ``O_CREAT | O_EXCL`` open, nothing reads or sets it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
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
    def rounds_csv(self) -> Path:
        """One row per measured cell (variant × tier × round): figures, time, host load."""
        return self.loadtest_dir / "rounds.csv"

    @property
    def acceptance_csv(self) -> Path:
        """Speculative acceptance per draft position and histogram (long format)."""
        return self.loadtest_dir / "acceptance.csv"

    @property
    def categories_csv(self) -> Path:
        """Acceptance and TPOT per prompt category (only when the prompts have categories)."""
        return self.loadtest_dir / "categories.csv"

    @property
    def category_acceptance_csv(self) -> Path:
        """Acceptance per draft position and histogram per prompt category (long format;
        only when the prompts have categories and a tier has per-step counts)."""
        return self.loadtest_dir / "category_acceptance.csv"

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
        """Return ``run.json`` as a dict ({} when absent).

        Format: a JSON object, ``{"schema_version": 1, "<section>": …}`` (sections written by
        the stages: ``build``, ``loadtest``, ``host`` …); a file without ``schema_version``
        (older trtbench) is version 1.

        Raises:
            DataFileError: not JSON (truncated), not an object, or a ``schema_version`` newer
                than :data:`RUN_JSON_SCHEMA_VERSION`.
        """
        if not self.run_json.is_file():
            return {}
        return read_json_document(
            self.run_json, max_schema_version=RUN_JSON_SCHEMA_VERSION, fix=RUN_JSON_FIX
        )

    def update_run_json(self, section: str, data: Any) -> dict[str, Any]:
        """Set one top-level ``section`` of ``run.json`` (merging dicts one level deep) and
        stamp ``schema_version`` :data:`RUN_JSON_SCHEMA_VERSION` first in the document.

        Returns:
            The whole document as written.

        Raises:
            DataFileError: the existing ``run.json`` cannot be read (see
                :meth:`read_run_json`); it is left as it was.
        """
        doc = self.read_run_json()
        current = doc.get(section)
        if isinstance(current, dict) and isinstance(data, dict):
            current.update(data)
        else:
            doc[section] = data
        doc.pop("schema_version", None)
        doc = {"schema_version": RUN_JSON_SCHEMA_VERSION, **doc}
        write_json_atomic(self.run_json, doc)
        return doc
