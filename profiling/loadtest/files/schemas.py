"""CSV schemas of ``loadtest/requests.csv``, ``responses.csv`` and ``summary.csv``.

Column names carry their unit (``_ns``, ``_ms``, ``_tokens``, ``_per_s``, ``_ratio``). Metric
names follow AIPerf where the meaning is the same (``time_to_first_token``,
``inter_token_latency``, ``inter_chunk_latency``, ``request_latency``,
``output_token_throughput_per_user``, ``output_sequence_length``). ``*_ns`` times are the
client's ``perf_counter_ns()`` readings (comparable within one run only).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from trtbench.core.data_files import read_csv_checked
from trtbench.core.export import Column
from trtbench.core.records import RequestRecord, ResponseRecord
from trtbench.profiling.loadtest.files.rounds_table import INTERFERENCE_COLUMNS
from trtbench.profiling.loadtest.stats.acceptance import ACCEPTANCE_SUMMARY_COLUMNS
from trtbench.profiling.loadtest.stats.lossless import LOSSLESS_SUMMARY_COLUMNS
from trtbench.profiling.loadtest.stats.metrics import (
    METRICS,
    STATS,
    request_metrics,
    stat_column,
)
from trtbench.profiling.loadtest.stats.trusted_summary import (
    IN_WINDOW,
    REPEAT_SUMMARY_COLUMNS,
)

_TIER = (
    Column("variant", "served variant (or the --variant label)"),
    Column("tier", "tier label: c<N> = concurrency N, r<X> = X requests/s"),
)

_LOAD = (
    Column(
        "concurrency", "closed-loop concurrency of the tier (empty in rate mode)", False
    ),
    Column(
        "request_rate_per_s",
        "target request rate of the tier (empty in concurrency mode)",
        False,
    ),
    Column(
        "max_concurrency",
        "cap on requests in flight of the open loop (--max-concurrency; empty: no cap)",
        False,
    ),
)

REQUESTS_SCHEMA: tuple[Column, ...] = (
    *_TIER,
    *_LOAD,
    Column("request_id", "unique request id (<variant>-<tier>-<index>)"),
    Column("task_id", "prompt id (dataset task_id or synthetic-<i>)"),
    Column(
        "category",
        "the prompt's category: its dataset's own or its source's name (loadtest.datasets); "
        "empty for synthetic prompts, a single trtllm-bench file and files from before the column",
        False,
        "str",
    ),
    Column("scheduled_ns", "intended send time"),
    Column(
        "sent_ns", "time the request was handed to gRPC (stamped right before the call)"
    ),
    Column("first_token_ns", "arrival of the first response carrying a token", False),
    Column("last_token_ns", "arrival of the last response carrying a token", False),
    Column("end_ns", "end of the request (final response, error or timeout)"),
    Column("input_tokens", "prompt length in tokens (see input_token_source)"),
    Column("requested_output_tokens", "max_tokens sent"),
    Column("output_tokens", "generated tokens, prompt echo excluded"),
    Column("token_responses", "responses that carried at least one token"),
    Column(
        "empty_responses", "responses with no token (e.g. the empty final response)"
    ),
    Column("echoed_tokens", "prompt tokens echoed by the server (not output)"),
    Column("first_response_tokens", "tokens in the first token-carrying response"),
    Column("draft_tokens", "draft tokens proposed (server-reported)", False),
    Column("accepted_draft_tokens", "draft tokens accepted (server-reported)", False),
    Column(
        "input_token_source",
        "tokenizer | dataset | words (approximate: 1 word = 1 token)",
    ),
    Column(
        "output_token_source",
        "output_ids (exact ids) | retokenized (text re-encoded with the model's tokenizer)",
    ),
    Column("error", "empty on success, else why the request failed", False),
    Column(
        "repeat",
        "0-based pass over the tier (loadtest.repeats); empty in files from before the column: 0",
        False,
    ),
    Column(
        "request_index",
        "0-based request index in its tier pass; the prompt is prompts[index mod count], the same for every variant",
        False,
    ),
    Column(
        "ready_ns",
        "when the request could go: max(scheduled_ns, when its --max-concurrency slot became free); empty in older files: scheduled_ns",
        False,
    ),
    Column(
        "server_arrival_ns",
        "server-reported arrival (arrival_time_ns) moved onto this clock; empty when not reported",
        False,
    ),
    Column(
        "server_scheduled_ns",
        "server-reported first scheduling (first_scheduled_time_ns) moved onto this clock; empty when not reported",
        False,
    ),
    Column(
        "server_first_token_ns",
        "server-reported first token (first_token_time_ns) moved onto this clock; empty when not reported",
        False,
    ),
    Column(
        "verify_steps",
        "verify steps the server counted for the request (SGLang spec_verify_ct); empty when not reported",
        False,
    ),
    Column(
        "accepted_drafts_histogram",
        "the request's verify steps by accepted drafts, space separated: the j-th count = steps that accepted exactly j (SGLang spec_correct_drafts_histogram); empty when not reported",
        False,
        "str",
    ),
    Column(
        "spec_counts_source",
        "name of the server's own per-request counts (sglang_spec_tokens_details; sglang_spec_tokens_details_nominal: its proposals are the configured draft length, not the drafts proposed); empty: inferred from the responses",
        False,
        "str",
    ),
    Column(
        "proposed_drafts_histogram",
        "the request's verify steps by proposed drafts, space separated: the j-th count = steps that proposed exactly j (SGLang spec_proposed_drafts_histogram / spec_num_proposed_drafts_by_position); empty where the server does not count the proposals",
        False,
        "str",
    ),
    Column("time_to_first_token_ms", "first_token_ns − sent_ns", False),
    Column("request_latency_ms", "E2E: last_token_ns − sent_ns", False),
    Column(
        "time_per_output_token_ms",
        "(E2E − TTFT) / (output_tokens − first_response_tokens)",
        False,
    ),
    Column(
        "tokens_per_response_tokens",
        "(output_tokens − first_response_tokens) / (token_responses − 1)",
        False,
    ),
    IN_WINDOW,
)

RESPONSES_SCHEMA: tuple[Column, ...] = (
    *_TIER,
    Column("request_id", "request the response belongs to"),
    Column("index", "0-based position in the request's stream"),
    Column("received_ns", "time the client received it"),
    Column("tokens", "output tokens it carried (0: an empty response)"),
    Column("final", "the server flagged it triton_final_response"),
    Column(
        "draft_tokens",
        "draft tokens proposed in the steps it covers (server-reported)",
        False,
    ),
    Column("accepted_draft_tokens", "of those, accepted (server-reported)", False),
)

_SUMMARY_HEAD = (
    *_TIER,
    Column(
        "tier_status",
        "complete | partial (server died after some requests) | failed (no request succeeded) | interrupted (stop signal); only complete tiers are measurements (empty in files from before the column: complete)",
        False,
    ),
    Column(
        "tier_status_reason", "why the tier is not complete (empty when it is)", False
    ),
    *_LOAD,
    Column(
        "request_count", "measured requests (warmup excluded), failed ones included"
    ),
    Column("error_count", "failed requests"),
    Column(
        "osl_mismatch_count",
        "requests whose output length missed the requested one by > min(5%, 50 tokens)",
    ),
    Column(
        "duration_s",
        "max end − min send over the tier's requests, summed over its passes",
    ),
    Column(
        "output_token_throughput_tokens_per_s",
        "Σ output tokens of successful requests / duration",
    ),
    Column("request_throughput_per_s", "successful requests / duration"),
    Column(
        "request_goodput_per_s",
        "requests meeting every SLO / duration (empty without SLOs)",
        False,
    ),
    Column(
        "good_request_fraction_ratio",
        "requests meeting every SLO / all requests",
        False,
    ),
)

_STAT_TEXT = {
    "mean": "mean",
    "std": "standard deviation (ddof 0)",
    "min": "minimum",
    "max": "maximum",
    "p50": "50th percentile (numpy linear)",
    "p90": "90th percentile",
    "p95": "95th percentile",
    "p99": "99th percentile",
    "n": "number of samples",
}

SUMMARY_SCHEMA: tuple[Column, ...] = (
    *_SUMMARY_HEAD,
    *(
        Column(stat_column(m, s), f"{m.description} — {_STAT_TEXT[s]}", False)
        for m in METRICS
        for s in (*STATS, "n")
    ),
    Column(
        "tpot_speedup_ratio",
        "baseline mean TPOT / this variant's mean TPOT, same tier",
        False,
    ),
    Column(
        "output_token_throughput_speedup_ratio",
        "this variant's output tok/s / baseline's, same tier",
        False,
    ),
    Column(
        "speedup_note",
        "why the speedups are empty (a tier or the baseline's tier not complete, no tokens)",
        False,
    ),
    Column(
        "event_loop_lag_p50_ms",
        "client event-loop lag (actual − intended wake of a 10 ms sampler) — 50th percentile (≤ 1.9 % high; an idle loop's wakes are up to 1 ms late)",
        False,
    ),
    Column(
        "event_loop_lag_p99_ms",
        "client event-loop lag (actual − intended wake of a 10 ms sampler) — 99th percentile (≤ 1.9 % high)",
        False,
    ),
    Column("event_loop_lag_max_ms", "client event-loop lag — maximum", False),
    *REPEAT_SUMMARY_COLUMNS,
    *INTERFERENCE_COLUMNS,
    *LOSSLESS_SUMMARY_COLUMNS,
    *ACCEPTANCE_SUMMARY_COLUMNS,
)

_PER_REQUEST = (
    "time_to_first_token_ms",
    "request_latency_ms",
    "time_per_output_token_ms",
    "tokens_per_response_tokens",
)


def requests_table(requests: pd.DataFrame) -> pd.DataFrame:
    """Request records plus their per-request metrics (NaN for failed requests), pure."""
    derived = request_metrics(requests).set_index("request_id")[list(_PER_REQUEST)]
    return requests.join(derived, on="request_id")


def record_kinds(record: type) -> dict[str, str]:
    """Column → ``int`` | ``float`` | ``bool`` | ``str`` from a record dataclass's field types."""
    kinds = {}
    for f in dataclasses.fields(record):
        text = str(f.type)
        kind = next(
            (k for k in ("int", "float", "bool", "str") if text.startswith(k)), None
        )
        if kind is not None:
            kinds[f.name] = kind
    return kinds


def read_records_csv(path: Path) -> pd.DataFrame:
    """Read ``requests.csv`` or ``responses.csv`` back into record columns (derived dropped).

    Integer columns that may be empty (``first_token_ns``, draft counts) come back as
    pandas ``Int64``; ``error`` is NaN for successful requests. The file is checked first
    (:func:`trtbench.core.data_files.read_csv_checked`) against :data:`REQUESTS_SCHEMA` or
    :data:`RESPONSES_SCHEMA` (chosen by its header: ``received_ns`` means responses), each
    value against its :class:`~trtbench.core.records.RequestRecord` / ``ResponseRecord`` type.

    Raises:
        DataFileError: missing, truncated (a row cut off), a required column missing, an empty
            ``variant``/``tier``/``request_id``, or a value of the wrong type; the message
            names the file and line.
    """
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as handle:
            header = handle.readline()
    except OSError:
        header = ""
    responses = "received_ns" in header.strip().split(",")
    record = ResponseRecord if responses else RequestRecord
    frame = read_csv_checked(
        path,
        RESPONSES_SCHEMA if responses else REQUESTS_SCHEMA,
        fix="re-run `trtbench loadtest` for the variants it holds, or delete the file",
        kinds=record_kinds(record),
        keys=("variant", "tier", "request_id"),
    )
    names = [f.name for f in dataclasses.fields(record)]
    frame = frame[[n for n in names if n in frame.columns]]
    for name in frame.columns:
        if name.endswith(("_ns", "_tokens")) or name in (
            "concurrency",
            "max_concurrency",
        ):
            frame[name] = frame[name].astype("Int64")
    return frame
