"""An AIPerf artifact directory, read and checked: per-request records and the run's settings.

Format (AIPerf 0.13.0; ``aiperf/common/models/record_models.py`` ``MetricRecordInfo`` and
``MetricRecordMetadata``, ``aiperf/common/models/export_models.py``, ``aiperf/config/phases.py``):

* ``profile_export.jsonl`` (``--export-level records``, the default, or ``raw``): one JSON object
  per request, ``{"metadata": {…}, "metrics": {tag: {"value": v, "unit": u}}, "error": {…}}``.
  Values are in display units (``ms`` for times, ``tokens``, ``tokens/sec/user``);
  ``metadata.benchmark_phase`` is ``warmup`` or ``profiling``; ``request_start_ns`` and
  ``request_end_ns`` are wall-clock ``time.time_ns()`` readings; ``error`` is present (not null)
  for a failed request; ``inter_chunk_latency`` is a list (one gap per later content response).
* ``profile_export_aiperf.json``: ``aiperf_version``, ``schema_version``, ``was_cancelled``,
  ``input_config.phases`` (each with ``kind``, ``type``, ``concurrency``, ``rate``) and one stats
  block per metric (``unit``, ``avg``, ``p50`` …); ``osl_mismatch_count.avg`` is read from it.
* ``profile_export_aiperf.csv`` repeats the JSON's aggregates; it is not read.

Every problem is a :class:`~trtbench.core.errors.ConfigError` naming the file (and line) and what is
wrong; nothing is skipped silently.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtbench.core.errors import ConfigError

RECORDS_FILE = "profile_export.jsonl"
AGGREGATE_FILE = "profile_export_aiperf.json"
FIX = (
    "give the folder `aiperf profile --artifact-dir` wrote (default --export-level records), "
    "unchanged"
)
TIME_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "sec": 1e3, "s": 1e3}
"""Display units of AIPerf time metrics → factor to milliseconds."""
RECORD_METRICS = {
    "time_to_first_token": "time",
    "request_latency": "time",
    "inter_token_latency": "time",
    "inter_chunk_latency": "time",
    "output_token_throughput_per_user": "tokens/sec/user",
    "output_sequence_length": "tokens",
    "input_sequence_length": "tokens",
}
"""Per-request AIPerf metrics read here, with the unit each must carry."""


@dataclass(frozen=True)
class AiperfRecord:
    """One profiling-phase request of ``profile_export.jsonl`` (times in ms, None: absent).

    Attributes:
        line: 1-based line in the file.
        start_ns: ``metadata.request_start_ns`` (wall clock).
        end_ns: ``metadata.request_end_ns`` (wall clock; the error time when it failed).
        failed: the record has an ``error`` or ``metadata.was_cancelled``.
        ttft_ms: ``time_to_first_token``; e2e_ms: ``request_latency``.
        itl_ms: ``inter_token_latency`` = (E2E − TTFT) / (OSL − 1), per request.
        per_user_tokens_per_s: ``output_token_throughput_per_user`` (1 / ITL; absent when ITL
            is 0).
        osl_tokens, isl_tokens: ``output_sequence_length``, ``input_sequence_length``.
        icl_ms: ``inter_chunk_latency``: gaps between consecutive content responses.
    """

    line: int
    start_ns: int
    end_ns: int
    failed: bool
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    itl_ms: float | None = None
    per_user_tokens_per_s: float | None = None
    osl_tokens: float | None = None
    isl_tokens: float | None = None
    icl_ms: tuple[float, ...] | None = None


@dataclass(frozen=True)
class AiperfArtifacts:
    """One AIPerf artifact directory: one load tier (AIPerf runs one load per directory).

    Attributes:
        path: the directory.
        version: ``aiperf_version``.
        tier: trtbench's tier label: ``c<N>`` (concurrency phase) or ``r<X>`` (rate phase).
        concurrency: the profiling phase's concurrency (None in rate mode).
        request_rate_per_s: its target rate (None in concurrency mode).
        max_concurrency: the concurrency cap of a rate phase (None: none).
        cancelled: ``was_cancelled`` (the run was stopped before its end).
        osl_mismatch_count: AIPerf's own count (None: absent).
        records: the profiling phase's requests, in file order (warmup left out).
        warmup_records: how many warmup records the file also held.
    """

    path: Path
    version: str
    tier: str
    concurrency: int | None
    request_rate_per_s: float | None
    max_concurrency: int | None
    cancelled: bool
    osl_mismatch_count: int | None
    records: tuple[AiperfRecord, ...]
    warmup_records: int


def is_artifact_dir(path: Path) -> bool:
    """True when ``path`` is a directory holding ``profile_export.jsonl`` or
    ``profile_export_aiperf.json`` (what ``aiperf profile`` writes)."""
    path = Path(path)
    return (path / RECORDS_FILE).is_file() or (path / AGGREGATE_FILE).is_file()


def artifact_dirs(root: Path) -> list[Path]:
    """``root`` when it is an artifact directory, else every artifact directory below it
    (sorted; one per tier, e.g. one ``--artifact-dir`` per concurrency). Folders inside an
    artifact directory (AIPerf's ``phases/``) are not separate ones. Empty: none found."""
    root = Path(root)
    if is_artifact_dir(root):
        return [root]
    found: list[Path] = []
    if not root.is_dir():
        return found
    for path in sorted(p for p in root.rglob("*") if p.is_dir()):
        if any(parent in found for parent in path.parents):
            continue
        if is_artifact_dir(path):
            found.append(path)
    return found


def _fail(path: Path, what: str, line: int | None = None) -> ConfigError:
    where = f"{path} line {line}" if line is not None else str(path)
    return ConfigError(f"{where}: {what}; {FIX}")


def _metric(
    metrics: dict[str, Any], tag: str, path: Path, line: int
) -> float | tuple[float, ...] | None:
    """A record metric in trtbench's unit (ms for times); None when the record lacks it."""
    entry = metrics.get(tag)
    if entry is None:
        return None
    if not isinstance(entry, dict) or "value" not in entry or "unit" not in entry:
        raise _fail(path, f"metric {tag!r} is not {{value, unit}}", line)
    unit, value, kind = entry["unit"], entry["value"], RECORD_METRICS[tag]
    if kind == "time":
        if unit not in TIME_TO_MS:
            raise _fail(
                path, f"metric {tag!r} has unit {unit!r}, not a time unit", line
            )
        factor = TIME_TO_MS[unit]
    elif unit != kind:
        raise _fail(path, f"metric {tag!r} has unit {unit!r}, expected {kind!r}", line)
    else:
        factor = 1.0
    values = value if isinstance(value, list) else [value]
    if not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for v in values
    ):
        raise _fail(path, f"metric {tag!r} holds a value that is not a number", line)
    if isinstance(value, list):
        return tuple(float(v) * factor for v in value)
    return float(value) * factor


def _record(doc: Any, path: Path, line: int) -> tuple[str, AiperfRecord]:
    """(benchmark phase, record) of one JSONL line."""
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        raise _fail(path, "not a record object with a 'metadata' object", line)
    meta, metrics = doc["metadata"], doc.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise _fail(path, "'metrics' is not an object", line)
    for key in ("request_start_ns", "request_end_ns"):
        if type(meta.get(key)) is not int:
            raise _fail(path, f"metadata.{key} is missing or not an integer", line)
    phase = meta.get("benchmark_phase")
    if phase not in ("warmup", "profiling"):
        raise _fail(
            path, f"metadata.benchmark_phase {phase!r} is not warmup|profiling", line
        )
    values = {tag: _metric(metrics, tag, path, line) for tag in RECORD_METRICS}
    icl = values.pop("inter_chunk_latency")
    if icl is not None and not isinstance(icl, tuple):
        icl = (icl,)
    scalars = {k: v for k, v in values.items() if not isinstance(v, tuple)}
    if len(scalars) != len(values):
        raise _fail(path, "a per-request metric holds a list", line)
    return phase, AiperfRecord(
        line=line,
        start_ns=meta["request_start_ns"],
        end_ns=meta["request_end_ns"],
        failed=doc.get("error") is not None or bool(meta.get("was_cancelled")),
        ttft_ms=scalars["time_to_first_token"],
        e2e_ms=scalars["request_latency"],
        itl_ms=scalars["inter_token_latency"],
        per_user_tokens_per_s=scalars["output_token_throughput_per_user"],
        osl_tokens=scalars["output_sequence_length"],
        isl_tokens=scalars["input_sequence_length"],
        icl_ms=icl,
    )


def read_records(path: Path) -> tuple[list[AiperfRecord], int]:
    """(profiling-phase records, number of warmup records) of a ``profile_export.jsonl``.

    Raises:
        ConfigError: missing, unreadable, a line that is not JSON or not a record, a metric
            in an unexpected unit, or no profiling-phase record at all.
    """
    path = Path(path)
    if not path.is_file():
        raise _fail(
            path, "is missing (aiperf writes it with --export-level records or raw)"
        )
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(path, f"cannot be read ({exc})") from exc
    records, warmup = [], 0
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _fail(
                path, f"not JSON ({exc.msg}, column {exc.colno})", number
            ) from exc
        phase, record = _record(doc, path, number)
        if phase == "warmup":
            warmup += 1
        else:
            records.append(record)
    if not records:
        raise _fail(path, "holds no profiling-phase record")
    return records, warmup


def _phase_load(
    phases: Any, path: Path
) -> tuple[str, int | None, float | None, int | None]:
    """(tier label, concurrency, rate, rate cap) of the one profiling phase."""
    if not isinstance(phases, list) or not all(isinstance(p, dict) for p in phases):
        raise _fail(path, "input_config.phases is missing or not a list of objects")
    profiling = [p for p in phases if p.get("kind", p.get("name")) == "profiling"]
    if len(profiling) != 1:
        raise _fail(
            path, f"has {len(profiling)} profiling phases; one tier per directory"
        )
    phase = profiling[0]
    rate, concurrency = phase.get("rate"), phase.get("concurrency")
    if rate is not None and isinstance(rate, int | float) and rate > 0:
        cap = concurrency if type(concurrency) is int else None
        return f"r{float(rate):g}", None, float(rate), cap
    if type(concurrency) is int and concurrency >= 1:
        return f"c{concurrency}", concurrency, None, None
    raise _fail(
        path,
        f"the profiling phase (type {phase.get('type')!r}) has neither a concurrency nor a "
        "rate, so it is no tier trtbench can place",
    )


def read_artifacts(directory: Path) -> AiperfArtifacts:
    """Read one AIPerf artifact directory (module docstring for the format).

    Raises:
        ConfigError: either file missing, unreadable or malformed (the message names the file
            and, for the JSONL, the line).
    """
    directory = Path(directory)
    json_path = directory / AGGREGATE_FILE
    if not json_path.is_file():
        raise _fail(json_path, "is missing (every `aiperf profile` run writes it)")
    try:
        doc = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail(json_path, f"is not readable JSON ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("input_config"), dict):
        raise _fail(json_path, "has no 'input_config' object")
    version = doc.get("aiperf_version")
    if not isinstance(version, str):
        raise _fail(json_path, "has no 'aiperf_version' string")
    tier, concurrency, rate, cap = _phase_load(
        doc["input_config"].get("phases"), json_path
    )
    mismatch = doc.get("osl_mismatch_count")
    count = mismatch.get("avg") if isinstance(mismatch, dict) else None
    records, warmup = read_records(directory / RECORDS_FILE)
    return AiperfArtifacts(
        path=directory,
        version=version,
        tier=tier,
        concurrency=concurrency,
        request_rate_per_s=rate,
        max_concurrency=cap,
        cancelled=bool(doc.get("was_cancelled")),
        osl_mismatch_count=int(count) if isinstance(count, int | float) else None,
        records=tuple(records),
        warmup_records=warmup,
    )
