"""What each request generated, for the lossless gate: ``loadtest/outputs.csv``.

One :class:`~trtbench.core.records.OutputRecord` per successful request, built from the parsed
responses when the request ends and streamed to ``loadtest/parts/<variant>.outputs.csv``
beside the request records (:mod:`trtbench.profiling.loadtest.records.record_sink`), so nothing is
kept per request in memory. It holds the output token ids when the server returns
``output_ids`` (prompt echo removed, as the token counts do), else a digest of the text plus
its length. A failed request (``error`` set) gets no row: a cut-off output says nothing
about losslessness, and the request is already counted in ``error_count``.

Digest: BLAKE2b (RFC 7693, Python :mod:`hashlib`) with an 8-byte digest, fed the ids as
little-endian int32 or the text as UTF-8, response by response.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from trtbench.core.data_files import read_csv_checked
from trtbench.core.export import Column, write_csv
from trtbench.core.records import (
    OUTPUT_KIND_IDS,
    OUTPUT_KIND_TEXT,
    OutputRecord,
    RequestRecord,
)
from trtbench.profiling.loadtest.clients.response_columns import (
    ParsedColumns,
    columns_of,
)
from trtbench.profiling.loadtest.clients.response_parse import ParsedResponse
from trtbench.profiling.loadtest.files.schemas import record_kinds
from trtbench.profiling.loadtest.stats.metrics import strip_prompt_echo
from trtbench.profiling.loadtest.workload.prompts import Prompt

DIGEST_BYTES = 8
OUTPUTS_CSV = "outputs.csv"  # in the run directory's loadtest/ folder

OUTPUTS_SCHEMA: tuple[Column, ...] = (
    Column("variant", "served variant (or the --variant label)"),
    Column("tier", "tier label: c<N> = concurrency N, r<X> = X requests/s"),
    Column("repeat", "0-based pass over the tier (loadtest.repeats)"),
    Column(
        "request_index",
        "0-based request index in its tier pass; the prompt is prompts[index mod count], the same for every variant",
        False,
    ),
    Column("request_id", "the request (as in requests.csv)"),
    Column(
        "output_tokens",
        "generated tokens, prompt echo excluded (ids counted; text: re-tokenized count)",
    ),
    Column(
        "output_kind",
        "ids (the server returned output_ids) | text (text only: digest + length compared)",
    ),
    Column(
        "output_digest",
        "BLAKE2b-64 hex of the ids as little-endian int32 (ids) or of the UTF-8 text (text)",
    ),
    Column(
        "output_token_ids",
        "the output token ids, space separated (empty for text)",
        False,
    ),
    Column("output_chars", "text length in characters (text; empty for ids)", False),
)

_FIX = "re-run `trtbench loadtest` for the variants it holds, or delete the file"


def ids_digest(ids: np.ndarray | Sequence[int]) -> str:
    """16 hex digits: BLAKE2b-64 of ``ids`` as little-endian int32 (shape [n])."""
    raw = np.asarray(ids, dtype="<i4").tobytes()
    return hashlib.blake2b(raw, digest_size=DIGEST_BYTES).hexdigest()


def text_digest(text: str) -> str:
    """16 hex digits: BLAKE2b-64 of ``text`` encoded as UTF-8."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=DIGEST_BYTES).hexdigest()


def output_record(
    parsed: ParsedColumns | Sequence[ParsedResponse],
    prompt: Prompt,
    record: RequestRecord,
    echo_possible: bool,
) -> OutputRecord | None:
    """The output of one request (None: it failed or carried neither ids nor text).

    ``parsed``: its responses (columns, :func:`~trtbench.profiling.loadtest.clients.
    response_columns.parse_columns`, or one parsed response each); ``record`` is the
    request's record (its ``echoed_tokens`` says how many leading ids were the prompt
    echoed back); ``echo_possible`` as in
    :func:`~trtbench.profiling.loadtest.files.responses.exchange_to_records` (text: a leading
    copy of the prompt text is removed).
    """
    if record.error is not None:
        return None
    if not isinstance(parsed, ParsedColumns):
        parsed = columns_of(parsed)
    head = (record.variant, record.tier, record.repeat, record.request_index)
    if parsed.ids is not None:
        ids = parsed.ids.astype(np.int64)[record.echoed_tokens :]
        return OutputRecord(
            *head,
            request_id=record.request_id,
            output_tokens=int(ids.size),
            output_kind=OUTPUT_KIND_IDS,
            output_digest=ids_digest(ids),
            output_token_ids=" ".join(map(str, ids.tolist())),
        )
    if all(t is None for t in parsed.texts):
        return None
    text = "".join(t or "" for t in parsed.texts)
    if echo_possible:
        text = text[strip_prompt_echo(text, prompt.text) :]
    return OutputRecord(
        *head,
        request_id=record.request_id,
        output_tokens=record.output_tokens,
        output_kind=OUTPUT_KIND_TEXT,
        output_digest=text_digest(text),
        output_token_ids="",
        output_chars=len(text),
    )


def read_outputs_csv(path: Path) -> pd.DataFrame:
    """Read ``outputs.csv`` (or a part file) back, checked against :data:`OUTPUTS_SCHEMA`.

    ``output_digest`` and ``output_token_ids`` stay text (a digest of digits only must
    keep its leading zeros); ``output_token_ids`` is "" where empty; ``request_index`` and
    ``output_chars`` are pandas ``Int64``.

    Raises:
        DataFileError: missing, truncated, a required column missing, an empty key
            (variant, tier, request_id, output_digest) or a value of the wrong type.
    """
    kinds = record_kinds(OutputRecord)
    frame = read_csv_checked(
        path,
        OUTPUTS_SCHEMA,
        fix=_FIX,
        kinds=kinds,
        keys=("variant", "tier", "request_id", "output_kind", "output_digest"),
        dtype={
            "output_digest": str,
            "output_token_ids": str,
            "variant": str,
            "tier": str,
            "output_kind": str,
        },
    )
    frame["output_token_ids"] = frame["output_token_ids"].fillna("").astype(str)
    for name in ("repeat", "request_index", "output_tokens", "output_chars"):
        frame[name] = pd.to_numeric(frame[name]).astype("Int64")
    return frame


def merge_outputs(
    target: Path, parts: Sequence[Path], replace: Iterable[str]
) -> pd.DataFrame | None:
    """Merge streamed part files into ``target`` (``loadtest/outputs.csv``), keeping the
    rows of variants not in ``replace``; return the merged rows (None: nothing recorded).

    The part files are left in place (the caller removes them with the other parts).

    Raises:
        DataFileError: ``target`` or a part is unreadable or malformed.
    """
    replace = set(replace)
    frames = []
    if Path(target).is_file():
        old = read_outputs_csv(target)
        frames.append(old[~old["variant"].isin(replace)])
    frames += [read_outputs_csv(p) for p in parts if Path(p).is_file()]
    frames = [f for f in frames if len(f)]
    if not frames:
        Path(target).unlink(missing_ok=True)
        return None
    merged = pd.concat(frames, ignore_index=True)
    write_csv(merged, target, OUTPUTS_SCHEMA)
    return merged
