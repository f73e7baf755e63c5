"""The one CSV writer: schemas fix column order and unit-suffixed names; only here calls ``to_csv``.

A schema is a tuple of :class:`Column`; producers build a DataFrame whose columns are a
superset-compatible match (missing optional columns are filled with NA, unknown columns are an
error so that nothing is exported without a documented name and unit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from trtbench.core.run_dir import atomic_target


@dataclass(frozen=True)
class Column:
    """One CSV column: its name (with a unit suffix such as ``_ms``, ``_bytes``) and meaning.

    Attributes:
        name: the header name.
        description: what it holds (docs/csv_schemas.md).
        required: the column must be present (the writer raises on a frame without it; the
            reader, :func:`trtbench.core.data_files.read_csv_checked`, on a file without it).
        kind: ``int``, ``float``, ``bool`` or ``str``, what every non-empty value must parse
            as when read back; None: a number when the name ends in a unit suffix
            (``_ns``, ``_ms``, ``_bytes`` …), else any text. The writer ignores it.
    """

    name: str
    description: str
    required: bool = True
    kind: str | None = None


Schema = Sequence[Column]


def records_to_frame(records: Iterable[Any]) -> pd.DataFrame:
    """Turn a list of dataclass records into a DataFrame, one row per record (field order kept)."""
    rows = [dataclasses.asdict(r) for r in records]
    return pd.DataFrame(rows)


def conform(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Return ``frame`` with exactly the schema's columns, in schema order.

    Raises:
        ValueError: a required column is missing, or the frame has a column the schema lacks.
    """
    names = [c.name for c in schema]
    extra = [c for c in frame.columns if c not in names]
    if extra:
        raise ValueError(f"columns not in the schema: {extra}")
    missing = [c.name for c in schema if c.required and c.name not in frame.columns]
    if missing and len(frame):
        raise ValueError(f"required columns missing: {missing}")
    return frame.reindex(columns=names)


def write_csv(frame: pd.DataFrame, path: Path, schema: Schema) -> Path:
    """Write ``frame`` conformed to ``schema`` to ``path`` atomically (temp file + rename).

    Returns:
        ``path``.
    """
    out = conform(frame, schema)
    with atomic_target(path) as tmp:
        out.to_csv(tmp, index=False)
    return path


def write_tables(
    tables: Iterable[tuple[str, pd.DataFrame, Schema]], out_dir: Path
) -> list[Path]:
    """Write ``(file name, frame, schema)`` tables into ``out_dir`` with :func:`write_csv`.

    Returns:
        The paths written, in order.
    """
    return [write_csv(frame, out_dir / name, schema) for name, frame, schema in tables]


def schema_markdown(schema: Schema) -> str:
    """Render a schema as a Markdown table (for the docs)."""
    lines = ["| column | meaning |", "|---|---|"]
    escaped = ((c.name, c.description.replace("|", r"\|")) for c in schema)
    lines += [f"| `{name}` | {text} |" for name, text in escaped]
    return "\n".join(lines)
