"""Which revisions of each server write each speculative counter source with which meaning:
the table trtbench's readers consult, as data (pure).

A counter's name can outlive its meaning: trtllm-serve's iteration counters, its per-position
counters and its ``GET /metrics`` JSON, and SGLang's ``spec_tokens_details``, each changed
meaning between revisions without changing name. One :class:`Semantics` row per (server,
source, meaning) says where the meaning holds, what in the server's own output shows it
(``marker``), the upstream file, function and pull requests, how the fact was established
(``evidence``) and what trtbench reports under it (``figures``). The readers
(``clients/counter_reader.py``, ``clients/sglang_spec.py``) ask :func:`semantics_for` with the
server's version (``GET /version``; SGLang's ``/server_info`` ``version``) and the markers
they saw, and read the source only where the row says so; otherwise they log the row's
reason and fall back. docs/metrics.md holds :func:`markdown_table` verbatim (a test checks
it), and every version written in the readers' code must appear in a row (a test checks that
too).

Where a boundary between releases is not established (TensorRT-LLM's tags could not be read
here: the rows give the pull request and its merge date instead), the row has no version
bound and only a marker can select it; a revision that shows no marker falls to the last,
unbounded row of its source, which is the conservative reading.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

TRTLLM, SGLANG, VLLM = "trtllm-serve", "SGLang", "vLLM"

# sources (the reader's names; spec_decode_counts_source where trtbench reads them)
PER_POSITION = "trtllm_prometheus"
ITERATION_STATS = "trtllm_iteration_stats"
ITERATION_COUNTERS = "trtllm_iteration_counters"
PERF_METRICS = "trtllm_perf_metrics"
SPEC_DETAILS = "sglang_spec_tokens_details"
VLLM_PROMETHEUS = "server_prometheus"

# markers: what a reader saw in the server's own output
STATS_SEQUENCE = "statsSequence"
"""Iteration rows of ``GET /metrics`` carry ``statsSequence`` / ``statsDroppedFrames``."""
COLLECTOR = "collector"
"""trtllm-serve's Prometheus iteration counters count: its own collector loop runs."""
BY_POSITION = "by_position"
"""SGLang's details carry ``spec_num_proposed_drafts_by_position``."""
ADAPTIVE = "adaptive"
"""SGLang's ``/server_info`` says ``speculative_adaptive: true``."""
NO_DETAILS = "no_details"
"""SGLang's probe reply carried no ``sglext.spec_tokens_details``."""
NO_NUM_DRAFTS = "no_num_drafts"
"""vLLM's counters counted draft tokens but no ``vllm:spec_decode_num_drafts``."""

READ, PARTIAL, REFUSED = "read", "partial", "refused"
SOURCE_NAMES = {
    PER_POSITION: "per-position counters (GET /prometheus/metrics)",
    ITERATION_STATS: "iteration stats (GET /metrics)",
    ITERATION_COUNTERS: "iteration counters (GET /prometheus/metrics)",
    PERF_METRICS: "per-request entries (GET /perf_metrics)",
    SPEC_DETAILS: "sglext.spec_tokens_details",
    VLLM_PROMETHEUS: "Prometheus counters (GET /metrics)",
}
_DOING = {READ: "read", PARTIAL: "read in part", REFUSED: "not read"}


@dataclass(frozen=True)
class Semantics:
    """One meaning of one counter source, where it holds and what trtbench does with it.

    ``releases``: where it holds in words, with the releases read; ``first`` / ``last``: the
    same as inclusive bounds for :func:`semantics_for` (None: unbounded on that side; both
    None where the boundary is not established and only ``marker`` selects the row).
    ``marker``: what the reader must have seen (None: nothing). ``read``: :data:`READ`
    (trtbench reads the source), :data:`PARTIAL` (some figures) or :data:`REFUSED` (none;
    ``figures`` says why and what instead). ``prs``: ``owner/repo#N`` (the merge date is in
    ``releases`` where the release is not established)."""

    key: str
    server: str
    source: str
    meaning: str
    releases: str
    upstream: str
    prs: tuple[str, ...]
    evidence: str
    read: str
    figures: str
    marker: str | None = None
    first: str | None = None
    last: str | None = None


TABLE: tuple[Semantics, ...] = (
    Semantics(
        "trtllm-per-position-after-17082",
        TRTLLM,
        PER_POSITION,
        "`trtllm_spec_decode_drafted_tokens_total{token_position}` counts the drafts of verify steps only: drafted at position 0 = verify steps",
        "after PR 17082 (merged 2026-07-31); release not established: shown by iteration rows with `statsSequence` (a later revision)",
        "tensorrt_llm/metrics/collector.py `MetricsCollector.log_request_metrics_dict`; tensorrt_llm/_torch/pyexecutor/py_executor.py `_handle_responses`",
        ("NVIDIA/TensorRT-LLM#12636", "NVIDIA/TensorRT-LLM#17082"),
        "PR review thread (17082); stored copies of collector.py and iteration_stats.py",
        READ,
        "acceptance length, draft acceptance rate, per-position rates (vLLM's definition)",
        marker=STATS_SEQUENCE,
    ),
    Semantics(
        "trtllm-per-position-unconfirmed",
        TRTLLM,
        PER_POSITION,
        "nothing shows a revision after PR 17082; before it the per-request accumulator counted the prefill step's dummy drafts (0 accepted) and could pair a step's accepted drafts with the next step's padded draft buffer: drafted at position 0 > verify steps",
        "any revision that does not show a later one (no `statsSequence`)",
        "tensorrt_llm/_torch/pyexecutor/py_executor.py `_handle_responses`",
        ("NVIDIA/TensorRT-LLM#17082",),
        "PR review thread (17082)",
        REFUSED,
        "none from these counters (acceptance length and per-position rates would be low); falls back to the iteration stats, then `/perf_metrics`",
    ),
    Semantics(
        "trtllm-iteration-stats-sequence",
        TRTLLM,
        ITERATION_STATS,
        "`GET /metrics` rows carry `statsSequence` (frame number) and `statsDroppedFrames` (frames the executor's buffer evicted so far): lost rows counted exactly",
        "from the IterationStatsFrame revision (2026-09; release not established)",
        "tensorrt_llm/executor/iteration_stats.py `_materialize_frame`; tensorrt_llm/_torch/pyexecutor/py_executor.py `PyExecutor._append_stats_frame`",
        (),
        "stored copies of iteration_stats.py and its unit test",
        READ,
        "acceptance length and draft acceptance rate (TensorRT-LLM's own); a tier that lost a row gets none, and the log says how many and where",
        marker=STATS_SEQUENCE,
    ),
    Semantics(
        "trtllm-iteration-stats-collector",
        TRTLLM,
        ITERATION_STATS,
        "the server's own collector (`_iteration_stats_collector_loop`) runs: before PR 13405 it drained the same queue as `GET /metrics`, which then lost iterations to it; from 13405 `/metrics` reads a buffer the loop fills",
        "loop without the read buffer before PR 13405 (merged 2026-04-24); release not established",
        "tensorrt_llm/serve/openai_server.py `_iteration_stats_collector_loop`, `get_iteration_stats`",
        ("NVIDIA/TensorRT-LLM#13405",),
        "PR description (13405); stored copies of openai_server.py with and without `_iteration_stats_buffer`",
        READ,
        "as above; lost iterations are found from gaps in `iter`, and a tier that lost any gets no figures",
        marker=COLLECTOR,
    ),
    Semantics(
        "trtllm-iteration-stats",
        TRTLLM,
        ITERATION_STATS,
        "`GET /metrics` drains the executor's bounded queue; only readers take rows",
        "every revision with `enable_iter_perf_stats`",
        "tensorrt_llm/serve/openai_server.py `get_iteration_stats`",
        (),
        "stored copies of openai_server.py",
        READ,
        "as above (gaps in `iter` are rows the queue dropped)",
    ),
    Semantics(
        "trtllm-iteration-counters-every",
        TRTLLM,
        ITERATION_COUNTERS,
        "`trtllm_spec_decode_num_draft_tokens_total` / `..._num_accepted_tokens_total` count every iteration: the loop passes every drained stat to `log_iteration_stats`",
        "counters since PR 12545 (gauges before); every stat logged in the stored revisions read; shown by `statsSequence` (a later revision)",
        "tensorrt_llm/serve/openai_server.py `_iteration_stats_collector_loop`; tensorrt_llm/metrics/collector.py `log_iteration_stats`",
        ("NVIDIA/TensorRT-LLM#12545",),
        "stored copies of openai_server.py",
        PARTIAL,
        "draft acceptance rate only (the counters hold no verify steps)",
        marker=STATS_SEQUENCE,
    ),
    Semantics(
        "trtllm-iteration-counters-unconfirmed",
        TRTLLM,
        ITERATION_COUNTERS,
        "nothing shows a revision whose collector logs every stat; at some revisions the loop passes only the latest drained stat to `log_iteration_stats`, and the counters hold about one iteration per drain",
        "any revision that does not show a later one; which releases log the latest stat only is not established",
        "tensorrt_llm/serve/openai_server.py `_iteration_stats_collector_loop`",
        ("NVIDIA/TensorRT-LLM#12545",),
        "issue report (trtbench issue 49); not seen in a stored revision",
        REFUSED,
        "none (an undercount read as totals would give a wrong rate); falls back to `/perf_metrics`, else none: set `enable_iter_perf_stats: true, return_perf_metrics: false`",
    ),
    Semantics(
        "trtllm-perf-metrics",
        TRTLLM,
        PERF_METRICS,
        "one entry per finished request in a bounded deque handed over on read; `speculative_decoding` zeroed (absent) with the PyTorch TorchSampler before PR 17082",
        "PR 6985 (2025-09) to PR 16668 (2026-07-22, removed: 404); releases not established",
        "tensorrt_llm/serve/openai_server.py `get_perf_metrics`, `_extract_metrics`",
        (
            "NVIDIA/TensorRT-LLM#6985",
            "NVIDIA/TensorRT-LLM#16668",
            "NVIDIA/TensorRT-LLM#17082",
        ),
        "PR threads; stored copies of openai_server.py",
        PARTIAL,
        "draft acceptance rate only; none for a tier whose entries do not match its requests; entries without `speculative_decoding` are not read",
    ),
    Semantics(
        "sglang-by-position",
        SGLANG,
        SPEC_DETAILS,
        "`spec_num_proposed_drafts` counts the drafts actually proposed, with `spec_num_proposed_drafts_by_position` / `spec_num_correct_drafts_by_position` and `spec_proposed_drafts_histogram`",
        "SGLang's main branch after 0.5.23 (in `meta_info`; not in a release read here): read wherever the details carry the fields",
        "python/sglang/srt/managers/tokenizer_manager.py `_calculate_spec_decoding_metrics`",
        (),
        "stored copies of SGLang's main branch (unit tests of the function)",
        READ,
        "acceptance length, draft acceptance rate, position rows over the steps that proposed each position, histogram",
        marker=BY_POSITION,
    ),
    Semantics(
        "sglang-meta-info",
        SGLANG,
        "sglang_meta_info",
        "per-request counts in the native `/generate` meta info (0.5.9: `spec_accept_token_num`, `spec_draft_token_num`, `spec_accept_histogram`; 0.5.13 on: `spec_num_correct_drafts`, `spec_num_proposed_drafts`, `spec_correct_drafts_histogram`), and from 0.5.13 in non-streamed chat replies (`return_meta_info`)",
        "0.5.9, 0.5.13 – 0.5.18 (0.5.9, 0.5.13, 0.5.15 – 0.5.18 read)",
        "python/sglang/srt/managers/tokenizer_manager.py; python/sglang/srt/entrypoints/openai/protocol.py",
        (),
        "release wheels read",
        REFUSED,
        "not read: a streamed load test sees neither",
    ),
    Semantics(
        "sglang-before-field",
        SGLANG,
        SPEC_DETAILS,
        "`return_spec_tokens_details` unknown: the request field is ignored, no `sglext` chunk",
        "up to 0.5.18 (0.5.17 and 0.5.18 read)",
        "python/sglang/srt/entrypoints/openai/protocol.py",
        ("sgl-project/sglang#33518",),
        "release wheels read",
        REFUSED,
        "none: no per-request counts on a streamed OpenAI endpoint",
        marker=NO_DETAILS,
        last="0.5.18",
    ),
    Semantics(
        "sglang-rust-server",
        SGLANG,
        SPEC_DETAILS,
        "the field exists, but the embedded Rust server (`SGLANG_RUST_SERVER`) does not know it: its binary names the field from 0.5.23 only",
        "0.5.19 – 0.5.22 (read)",
        "python/sglang/srt/rust_server/server.py; rust_extensions `_server`",
        ("sgl-project/sglang#33518",),
        "release wheels read (strings of the extension)",
        REFUSED,
        "none; the log names the version's field, the Rust server and the endpoint, not the version, as the cause",
        marker=NO_DETAILS,
        first="0.5.19",
        last="0.5.22",
    ),
    Semantics(
        "sglang-no-details",
        SGLANG,
        SPEC_DETAILS,
        "the field exists but the reply carried no details (a proxy that drops the `sglext` chunk, or a server path without it)",
        "0.5.19 – 0.5.23 (read)",
        "python/sglang/srt/entrypoints/openai/serving_completions.py, serving_chat.py",
        ("sgl-project/sglang#33518",),
        "release wheels read",
        REFUSED,
        "none; the log says the version has the field and names the endpoint",
        marker=NO_DETAILS,
        first="0.5.19",
    ),
    Semantics(
        "sglang-no-details-unknown-version",
        SGLANG,
        SPEC_DETAILS,
        "the reply carried no details and the server named no version to tell whether it has the field (0.5.19 and later do)",
        "a server without a readable `version`",
        "python/sglang/srt/entrypoints/http_server.py `get_server_info`",
        ("sgl-project/sglang#33518",),
        "release wheels read",
        REFUSED,
        "none; the log names both possible causes",
        marker=NO_DETAILS,
    ),
    Semantics(
        "sglang-adaptive",
        SGLANG,
        SPEC_DETAILS,
        "`speculative_adaptive` changes the draft length at run time, but `spec_num_proposed_drafts` = `spec_verify_ct` × (`speculative_num_draft_tokens` − 1) counts the configured one",
        "0.5.19 – 0.5.23 (read; `speculative_adaptive` from 0.5.17)",
        "python/sglang/srt/managers/tokenizer_manager.py `_calculate_spec_decoding_metrics`; python/sglang/srt/speculative/adaptive_spec_params.py",
        ("sgl-project/sglang#33518",),
        "release wheels read",
        PARTIAL,
        "acceptance length and histogram; no draft acceptance rate and no position rows (their denominators would be nominal)",
        marker=ADAPTIVE,
    ),
    Semantics(
        "sglang-fixed-k",
        SGLANG,
        SPEC_DETAILS,
        "`spec_num_proposed_drafts` = `spec_verify_ct` × (`speculative_num_draft_tokens` − 1), the steps' proposals at a fixed draft length",
        "0.5.19 – 0.5.23 (read)",
        "python/sglang/srt/managers/tokenizer_manager.py `_calculate_spec_decoding_metrics`",
        ("sgl-project/sglang#33518",),
        "release wheels read",
        READ,
        "acceptance length, draft acceptance rate, position rows, histogram",
    ),
    Semantics(
        "vllm-without-num-drafts",
        VLLM,
        VLLM_PROMETHEUS,
        "draft tokens counted but no `vllm:spec_decode_num_drafts` (verify steps), which vLLM PR 16665 added",
        "before PR 16665 (merged 2025-04; release not established)",
        "vllm/v1/spec_decode/metrics.py `SpecDecodingProm`",
        ("vllm-project/vllm#16665",),
        "PR thread (16665)",
        REFUSED,
        "none: the acceptance length and per-position rates need the verify steps",
        marker=NO_NUM_DRAFTS,
    ),
    Semantics(
        "vllm-prometheus",
        VLLM,
        VLLM_PROMETHEUS,
        "`vllm:spec_decode_num_drafts` (verify steps), `..._num_draft_tokens`, `..._num_accepted_tokens`, `..._num_accepted_tokens_per_pos{position}`",
        "from PR 16665 (merged 2025-04: num_drafts and per position; release not established); 0.32.0 read",
        "vllm/v1/spec_decode/metrics.py `SpecDecodingProm`",
        ("vllm-project/vllm#16665",),
        "installed release read",
        READ,
        "all but the histogram",
    ),
)
"""The rows, most specific first within a source; each source's last row is unbounded."""


_VERSION = re.compile(
    r"v?(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?(?:\+.*)?"
)
_STAGE = {"a": 1, "b": 2, "rc": 3}
VersionKey = tuple[tuple[int, ...], int, int, int]


def parse_version(text: str | None) -> VersionKey | None:
    """A server's version string (PEP 440 releases: ``X.Y.Z``, ``X.Y.ZrcN``,
    ``X.Y.Z.postN``, ``X.Y.Z.devN``; a ``+local`` part ignored) as a key that orders
    releases; None when absent or not such a version (a build string trtbench cannot
    order)."""
    match = _VERSION.fullmatch((text or "").strip())
    if match is None:
        return None
    release, stage, number, post, dev = match.groups()
    parts = tuple(int(p) for p in release.split("."))
    parts += (0,) * (3 - len(parts))
    rank = _STAGE[stage] if stage else 4  # a < b < rc < the release
    if dev is not None and stage is None and post is None:
        rank = 0  # X.Y.Z.dev0 comes before X.Y.Za1
    return parts, rank, int(number or 0), int(post or 0)


def _within(row: Semantics, version: VersionKey | None) -> bool:
    if row.first is None and row.last is None:
        return True
    if version is None:
        return False
    first = parse_version(row.first) if row.first else None
    last = parse_version(row.last) if row.last else None
    return (first is None or first <= version) and (last is None or version <= last)


def semantics_for(
    source: str, version: str | None, markers: Iterable[str] = ()
) -> Semantics:
    """The row that says how a server of ``version`` wrote ``source``: the first row of
    the source whose marker was seen (or that needs none) and whose releases hold the
    version (a row with bounds never holds an unknown version).

    Raises:
        KeyError: a source without a row (a programming error).
    """
    seen = set(markers)
    parsed = parse_version(version)
    for row in TABLE:
        if row.source != source:
            continue
        if (row.marker is None or row.marker in seen) and _within(row, parsed):
            return row
    raise KeyError(f"no semantics row for {source!r}")


def reason(row: Semantics, version: str | None) -> str:
    """One line naming the server, its version, the source, its meaning there and what
    trtbench does (``not read: …`` with the fallback, where it refuses the source)."""
    prs = ", ".join(
        p.replace("NVIDIA/TensorRT-LLM#", "TensorRT-LLM PR #")
        .replace("sgl-project/sglang#", "sglang PR #")
        .replace("vllm-project/vllm#", "vLLM PR #")
        for p in row.prs
    )
    where = f" ({prs})" if prs else ""
    return (
        f"{row.server} {version or 'of unknown version'}, "
        f"{SOURCE_NAMES.get(row.source, row.source)}: {row.meaning}{where}; "
        f"{_DOING[row.read]}: {row.figures} (docs/metrics.md, {row.key})"
    )


def markdown_table() -> str:
    """The table as docs/metrics.md shows it (a test checks the doc holds it verbatim)."""
    head = (
        "| key | server | source | meaning | releases | upstream | PRs | evidence | "
        "trtbench |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r.key} | {r.server} | `{r.source}` | {r.meaning} | {r.releases} | "
        f"{r.upstream} | {', '.join(r.prs) or '—'} | {r.evidence} | {r.read}: "
        f"{r.figures} |"
        for r in TABLE
    ]
    return head + "\n".join(lines) + "\n"
