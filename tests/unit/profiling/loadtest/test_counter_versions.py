"""The table of which revision writes which counter meaning: docs/metrics.md holds it, every
version the readers' code names is in it, and the rows a reader gets for a version and the
markers it saw are the ones the table's text says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trtbench.profiling.loadtest.records import counter_versions as cv

ROOT = Path(__file__).resolve().parents[4]
READERS = (
    "profiling/loadtest/clients/counter_reader.py",
    "profiling/loadtest/clients/sglang_spec.py",
    "profiling/loadtest/clients/openai_client.py",
    "profiling/loadtest/clients/openai_spec.py",
    "profiling/loadtest/clients/server_counts.py",
    "profiling/loadtest/records/counter_versions.py",
    "profiling/loadtest/records/spec_counters.py",
    "profiling/loadtest/records/trtllm_counters.py",
    "profiling/loadtest/records/trtllm_perf_metrics.py",
    "profiling/loadtest/stats/acceptance.py",
)
VERSION = re.compile(r"(?<![\w.])\d+\.\d+\.\d+(?:rc\d+|\.post\d+|\.dev\d+)?(?![\w.])")


def test_docs_hold_the_table_as_the_code_has_it():
    assert cv.markdown_table() in (ROOT / "docs/metrics.md").read_text(encoding="utf-8")


def test_every_version_the_readers_name_has_a_row():
    """A release named in a reader's code or docstring is a claim; the table must carry it
    (in a row's bounds or its releases, with the upstream source and evidence)."""
    text = " ".join(
        f"{r.first} {r.last} {r.releases} {r.meaning} {r.figures}" for r in cv.TABLE
    )
    table = set(VERSION.findall(text))
    named = {
        (path, v)
        for path in READERS
        for v in VERSION.findall((ROOT / path).read_text(encoding="utf-8"))
    }
    assert named, "the scan found no version at all: the pattern is wrong"
    assert sorted((p, v) for p, v in named if v not in table) == []


def test_every_row_names_its_upstream_and_evidence():
    for row in cv.TABLE:
        assert row.upstream and row.evidence and row.figures, row.key
        assert row.read in (cv.READ, cv.PARTIAL, cv.REFUSED), row.key
        for bound in (row.first, row.last):
            assert bound is None or cv.parse_version(bound) is not None, row.key


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        ("0.5.18", "0.5.18", "0.5.19"),
        ("1.3.0rc9", "1.3.0rc9", "1.3.0rc10"),
        ("1.3.0rc20", "1.3.0rc20", "1.3.0"),
        ("1.2.1", "1.2.1", "1.2.1.post1"),
        ("0.5.24.dev0", "0.5.23", "0.5.24a1"),
    ],
)
def test_versions_order_as_releases_do(text, before, after):
    key = cv.parse_version(text)
    assert key is not None
    assert cv.parse_version(before) <= key < cv.parse_version(after)  # type: ignore[operator]


def test_unreadable_versions_are_none():
    assert cv.parse_version(None) is None
    assert cv.parse_version("main-abc123") is None
    assert cv.parse_version("0.5.21+cu130") == cv.parse_version("0.5.21")


@pytest.mark.parametrize(
    ("source", "version", "markers", "key", "read"),
    [
        # trtllm-serve: only a sign of a later revision selects the newer meaning
        (
            cv.PER_POSITION,
            "1.4.0rc4",
            (),
            "trtllm-per-position-unconfirmed",
            cv.REFUSED,
        ),
        (
            cv.PER_POSITION,
            None,
            (cv.STATS_SEQUENCE,),
            "trtllm-per-position-after-17082",
            cv.READ,
        ),
        (
            cv.ITERATION_COUNTERS,
            "1.4.0rc4",
            (cv.COLLECTOR,),
            "trtllm-iteration-counters-unconfirmed",
            cv.REFUSED,
        ),
        (
            cv.ITERATION_COUNTERS,
            None,
            (cv.STATS_SEQUENCE,),
            "trtllm-iteration-counters-every",
            cv.PARTIAL,
        ),
        (
            cv.ITERATION_STATS,
            "1.2.1",
            (cv.COLLECTOR,),
            "trtllm-iteration-stats-collector",
            cv.READ,
        ),
        (cv.ITERATION_STATS, "1.2.1", (), "trtllm-iteration-stats", cv.READ),
        # SGLang: the version decides whether a missing field is the version's doing
        (
            cv.SPEC_DETAILS,
            "0.5.18",
            (cv.NO_DETAILS,),
            "sglang-before-field",
            cv.REFUSED,
        ),
        (cv.SPEC_DETAILS, "0.5.19", (cv.NO_DETAILS,), "sglang-rust-server", cv.REFUSED),
        (cv.SPEC_DETAILS, "0.5.23", (cv.NO_DETAILS,), "sglang-no-details", cv.REFUSED),
        (
            cv.SPEC_DETAILS,
            None,
            (cv.NO_DETAILS,),
            "sglang-no-details-unknown-version",
            cv.REFUSED,
        ),
        (cv.SPEC_DETAILS, "0.5.23", (cv.ADAPTIVE,), "sglang-adaptive", cv.PARTIAL),
        (
            cv.SPEC_DETAILS,
            "0.5.23",
            (cv.ADAPTIVE, cv.BY_POSITION),
            "sglang-by-position",
            cv.READ,
        ),
        (cv.SPEC_DETAILS, "0.5.21", (), "sglang-fixed-k", cv.READ),
        (cv.VLLM_PROMETHEUS, "0.32.0", (), "vllm-prometheus", cv.READ),
        (
            cv.VLLM_PROMETHEUS,
            None,
            (cv.NO_NUM_DRAFTS,),
            "vllm-without-num-drafts",
            cv.REFUSED,
        ),
    ],
)
def test_the_row_for_a_version_and_what_the_server_showed(
    source, version, markers, key, read
):
    row = cv.semantics_for(source, version, markers)
    assert (row.key, row.read) == (key, read)


def test_a_refusal_names_server_version_source_and_what_instead():
    row = cv.semantics_for(cv.PER_POSITION, "1.3.0rc9")
    line = cv.reason(row, "1.3.0rc9")
    assert line.startswith("trtllm-serve 1.3.0rc9, per-position counters")
    assert "TensorRT-LLM PR #17082" in line and "not read:" in line
    assert "falls back to the iteration stats" in line
