"""Scrape Triton's Prometheus ``/metrics`` during a load test into a long-format timeline.

:class:`ServerMetricsScraper` (a :class:`~trtbench.profiling.memory.sampling.PeriodicSampler`) fetches
the endpoint every ``interval_ms``, parses it with ``prometheus_client``'s text parser and keeps
one :class:`MetricSample` per exposed sample — whatever families the server exposes:
Triton's ``nv_inference_*`` counters and pending-request gauge, ``nv_gpu_*`` / ``nv_cpu_*`` /
``nv_pinned_memory_pool_*`` (triton-inference-server/server ``docs/user_guide/metrics.md``),
and TensorRT-LLM's ``nv_trt_llm_kv_cache_block_metrics``, ``nv_trt_llm_request_metrics``,
``nv_trt_llm_runtime_memory_metrics`` … (NVIDIA/TensorRT-LLM
``triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/``). ``mark(phase)`` scrapes
at the boundary and ``stop()`` scrapes once more, so every phase is bracketed by readings taken
when it began and ended.

Names are kept as the server exposes them: ``prometheus_client``'s parser renames counter
samples to OpenMetrics form (``nv_inference_count`` → ``nv_inference_count_total``), which
:func:`parse_metrics_text` undoes using the ``# TYPE`` lines. Values stay in each family's own
unit (the name says it: ``_us``, ``_bytes``; ``nv_gpu_power_usage`` W, ``nv_gpu_utilization`` 0-1;
KV blocks are counts). The pure helpers that read the frame (KV-cache blocks, request gauges,
memory gauges, counter deltas per phase, a per-phase summary) are in
:mod:`trtbench.profiling.memory.server_metrics_views`.
"""

from __future__ import annotations

import json
import logging
import re
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from trtbench.core.data_files import read_csv_checked
from trtbench.core.errors import DataFileError
from trtbench.core.export import Column, conform, records_to_frame, write_csv
from trtbench.profiling.memory.sampling import PeriodicSampler

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_MS = 1000.0
DEFAULT_TIMEOUT_S = 2.0
_TYPE_LINE = re.compile(r"^#\s*TYPE\s+(\S+)\s+(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class MetricSample:
    """One Prometheus sample from one scrape.

    Attributes:
        t_ns: ``time.perf_counter_ns()`` when the scrape started.
        family: metric family as exposed (``# TYPE`` name).
        metric_type: counter | gauge | histogram | summary | untyped.
        sample: sample name as exposed (``_bucket``/``_sum``/``_count`` for histograms).
        labels_json: the labels as a JSON object with sorted keys.
        model: the ``model`` label ('' when the sample has none).
        value: the value in the family's unit.
    """

    t_ns: int
    variant: str
    phase: str
    family: str
    metric_type: str
    sample: str
    labels_json: str
    model: str
    value: float


SERVER_METRICS_SCHEMA: tuple[Column, ...] = (
    Column(
        "t_ns",
        "time.perf_counter_ns() when the scrape started (clock of the load-test records)",
    ),
    Column("variant", "variant served"),
    Column("phase", "label set by mark(): load, warmup, tier:<tier>, …"),
    Column("family", "Prometheus metric family as Triton exposes it (# TYPE name)"),
    Column("metric_type", "counter, gauge, histogram, summary or untyped"),
    Column("sample", "sample name as exposed (histograms: _bucket, _sum, _count)"),
    Column(
        "labels_json",
        'all labels as a JSON object with sorted keys, e.g. {"model": "ensemble", "version": "1"}',
    ),
    Column("model", "the model label ('' when absent)"),
    Column(
        "value",
        "sample value in the family's own unit (suffix of the family name: _us, _bytes; nv_gpu_power_usage W; utilisations 0-1; KV blocks and requests are counts)",
    ),
)


def parse_metrics_text(
    text: str, *, t_ns: int = 0, variant: str = "", phase: str = ""
) -> list[MetricSample]:
    """Parse Prometheus text exposition format into samples (pure).

    Args:
        text: the body of a ``/metrics`` response.
        t_ns, variant, phase: copied into every sample.

    Returns:
        One :class:`MetricSample` per sample line, in the order of the text.

    Raises:
        ValueError: the text is not valid Prometheus exposition format (from
            ``prometheus_client.parser``).
    """
    typed = {name: kind for name, kind in _TYPE_LINE.findall(text)}
    out = []
    for fam in text_string_to_metric_families(text):
        family, strip_total = fam.name, False
        if fam.type == "counter":
            # The parser either appended _total to the samples or cut it off the family.
            if typed.get(f"{fam.name}_total") == "counter":
                family = f"{fam.name}_total"
            else:
                strip_total = True
        for s in fam.samples:
            name = s.name
            if strip_total and name.endswith("_total"):
                name = name[: -len("_total")]
            labels = dict(s.labels)
            out.append(
                MetricSample(
                    t_ns=t_ns,
                    variant=variant,
                    phase=phase,
                    family=family,
                    metric_type=fam.type,
                    sample=name,
                    labels_json=json.dumps(labels, sort_keys=True),
                    model=labels.get("model", ""),
                    value=float(s.value),
                )
            )
    return out


def fetch_metrics_text(url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """GET ``url`` and return its body as text.

    Raises:
        OSError: (``urllib.error.URLError`` …) the endpoint cannot be reached, or answers
            with an HTTP error.
    """
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - user URL
        return resp.read().decode("utf-8", errors="replace")


def metrics_frame(samples: Iterable[MetricSample]) -> pd.DataFrame:
    """Samples as a DataFrame in :data:`SERVER_METRICS_SCHEMA` order."""
    frame = records_to_frame(samples)
    if frame.empty:
        return pd.DataFrame(
            {c.name: pd.Series(dtype="object") for c in SERVER_METRICS_SCHEMA}
        )
    return conform(frame, SERVER_METRICS_SCHEMA)


def write_server_metrics_csv(frame: pd.DataFrame, path: Path) -> Path:
    """Write a frame of :data:`SERVER_METRICS_SCHEMA` rows (several variants may be concatenated)."""
    return write_csv(frame, path, SERVER_METRICS_SCHEMA)


def read_server_metrics_csv(path: Path) -> pd.DataFrame:
    """Read ``server_metrics.csv`` back (labels stay JSON text; ``model`` NaN → '').

    The file is checked against :data:`SERVER_METRICS_SCHEMA` by
    :func:`trtbench.core.data_files.read_csv_checked` (``t_ns`` integers, ``value`` numbers,
    ``variant``/``family``/``sample`` never empty).

    Raises:
        DataFileError: missing, truncated (a row cut off), a required column missing, a
            value of the wrong type or a ``labels_json`` that is not a JSON object; the
            message names the file and line.
    """
    fix = (
        "re-run `trtbench run` into this run directory (it scrapes the server), or "
        "delete the file"
    )
    frame = read_csv_checked(
        path,
        SERVER_METRICS_SCHEMA,
        fix=fix,
        kinds={"t_ns": "int", "value": "float"},
        keys=("variant", "family", "sample"),
        dtype={"model": "string", "labels_json": "string"},
    )
    for row, text in enumerate(frame["labels_json"].fillna("{}")):
        try:
            labels = json.loads(text)
        except json.JSONDecodeError:
            labels = None
        if not isinstance(labels, dict):  # one record per line: JSON written unindented
            raise DataFileError(
                f"{path} line {row + 2}: labels_json {text!r:.60} is not a JSON object; "
                f"{fix}"
            )
    frame["model"] = frame["model"].fillna("")
    return frame


class ServerMetricsScraper(PeriodicSampler[MetricSample]):
    """Scrape a Prometheus endpoint in a background thread.

    Example::

        with ServerMetricsScraper(server.metrics_url, variant="medusa", phase="warmup") as sm:
            ...
            sm.mark("tier:c8")
            ...
        frame = sm.frame()

    A failed scrape (server not up yet, timeout, malformed text) is recorded in ``errors`` and
    logged once; scraping goes on.

    Args:
        url: the metrics URL, e.g. ``http://127.0.0.1:8002/metrics``.
        variant: written into every row.
        interval_ms: scrape period (> 0).
        phase: label before the first :meth:`mark`.
        timeout_s: per-scrape HTTP timeout.
    """

    kind = "metrics-scraper"
    read_on_stop = True

    def __init__(
        self,
        url: str,
        *,
        variant: str = "",
        interval_ms: float = DEFAULT_INTERVAL_MS,
        phase: str = "start",
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        super().__init__(interval_ms=interval_ms, phase=phase, variant=variant)
        self.url = url
        self.timeout_s = timeout_s
        self.scrapes = 0

    def _read(self, phase: str) -> list[MetricSample]:
        t_ns = time.perf_counter_ns()
        text = fetch_metrics_text(self.url, self.timeout_s)
        samples = parse_metrics_text(text, t_ns=t_ns, variant=self.variant, phase=phase)
        self.scrapes += 1
        return samples

    def frame(self) -> pd.DataFrame:
        """The samples so far as a :data:`SERVER_METRICS_SCHEMA` DataFrame."""
        return metrics_frame(self.records)

    def info(self) -> dict[str, Any]:
        """Facts for ``run.json``: URL, successful scrapes, failures, interval."""
        return {
            "url": self.url,
            "interval_ms": self.interval_s * 1000.0,
            "scrapes": self.scrapes,
            "errors": self.error_count,
            "first_error": self.errors[0] if self.errors else "",
        }
