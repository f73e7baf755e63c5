"""Reading back the files trtbench wrote (``run.json``, ``build.json``, ``trtbench.json``, the
CSVs), checked against the schema the code owns, with one-line :class:`DataFileError` s that
name the file, the line where it applies, and the fix.

JSON documents carry ``schema_version`` (absent in files older than the field: read as 1). A
version newer than the reader knows is refused, never half-understood.

CSVs (written by :func:`trtbench.core.export.write_csv`: a header, one record per line, a newline
after the last one) are checked before any value is used:

- the text is UTF-8, has a header with distinct names, and ends with a newline (a file cut
  off mid-row has none);
- every record has as many fields as the header (pandas would pad a short row with NaN);
- the schema's required columns are present; optional ones that are absent (files written
  before the column existed) are added as empty;
- every non-empty value of a typed column parses as its kind (``int``, ``float``, ``bool``;
  a column without an explicit kind whose name ends in a unit suffix such as ``_ms`` or
  ``_bytes`` is a number), and key columns (``variant``, ``tier``) are never empty.

A column the schema does not know is dropped with a WARNING naming it, not refused: CSVs have no
``schema_version``, a newer trtbench adds columns (never changes the meaning of a named one:
the name carries the unit), and refusing would make every run of a newer version unreadable.
Dropping it keeps what the caller writes back within the schema.

Core module: imports nothing of trtbench but the errors (``Column`` is duck-typed), and
pandas only when a CSV is read (``run_dir`` imports this module and must stay light).
"""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtbench.core.errors import DataFileError

if TYPE_CHECKING:
    import pandas as pd

    from trtbench.core.export import Column

log = logging.getLogger(__name__)

KINDS = ("int", "float", "bool", "str")
NUMBER_SUFFIXES = (
    "_ns",
    "_ms",
    "_s",
    "_bytes",
    "_tokens",
    "_ratio",
    "_count",
    "_pct",
    "_mw",
    "_mhz",
    "_per_token",
    "_blocks",
    "_per_block",
)
"""Unit suffixes (docs/csv_schemas.md) that make a column numeric when it names no kind."""

UPGRADE = "upgrade trtbench (pip install -U trtbench) or re-run with this version"

_KIND_TEXT = {"int": "an integer", "float": "a number", "bool": "True or False"}


def schema_version(
    doc: Mapping[str, Any], path: Path, max_schema_version: int, fix: str
) -> int:
    """The ``schema_version`` of a JSON document, checked (absent: 1, files older than it).

    Args:
        doc: the document read from ``path``.
        path: named in the messages.
        max_schema_version: the newest version this code reads.
        fix: what to do about a malformed value.

    Raises:
        DataFileError: ``"<path> has schema_version N but this trtbench reads up to M;
            upgrade trtbench (…) or re-run with this version"``, or the value is not a
            positive integer.
    """
    version = doc.get("schema_version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise DataFileError(
            f"{path}: schema_version {version!r} is not a positive integer; {fix}"
        )
    if version > max_schema_version:
        raise DataFileError(
            f"{path} has schema_version {version} but this trtbench reads up to "
            f"{max_schema_version}; {UPGRADE}"
        )
    return version


def read_text_checked(path: Path, fix: str) -> str:
    """The UTF-8 text of ``path``.

    Raises:
        DataFileError: missing, unreadable or not UTF-8 (names the file and ``fix``).
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataFileError(f"{path} does not exist; {fix}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFileError(f"{path} cannot be read ({exc}); {fix}") from None


def read_json_document(
    path: Path, *, max_schema_version: int, fix: str
) -> dict[str, Any]:
    """The JSON object in ``path``, a file trtbench wrote, with its ``schema_version`` checked.

    Args:
        path: the file (``run.json``, ``build.json``, ``trtbench.json``).
        max_schema_version: the newest ``schema_version`` this code reads.
        fix: what to do when it is corrupt (``"re-run `trtbench build`, or delete it"``).

    Raises:
        DataFileError: missing, unreadable, not UTF-8, not JSON (the message gives line and
            column: a truncated file ends mid-value), not an object, or a ``schema_version``
            that is malformed or newer than ``max_schema_version``.
    """
    path = Path(path)
    text = read_text_checked(path, fix)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFileError(
            f"{path} line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg}; "
            f"truncated or edited?); {fix}"
        ) from None
    if not isinstance(doc, dict):
        raise DataFileError(f"{path} is not a JSON object; {fix}")
    schema_version(doc, path, max_schema_version, fix)
    return doc


def check_json_fields(
    doc: Mapping[str, Any],
    path: Path,
    fields: Mapping[str | tuple[str, ...], type | tuple[type, ...]],
    *,
    fix: str,
) -> None:
    """Check the type of the fields a reader uses (absent or null fields pass).

    Args:
        doc: a JSON object.
        path: named in the message.
        fields: dotted path (``"medusa.choices"``) or a tuple of keys (names that may hold
            dots) → accepted Python type(s); ``bool`` is not accepted where ``int`` is.
        fix: what to do.

    Raises:
        DataFileError: ``"<path>: medusa.choices is 'x' (str), expected list; <fix>"``.
    """
    for where, expected in fields.items():
        parts = where.split(".") if isinstance(where, str) else where
        dotted = ".".join(parts)
        value: Any = doc
        for part in parts:
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is None:
            continue
        types = expected if isinstance(expected, tuple) else (expected,)
        wrong_bool = isinstance(value, bool) and bool not in types
        if wrong_bool or not isinstance(value, types):
            names = " or ".join(t.__name__ for t in types)
            raise DataFileError(
                f"{path}: {dotted} is {value!r} ({type(value).__name__}), expected {names}; "
                f"{fix}"
            )


def validation_problem(exc: Exception) -> str:
    """``"<field>: <message>"`` of the first error of a pydantic ``ValidationError``."""
    errors = exc.errors() if hasattr(exc, "errors") else []
    if not errors:
        return str(exc).splitlines()[0]
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "document"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first.get('msg', '')}{more}"


def column_kind(name: str, kind: str | None = None) -> str | None:
    """The kind the values of column ``name`` must have: ``kind`` when given (a
    ``Column.kind``), else ``float`` for a name with a unit suffix (:data:`NUMBER_SUFFIXES`),
    else None (any text)."""
    if kind is not None:
        return kind
    return "float" if name.endswith(NUMBER_SUFFIXES) else None


def _records(text: str, path: Path, fix: str) -> tuple[list[str], list[int]]:
    """(header, start line of every non-blank record), checking field counts and the end."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    starts: list[int] = []
    line = 1
    try:
        for row in reader:
            start, line = line, reader.line_num + 1
            if not row:
                continue
            if header is None:
                header = row
                continue
            if len(row) != len(header):
                raise DataFileError(
                    f"{path} line {start}: {len(row)} fields where the header has "
                    f"{len(header)} (the file is truncated or was edited); {fix}"
                )
            starts.append(start)
    except csv.Error as exc:
        raise DataFileError(
            f"{path} line {reader.line_num}: not valid CSV ({exc}); {fix}"
        ) from None
    if header is None:
        raise DataFileError(f"{path} is empty (no header line); {fix}")
    if not text.endswith(("\n", "\r")):
        last = starts[-1] if starts else 1
        raise DataFileError(
            f"{path} line {last}: the file ends mid-row (no newline after the last line: "
            f"truncated); {fix}"
        )
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise DataFileError(f"{path}: column(s) {', '.join(twice)} appear twice; {fix}")
    return header, starts


def _bad_values(series: pd.Series, kind: str | None) -> pd.Series:
    """Mask of non-empty values that are not of ``kind``."""
    import pandas as pd

    present = series.notna()
    if kind in ("int", "float"):
        if pd.api.types.is_bool_dtype(series):
            return present
        number = pd.to_numeric(series, errors="coerce")
        bad = present & number.isna()
        if kind == "int":
            finite = number.notna() & number.abs().ne(float("inf"))
            bad |= finite & (number % 1).ne(0)
        return bad
    if kind == "bool" and not pd.api.types.is_bool_dtype(series):
        words = series.astype(str).str.strip().str.lower().isin(["true", "false"])
        return present & ~series.isin([True, False]) & ~words
    return pd.Series(False, index=series.index)


def read_csv_checked(
    path: Path,
    schema: Sequence[Column] | None = None,
    *,
    fix: str,
    kinds: Mapping[str, str] | None = None,
    keys: Iterable[str] = (),
    dtype: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Read a CSV trtbench wrote, refusing anything that would be misread (module docstring).

    Args:
        path: the file.
        schema: its columns (``trtbench.core.export.Column``); None checks only the structure, the
            ``keys`` and the unit-suffixed columns of the file.
        fix: what to do about a bad file (``"re-run `trtbench loadtest`, or delete the file"``).
        kinds: column → ``int`` | ``float`` | ``bool`` | ``str``, overriding the schema's.
        keys: columns that must be present and non-empty in every row.
        dtype: passed to ``pandas.read_csv``.

    Returns:
        The frame (pandas' own type inference; with a schema: in schema order, unknown columns
        dropped, absent optional ones empty).

    Raises:
        DataFileError: missing, unreadable, not UTF-8, empty, ends mid-row, a record with the
            wrong number of fields, a required or key column missing, a key value empty, or a
            value not of its column's kind; the message names the file and, for a value or a
            record, its line.
    """
    import pandas as pd  # here: run_dir (and the tiny-model cache check) stay light

    path = Path(path)
    text = read_text_checked(path, fix)
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise DataFileError(
            f"{path} line {line}: holds a NUL byte (a partly written or damaged file); {fix}"
        )
    header, starts = _records(text, path, fix)
    keys = list(keys)
    known = {c.name: c for c in schema} if schema is not None else {}
    required = [c.name for c in known.values() if c.required]
    missing = [n for n in dict.fromkeys([*required, *keys]) if n not in header]
    if missing:
        raise DataFileError(
            f"{path} lacks the required column(s) {', '.join(missing)}; {fix}"
        )
    # round_trip: a float written by export.write_csv (repr) reads back bit-identical; the
    # default parser can be 1 ulp off, and a re-written summary row would then differ
    frame = pd.read_csv(
        io.StringIO(text),
        dtype=dict(dtype) if dtype else None,
        float_precision="round_trip",
    )
    if len(frame) != len(starts):  # csv and pandas disagree: never drop a row silently
        raise DataFileError(
            f"{path}: {len(starts)} records but {len(frame)} rows parsed; {fix}"
        )
    if schema is not None:
        unknown = [n for n in header if n not in known]
        if unknown:
            log.warning(
                "%s: ignoring column(s) %s, unknown to this trtbench (written by a newer "
                "version?)",
                path,
                ", ".join(unknown),
            )
        frame = frame.reindex(columns=list(known))
    columns = known if schema is not None else dict.fromkeys(header)
    checks = {n: column_kind(n, getattr(c, "kind", None)) for n, c in columns.items()}
    checks.update(kinds or {})
    for name, kind in checks.items():
        if name not in header or name not in frame.columns or kind not in KINDS:
            continue
        bad = _bad_values(frame[name], kind)
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise DataFileError(
                f"{path} line {starts[row]}: column {name} holds "
                f"{frame[name].iloc[row]!r}, not {_KIND_TEXT[kind]}; {fix}"
            )
    for name in keys:
        empty = frame[name].isna() | frame[name].astype(str).str.strip().eq("")
        if empty.any():
            row = int(empty.to_numpy().nonzero()[0][0])
            raise DataFileError(
                f"{path} line {starts[row]}: column {name} is empty; {fix}"
            )
    return frame


def read_parquet_checked(
    path: Path,
    schema: Sequence[Column] | None = None,
    *,
    fix: str,
    kinds: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Read a Parquet table trtbench wrote (``trtbench analyze … --format parquet``), with the
    checks of :func:`read_csv_checked` that apply to a typed file.

    Returns:
        The frame with the dtypes ``pandas.read_csv`` gives the same table (integers
        ``int64``, or ``float64`` where a value is missing; text as ``str``), with a
        schema: in schema order, unknown columns dropped, absent optional ones empty.

    Raises:
        DataFileError: missing, not Parquet or damaged, a required column missing, or a
            value not of its column's kind; the message names the file and, for a value,
            its row (1-based).
    """
    import pandas as pd
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise DataFileError(f"{path} does not exist; {fix}") from None
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for damaged files
        raise DataFileError(
            f"{path} is not a readable Parquet file ({exc}); {fix}"
        ) from None
    header = table.column_names
    known = {c.name: c for c in schema} if schema is not None else {}
    missing = [c.name for c in known.values() if c.required and c.name not in header]
    if missing:
        raise DataFileError(
            f"{path} lacks the required column(s) {', '.join(missing)}; {fix}"
        )
    frame = table.to_pandas()
    for name in frame.columns:  # text as read_csv gives it (pandas' "str" dtype)
        if (
            isinstance(frame[name].dtype, pd.CategoricalDtype)
            or frame[name].dtype == object
        ):
            frame[name] = frame[name].astype("str")
    if schema is not None:
        frame = frame.reindex(columns=list(known))
    columns = known if schema is not None else dict.fromkeys(header)
    checks = {n: column_kind(n, getattr(c, "kind", None)) for n, c in columns.items()}
    checks.update(kinds or {})
    for name, kind in checks.items():
        if name not in header or kind not in KINDS:
            continue
        bad = _bad_values(frame[name], kind)
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise DataFileError(
                f"{path} row {row + 1}: column {name} holds {frame[name].iloc[row]!r}, "
                f"not {_KIND_TEXT[kind]}; {fix}"
            )
    return frame


def read_table_checked(
    path: Path,
    schema: Sequence[Column] | None = None,
    *,
    fix: str,
    kinds: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """A table trtbench wrote as CSV or, ``.parquet`` by its suffix, as Parquet
    (``trtbench analyze --format``): :func:`read_parquet_checked` or
    :func:`read_csv_checked`, with the same checks and errors."""
    if Path(path).suffix == ".parquet":
        return read_parquet_checked(path, schema, fix=fix, kinds=kinds)
    return read_csv_checked(path, schema, fix=fix, kinds=kinds)
