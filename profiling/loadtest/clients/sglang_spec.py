"""SGLang's own speculative counts: per request from ``sglext.spec_tokens_details``, found by
probing, and why its server-wide figures are not read as a tier's.

**Finding SGLang** (:func:`probe_sglang`): ``GET /server_info`` (older releases:
``/get_server_info``) answers a JSON object with ``internal_states`` (a list, one per data
parallel rank) and ``version`` (sglang's ``http_server.py``). trtllm-serve also has a
``/server_info``, without ``internal_states``; vLLM has none.

**Per request** (sglang 0.5.19+, PR #33518 "feat(api): add sglext_spec"): a request with
``return_spec_tokens_details: true`` (``protocol.py``, on ``/v1/completions`` and
``/v1/chat/completions``) gets, when streamed, one extra chunk after every content chunk (the
one with ``finish_reason`` included) and before the usage chunk and ``data: [DONE]``:
``{"choices": [], "sglext": {"spec_tokens_details": {...}}}`` (sglang 0.5.23
``serving_completions.py`` lines 444–476); not streamed, ``response.sglext.spec_tokens_details``.
With ``n > 1`` it is a list, one per choice; trtbench sends one choice and reads the first.
Its fields (``tokenizer_manager.py`` 0.5.23 ``_calculate_spec_decoding_metrics``, lines
3138–3207; computed when the request finishes): ``spec_verify_ct`` (verify steps),
``spec_num_proposed_drafts`` (= ``spec_verify_ct × (speculative_num_draft_tokens − 1)``),
``spec_num_correct_drafts`` (accepted drafts, no bonus token), ``spec_accept_rate`` (=
correct / proposed), ``spec_accept_length`` (= ``completion_tokens / spec_verify_ct``, the
prefill's token included), ``spec_correct_drafts_histogram`` (index j = verify steps that
accepted exactly j drafts: ``Req.update_spec_correct_drafts_histogram`` in
``managers/schedule_batch.py`` adds 1 at the step's correct-draft count) and others trtbench
does not read (``spec_cap_length``, ``spec_block_accept_length``, ``spec_cap_lens_histogram``).

trtbench's definitions (docs/metrics.md) take drafts = ``spec_num_proposed_drafts``, accepted =
``spec_num_correct_drafts``, verify steps = ``spec_verify_ct``; it does not use SGLang's two
ratios. Older SGLang ignores the field (it sends no ``sglext`` chunk): its per-request counts
(0.5.9–0.5.15 ``spec_accept_token_num`` …) are only in the native ``/generate`` meta info or, from
0.5.13, in non-streamed chat replies (``return_meta_info``), which a streamed load test does
not read, so such a server gives no counts and :func:`details_missing_reason` says why.

**Refused as a tier's figure**: ``/server_info``'s ``internal_states[i].avg_spec_accept_length``
is a running average over the server's life (accepted tokens / forward passes, refreshed every
``decode_log_interval`` decode iterations, reset only by ``/flush_cache``); it has no
denominator, so it cannot be split into tiers, and by the first tier trtbench's own probe and
warm-up requests are already inside it (:func:`server_info_acceptance` reads it for the log).
The Prometheus gauges ``sglang:spec_accept_length`` / ``sglang:spec_accept_rate`` hold the last
``decode_log_interval`` window only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx

from trtbench.profiling.loadtest.clients.response_parse import ParsedResponse
from trtbench.profiling.loadtest.stats.acceptance import SGLANG_DETAILS

log = logging.getLogger(__name__)

REQUEST_FIELD = "return_spec_tokens_details"
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
FIRST_VERSION = "0.5.19"
Stamped = tuple[int, ParsedResponse]


@dataclass(frozen=True)
class SpecDetails:
    """One request's counts: proposed drafts, accepted drafts, verify steps, and the steps by
    accepted drafts (``()`` when absent or inconsistent with the totals)."""

    proposed: int
    accepted: int
    verify_steps: int
    histogram: tuple[int, ...] = ()


def details_of(event: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``sglext.spec_tokens_details`` of one streamed chunk (the first choice's when it is a
    list); None when absent. Never raises."""
    ext = event.get("sglext")
    details = ext.get("spec_tokens_details") if isinstance(ext, Mapping) else None
    if isinstance(details, list):
        details = details[0] if details else None
    return details if isinstance(details, Mapping) else None


def _count(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def parse_details(details: Mapping[str, Any]) -> SpecDetails | None:
    """The counts of one ``spec_tokens_details``; None when a total is missing or not a
    non-negative integer, or accepted > proposed, or drafts without a verify step (the
    fields of a server without speculation). The histogram is kept only when it counts
    every step and every accepted draft (Σ h = steps, Σ j · h_j = accepted)."""
    proposed = _count(details.get("spec_num_proposed_drafts"))
    accepted = _count(details.get("spec_num_correct_drafts"))
    steps = _count(details.get("spec_verify_ct"))
    if proposed is None or accepted is None or steps is None:
        return None
    if accepted > proposed or (proposed > 0 and steps == 0):
        return None
    raw = details.get("spec_correct_drafts_histogram")
    valid = isinstance(raw, list) and all(_count(v) is not None for v in raw)
    hist = tuple(raw) if valid else ()  # type: ignore[arg-type]
    if sum(hist) != steps or sum(j * h for j, h in enumerate(hist)) != accepted:
        hist = ()
    return SpecDetails(proposed, accepted, steps, hist)


def attach_details(
    stamped: Sequence[Stamped], raw: Mapping[str, Any] | None
) -> list[Stamped]:
    """The stream's responses with the request's counts (``raw``: its
    ``spec_tokens_details``, :func:`parse_details`) on the last one, as request totals
    (``cumulative_counts``) named :data:`SGLANG_DETAILS`, with its verify steps and
    histogram. Unchanged without usable details, or where the stream already carries
    counts."""
    out = list(stamped)
    details = None if raw is None else parse_details(raw)
    if details is None or not out or any(p.draft_tokens is not None for _, p in out):
        return out
    t, p = out[-1]
    out[-1] = (
        t,
        replace(
            p,
            draft_tokens=details.proposed,
            accepted_draft_tokens=details.accepted,
            cumulative_counts=True,
            verify_steps=details.verify_steps,
            accepted_histogram=details.histogram or None,
            counts_source=SGLANG_DETAILS,
        ),
    )
    return out


def request_fields(
    info: Mapping[str, Any] | None,
    extra: Mapping[str, object] | None,
    url: str,
    details_seen: bool,
) -> dict[str, object]:
    """The extra request fields for a server: ``extra`` (the caller's, which win), plus
    :data:`REQUEST_FIELD` when ``info`` (its ``/server_info``) says it is SGLang. An SGLang
    server whose probe reply carried no details (``details_seen`` False) is logged with the
    reason (:func:`details_missing_reason`)."""
    fields = dict(extra or {})
    if info is None:
        return fields
    if not details_seen:  # a warning only where the server speculates
        level = logging.WARNING if info.get("speculative_algorithm") else logging.INFO
        log.log(level, "%s: %s", url, details_missing_reason(info))
    return {REQUEST_FIELD: True, **fields}


def is_sglang(info: Any) -> bool:
    """Whether a ``/server_info`` answer is SGLang's (a JSON object with a list
    ``internal_states``)."""
    return isinstance(info, Mapping) and isinstance(info.get("internal_states"), list)


def probe_sglang(client: httpx.Client, root: str) -> Mapping[str, Any] | None:
    """SGLang's ``/server_info`` (or ``/get_server_info``) at ``root`` (``http://HOST:PORT``);
    None when the server is not SGLang or does not answer. Never raises."""
    for path in SERVER_INFO_PATHS:
        try:
            reply = client.get(root + path)
            info = reply.json() if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            continue
        if is_sglang(info):
            return info
    return None


def details_missing_reason(info: Mapping[str, Any]) -> str:
    """Why an SGLang server's probe reply carried no ``spec_tokens_details`` (one line)."""
    version = info.get("version") or "of unknown version"
    algorithm = info.get("speculative_algorithm")
    if not algorithm:
        return f"SGLang {version} serves without speculative decoding"
    value, why = server_info_acceptance(info)
    lifetime = (
        ""
        if value is None
        else f"; its /server_info avg_spec_accept_length {value:.3g} is {why}"
    )
    return (
        f"SGLang {version} ({algorithm}) sent no sglext.spec_tokens_details: the field "
        f"{REQUEST_FIELD} came in sglang {FIRST_VERSION} (PR #33518); older releases give "
        "no per-request counts on a streamed OpenAI endpoint, so its tiers get no "
        f"acceptance figures{lifetime}"
    )


def server_info_acceptance(info: Mapping[str, Any]) -> tuple[float | None, str]:
    """``avg_spec_accept_length`` of ``/server_info`` (the mean over its data-parallel ranks'
    ``internal_states``; None when absent) and why it is not a tier's figure (module doc)."""
    values = [
        s.get("avg_spec_accept_length")
        for s in info.get("internal_states") or []
        if isinstance(s, Mapping)
    ]
    numbers = [float(v) for v in values if isinstance(v, int | float) and v > 0]
    value = sum(numbers) / len(numbers) if numbers else None
    return value, (
        "a running average over the server's life (updated every decode_log_interval "
        "decode iterations, reset only by /flush_cache) that already holds trtbench's probe "
        "and warm-up requests: not read as any tier's acceptance length"
    )
