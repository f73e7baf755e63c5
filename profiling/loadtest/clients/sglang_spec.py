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
(0.5.9 ``spec_accept_token_num`` …, 0.5.13–0.5.18 ``spec_num_correct_drafts`` …) are only in
the native ``/generate`` meta info or, from 0.5.13, in non-streamed chat replies
(``return_meta_info``), which a streamed load test does not read, so such a server gives no counts and :func:`details_missing_reason` says why; a
server whose version has the field but sent none (0.5.19–0.5.22's embedded Rust server,
``SGLANG_RUST_SERVER``, does not know it) is not blamed on its version.

**What the proposals mean** (``records/counter_versions.py``). 0.5.19–0.5.23 count
``spec_verify_ct × (speculative_num_draft_tokens − 1)``, the configured draft length: exact
while every step drafts it, nominal under ``speculative_adaptive`` (``/server_info``), which
changes the draft length at run time. Such a request's counts are named
:data:`~trtbench.profiling.loadtest.stats.acceptance.SGLANG_NOMINAL`: its verify steps,
accepted drafts and histogram are read, its proposals are not (no draft acceptance rate, no
position rows). SGLang's main branch after 0.5.23 counts the proposals themselves and adds
``spec_num_proposed_drafts_by_position`` (index j = steps that proposed a draft at position
j) with ``spec_proposed_drafts_histogram`` (index j = steps that proposed j drafts): where a
reply carries them the proposals are exact whatever the draft length, and the request keeps
its steps by proposed drafts (``proposed_drafts_histogram``), which give each draft position
its own denominator.

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
from trtbench.profiling.loadtest.records import counter_versions as versions
from trtbench.profiling.loadtest.stats.acceptance import SGLANG_DETAILS, SGLANG_NOMINAL

log = logging.getLogger(__name__)

REQUEST_FIELD = "return_spec_tokens_details"
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
FIRST_VERSION = "0.5.19"  # counter_versions: sglang-before-field ends at 0.5.18
BY_POSITION = "spec_num_proposed_drafts_by_position"
PROPOSED_HISTOGRAM = "spec_proposed_drafts_histogram"
Stamped = tuple[int, ParsedResponse]


@dataclass(frozen=True)
class SpecDetails:
    """One request's counts: proposed drafts, accepted drafts, verify steps, the steps by
    accepted drafts and, where the server counts the proposals themselves (module doc), the
    steps by proposed drafts (each ``()`` when absent or inconsistent with the totals)."""

    proposed: int
    accepted: int
    verify_steps: int
    histogram: tuple[int, ...] = ()
    proposed_histogram: tuple[int, ...] = ()


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


def _histogram(raw: Any, steps: int, total: int) -> tuple[int, ...]:
    """A list of counts by j that counts every step and ``total`` (Σ h = steps,
    Σ j · h_j = total); ``()`` otherwise."""
    valid = isinstance(raw, list) and all(_count(v) is not None for v in raw)
    hist = tuple(raw) if valid else ()  # type: ignore[arg-type]
    if sum(hist) != steps or sum(j * h for j, h in enumerate(hist)) != total:
        return ()
    return hist


def proposed_histogram(
    details: Mapping[str, Any], steps: int, proposed: int
) -> tuple[int, ...]:
    """Steps by proposed drafts (index j = steps that proposed j) from
    ``spec_proposed_drafts_histogram``, else from ``spec_num_proposed_drafts_by_position``
    (index j = steps that proposed a draft at position j, so h_j = by_pos[j−1] − by_pos[j]);
    ``()`` where neither is there or agrees with the totals."""
    hist = _histogram(details.get(PROPOSED_HISTOGRAM), steps, proposed)
    by_pos = details.get(BY_POSITION)
    if hist or not isinstance(by_pos, list) or not by_pos:
        return hist
    if not all(_count(v) is not None for v in by_pos) or by_pos[0] > steps:
        return ()
    counts = [steps - by_pos[0]] + [
        a - b for a, b in zip(by_pos, [*by_pos[1:], 0], strict=True)
    ]
    return _histogram(counts, steps, proposed)


def parse_details(details: Mapping[str, Any]) -> SpecDetails | None:
    """The counts of one ``spec_tokens_details``; None when a total is missing or not a
    non-negative integer, or accepted > proposed, or drafts without a verify step (the
    fields of a server without speculation). The histograms are kept only when they count
    every step and every accepted (proposed) draft (Σ h = steps, Σ j · h_j = accepted);
    the proposed one only from a server that counts the proposals (module doc)."""
    proposed = _count(details.get("spec_num_proposed_drafts"))
    accepted = _count(details.get("spec_num_correct_drafts"))
    steps = _count(details.get("spec_verify_ct"))
    if proposed is None or accepted is None or steps is None:
        return None
    if accepted > proposed or (proposed > 0 and steps == 0):
        return None
    hist = _histogram(details.get("spec_correct_drafts_histogram"), steps, accepted)
    return SpecDetails(
        proposed, accepted, steps, hist, proposed_histogram(details, steps, proposed)
    )


def attach_details(
    stamped: Sequence[Stamped],
    raw: Mapping[str, Any] | None,
    adaptive: bool = False,
) -> list[Stamped]:
    """The stream's responses with the request's counts (``raw``: its
    ``spec_tokens_details``, :func:`parse_details`) on the last one, as request totals
    (``cumulative_counts``) named :data:`SGLANG_DETAILS`, with its verify steps and
    histograms; named :data:`SGLANG_NOMINAL` instead where the server drafts adaptively
    (``adaptive``: its ``speculative_adaptive``) and its details give no steps by proposed
    drafts (it does not count the proposals; module doc). Unchanged without usable details, or where the stream already carries counts."""
    out = list(stamped)
    details = None if raw is None else parse_details(raw)
    if details is None or not out or any(p.draft_tokens is not None for _, p in out):
        return out
    nominal = adaptive and not details.proposed_histogram  # proposals not counted
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
            proposed_histogram=details.proposed_histogram or None,
            counts_source=SGLANG_NOMINAL if nominal else SGLANG_DETAILS,
        ),
    )
    return out


def request_fields(
    info: Mapping[str, Any] | None,
    extra: Mapping[str, object] | None,
    url: str,
    details_seen: str | None,
    endpoint: str = "completions",
) -> dict[str, object]:
    """The extra request fields for a server: ``extra`` (the caller's, which win), plus
    :data:`REQUEST_FIELD` when ``info`` (its ``/server_info``) says it is SGLang. An SGLang
    server whose probe reply on ``/v1/<endpoint>`` carried no details (``details_seen``:
    the source its counts were named, None without) is logged with the reason
    (:func:`details_missing_reason`); one whose proposals are nominal
    (:data:`SGLANG_NOMINAL`) with what is not read and why."""
    fields = dict(extra or {})
    if info is None:
        return fields
    if details_seen is None:  # a warning only where the server speculates
        level = logging.WARNING if info.get("speculative_algorithm") else logging.INFO
        log.log(level, "%s: %s", url, details_missing_reason(info, endpoint))
    elif details_seen == SGLANG_NOMINAL:
        row = versions.semantics_for(
            versions.SPEC_DETAILS, _version(info), [versions.ADAPTIVE]
        )
        log.warning(
            "%s: speculative_adaptive is on: %s",
            url,
            versions.reason(row, _version(info)),
        )
    return {REQUEST_FIELD: True, **fields}


def details_source(
    parsed: Sequence[Stamped], info: Mapping[str, Any] | None
) -> str | None:
    """The name a probe reply's details will be read under for the whole run:
    :data:`SGLANG_NOMINAL` where ``info`` (``/server_info``) says the server drafts
    adaptively and the details do not count the proposals, else :data:`SGLANG_DETAILS`;
    None where the reply carried none."""
    named = next((p for _, p in parsed if p.counts_source == SGLANG_DETAILS), None)
    if named is None:
        return None
    counted = named.proposed_histogram is not None
    return SGLANG_NOMINAL if is_adaptive(info) and not counted else SGLANG_DETAILS


def is_adaptive(info: Mapping[str, Any] | None) -> bool:
    """Whether SGLang's ``/server_info`` says it drafts adaptively."""
    return bool(info and info.get("speculative_adaptive"))


def _version(info: Mapping[str, Any]) -> str | None:
    version = info.get("version")
    return str(version) if version else None


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


def details_missing_reason(
    info: Mapping[str, Any], endpoint: str = "completions"
) -> str:
    """Why an SGLang server's probe reply on ``/v1/<endpoint>`` carried no
    ``spec_tokens_details`` (one line): its version where that is the cause
    (``counter_versions`` row ``sglang-before-field``), else the causes a version with the
    field leaves (the embedded Rust server of 0.5.19–0.5.22, a proxy)."""
    version = _version(info)
    name = version or "of unknown version"
    algorithm = info.get("speculative_algorithm")
    if not algorithm:
        return f"SGLang {name} serves without speculative decoding"
    value, why = server_info_acceptance(info)
    lifetime = (
        ""
        if value is None
        else f"; its /server_info avg_spec_accept_length {value:.3g} is {why}"
    )
    row = versions.semantics_for(versions.SPEC_DETAILS, version, [versions.NO_DETAILS])
    head = f"SGLang {name} ({algorithm}) sent no sglext.spec_tokens_details"
    if row.key == "sglang-before-field":
        return (
            f"{head}: the field {REQUEST_FIELD} came in sglang {FIRST_VERSION} (PR "
            "#33518); older releases give no per-request counts on a streamed OpenAI "
            f"endpoint, so its tiers get no acceptance figures{lifetime}"
        )
    has = (
        f"it has the field {REQUEST_FIELD} (sglang {FIRST_VERSION}+, PR #33518), so its "
        "version is not the cause"
        if version
        else f"whether it has the field {REQUEST_FIELD} (sglang {FIRST_VERSION}+) is "
        "unknown"
    )
    causes = "a proxy in front that drops the sglext chunk"
    if row.key == "sglang-rust-server" or version is None:
        causes = (
            "the embedded Rust server (SGLANG_RUST_SERVER), which knows the field only "
            "from 0.5.23, or " + causes
        )
    return (
        f"{head} on /v1/{endpoint}: {has}; likely {causes} (send one request with "
        f"{REQUEST_FIELD}: true to /v1/{endpoint} to see); its tiers get no acceptance "
        f"figures{lifetime}"
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
