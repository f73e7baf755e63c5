"""The serving config that implements a recommendation (pure: records in, snippets out).

Policy of the winning speculative variant (``recommendation.Recommendation.winner``):

* Off above the crossover: ``max_concurrency`` = its ``pays_up_to`` (the largest measured
  concurrency of the leading run of tiers where it beats the baseline); no cap when it pays
  at every measured tier.
* Draft-length schedule (stated rule): at each complete tier up to the cap, K = the largest
  draft position j ≤ the variant's draft length whose measured acceptance rate a_j
  (acceptance.csv ``kind == position``: P(the first j drafts are all accepted)) is at least
  the mode's threshold (:func:`accept_threshold`) and at least 1 (the tier was measured to
  pay); made non-increasing in the batch size. The threshold stands for what one more drafted
  position costs as a share of a decode step: a model drafter (draft_target, eagle3, mtp)
  runs one draft forward per position, so a position is kept only when it adds at least half
  a token per step (:data:`ACCEPT_THRESHOLD`); n-gram drafts by a table lookup, so a position
  costs only its verified token (τ / t(B) ≈ 0.02–0.03 on the demo, ``trtbench plan
  --from-run``) and is kept down to :data:`LOOKUP_ACCEPT_THRESHOLD`.
  The schedule is given only where it drafts fewer than the draft length somewhere. Keys
  follow TensorRT-LLM 1.4.0rc4 (``get_draft_len_for_batch_size``): a batch of b drafts the
  value of the smallest key ≥ b and nothing above the largest key (the cap).

Snippets: TensorRT-LLM's LLM API (``speculative_config`` YAML; each field checked against
that version's contract table, handed in as :class:`ContractView`), vLLM 0.32
(``--speculative-config`` JSON: ``num_speculative_tokens`` and
``num_speculative_tokens_per_batch_size``, ``vllm/config/speculative.py``; vLLM 0.32 has no
``disable_by_batch_size``), the engine path (which engine per concurrency range) and the
trtbench variant (``speculation:``, ``trtbench/spec/speculation.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import yaml

from trtbench.core import methods
from trtbench.profiling.report.recommendation import Recommendation
from trtbench.spec.serving import VLLM_METHODS

ACCEPT_THRESHOLD = 0.5
LOOKUP_ACCEPT_THRESHOLD = 0.1  # n-gram: well above the verified token's cost share
TRTLLM_DECODING = {
    m.name: m.trtllm_decoding_type
    for m in methods.METHODS.values()
    if m.trtllm_decoding_type is not None
}
"""mode → the TensorRT-LLM ``decoding_type`` of its config snippet (either path's)."""
DRAFT_LEN_FIELD = {
    m.name: m.draft_length
    for m in methods.METHODS.values()
    if m.draft_length == "num_nextn_predict_layers"
}
"""Modes whose K is not ``max_draft_len`` → the field that sets it."""
DRAFTER_PLACEHOLDER = {
    "draft_model": "<draft model dir>",
    "heads": "<Medusa heads dir>",
    "eagle3_head": "<EAGLE-3 heads dir>",
}
NEEDS_MODEL = {
    m.name: DRAFTER_PLACEHOLDER[m.drafter]
    for m in methods.METHODS.values()
    if m.drafter in DRAFTER_PLACEHOLDER
}
"""Modes whose drafts come from a checkpoint of their own → its placeholder in a snippet."""


@dataclass(frozen=True)
class Policy:
    """When the winning variant speculates and how far.

    Attributes:
        variant: the winning speculative variant; mode, draft_len: its mode and K (None:
            unknown, e.g. a Medusa tree or a variant with no build.json: a server
            trtbench did not build).
        max_concurrency: speculate only at batch ≤ this (None: no cap).
        schedule: ((batch size, K), ...) by batch size (None: keep K at every batch).
        notes: why the cap and schedule are what they are.
    """

    variant: str
    mode: str | None
    draft_len: int | None
    max_concurrency: int | None
    schedule: tuple[tuple[int, int], ...] | None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ContractView:
    """What one TensorRT-LLM version's LLM-API contract says about the winner's decoding
    config: ``fields`` (its class's field table, ``{name: {type, rules, confirmed,
    evidence, note…}}``), ``decoding_type`` (None: the version lacks it), ``pytorch`` (False:
    not on the PyTorch backend, e.g. Medusa)."""

    version: str
    decoding_type: str | None
    fields: Mapping[str, Mapping[str, Any]]
    pytorch: bool = True


@dataclass(frozen=True)
class Snippet:
    """One target's config text (``language``: yaml | bash | text), the data behind it and
    what the reader must know (fields left out, unconfirmed ones)."""

    target: str
    language: str
    text: str
    config: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def position_rates(
    acceptance: pd.DataFrame | None, variant: str
) -> dict[str, list[float]]:
    """Per tier: ``[a_1, a_2, …]`` (acceptance.csv position rows of ``variant``; the
    per-step source over Prometheus where a tier has both)."""
    if acceptance is None or acceptance.empty:
        return {}
    a = acceptance[
        (acceptance["variant"] == variant) & (acceptance["kind"] == "position")
    ]
    out: dict[str, list[float]] = {}
    for tier, g in a.groupby("tier", sort=False):
        src = "server_per_step" if (g["source"] == "server_per_step").any() else None
        g = g[g["source"] == src] if src else g
        g = g.sort_values("draft_position")
        out[str(tier)] = [
            float(v) for v in pd.to_numeric(g["value_ratio"], errors="coerce")
        ]
    return out


def accept_threshold(mode: str | None) -> float:
    """The smallest acceptance rate a_j at which draft position j is kept (module docstring):
    :data:`LOOKUP_ACCEPT_THRESHOLD` for ``ngram``, else :data:`ACCEPT_THRESHOLD`."""
    method = methods.method_of(mode)
    free = method is not None and method.free_drafts
    return LOOKUP_ACCEPT_THRESHOLD if free else ACCEPT_THRESHOLD


def scheduled_len(
    rates: list[float], k: int, threshold: float = ACCEPT_THRESHOLD
) -> int:
    """K at one tier by the module's rule: the largest j ≤ k with a_j ≥ ``threshold``, at
    least 1."""
    kept = [j for j, a in enumerate(rates[:k], start=1) if a >= threshold]
    return max(kept, default=1)


def make_policy(
    rec: Recommendation,
    variants: pd.DataFrame,
    tiers: pd.DataFrame,
    acceptance: pd.DataFrame | None,
) -> Policy | None:
    """The :class:`Policy` of ``rec.winner`` (None without a winner).

    Args:
        rec: the recommendation.
        variants: ``variant``, ``mode``, ``draft_len``, ``tree_nodes`` per variant.
        tiers: ``comparison.tier_table`` (tier statuses and concurrencies).
        acceptance: acceptance.csv (None: not measured).
    """
    if rec.winner is None:
        return None
    info = variants.set_index("variant").loc[rec.winner]
    recorded = info.get("mode")
    mode = None if recorded is None or pd.isna(recorded) else str(recorded)
    method = methods.method_of(mode)
    k = None if method is not None and method.tree else info.get("draft_len")
    k = None if k is None or pd.isna(k) else int(k)
    cross = next((c for c in rec.crossovers if c.variant == rec.winner), None)
    notes, cap = [], None
    if (
        cross is not None
        and cross.stops_at is not None
        and cross.pays_up_to is not None
    ):
        cap = int(cross.pays_up_to)
        notes.append(
            f"speculation off above {cap}: at {cross.stops_at:g} it no longer beats "
            f"the baseline ({cross.basis})"
        )
    elif cross is not None and cross.pays_up_to is None:
        notes.append(
            "it does not beat the baseline at the lowest tier: no cap can express "
            "where it pays; serve it only where the table above says it wins"
        )
    elif cross is not None:
        notes.append(
            f"it pays at every measured tier (up to {cross.pays_up_to:g}): no cap; "
            "measure higher concurrencies to find the crossover"
        )
    schedule = None
    threshold = accept_threshold(mode)
    rates = position_rates(acceptance, rec.winner)
    if k is None:
        notes.append(
            "no draft-length schedule: a Medusa tree (or an unknown K) has none"
        )
    elif not rates:
        notes.append(
            "no draft-length schedule: acceptance.csv has no per-position rates"
        )
    else:
        mine = tiers[
            (tiers["variant"] == rec.winner) & (tiers["tier_status"] == "complete")
        ]
        pairs, low = [], k
        for r in mine.sort_values("concurrency").itertuples():
            if pd.isna(r.concurrency) or r.tier not in rates:
                continue
            if cap is not None and r.concurrency > cap:
                break
            low = min(low, scheduled_len(rates[r.tier], k, threshold))
            pairs.append((int(r.concurrency), low))
        if pairs and any(n < k for _, n in pairs):
            if cap is not None and pairs[-1][0] < cap:
                pairs[-1] = (cap, pairs[-1][1])
            if pairs[0][0] > 1:
                pairs.insert(0, (1, pairs[0][1]))
            schedule = tuple(pairs)
            notes.append(
                f"draft-length schedule: per tier the largest j with acceptance "
                f"a_j ≥ {threshold} (never growing with the batch)"
            )
        else:
            notes.append(
                f"no draft-length schedule: every position up to K = {k} has "
                f"a_j ≥ {threshold} at every paying tier"
            )
    return Policy(rec.winner, mode, k, cap, schedule, tuple(notes))


def _yaml(data: Mapping[str, Any]) -> str:
    return yaml.safe_dump(
        dict(data), sort_keys=False, default_flow_style=False
    ).rstrip()


def llmapi_snippet(policy: Policy, contract: ContractView) -> Snippet:
    """``extra_llm_api_options`` YAML (``speculative_config``) for one TensorRT-LLM version.

    A field the contract lacks is left out and named in the notes; a field whose presence
    the contract does not confirm at the tag is named too; rule
    ``has_key_1_eq_max_draft_len`` (1.2-era) makes ``max_draft_len`` = the schedule's value
    at batch 1."""
    target = f"TensorRT-LLM {contract.version} LLM API"
    if contract.decoding_type is None or not contract.pytorch:
        why = (
            "has no decoding_type for mode " + policy.mode
            if contract.decoding_type is None
            else f"{contract.decoding_type} is not usable on the PyTorch backend"
        )
        text = f"# TensorRT-LLM {contract.version} {why}: use the engine path"
        return Snippet(target, "yaml", text, {}, (why,))
    spec: dict[str, Any] = {"decoding_type": contract.decoding_type}
    notes: list[str] = []
    k_field = DRAFT_LEN_FIELD.get(policy.mode, "max_draft_len")
    wanted: dict[str, Any] = {}
    if policy.draft_len is not None:
        wanted[k_field] = policy.draft_len
    if policy.schedule:
        wanted["draft_len_schedule"] = dict(policy.schedule)
        notes.append(
            "draft_len_schedule drafts nothing above its largest key, so it also "
            "turns speculation off above the crossover (no max_concurrency needed)"
        )
    elif policy.max_concurrency is not None:
        wanted["max_concurrency"] = policy.max_concurrency
    if policy.mode in NEEDS_MODEL:
        wanted["speculative_model"] = NEEDS_MODEL[policy.mode]
    for name, value in wanted.items():
        entry = contract.fields.get(name)
        if entry is None:
            notes.append(
                f"TensorRT-LLM {contract.version}'s contract has no "
                f"speculative_config.{name}: left out"
            )
            continue
        spec[name] = value
        if entry.get("confirmed") is False and name in (
            "max_concurrency",
            "draft_len_schedule",
        ):
            notes.append(
                f"speculative_config.{name}: presence at {contract.version} not "
                f"confirmed (contract evidence: {entry.get('evidence')})"
            )
        if name == "draft_len_schedule" and "0 above" not in str(entry.get("note", "")):
            notes.append(
                f"the {contract.version} contract does not say what a batch above "
                "the schedule's largest key drafts (1.4.0rc4: nothing); if it drafts, "
                f"add max_concurrency: {policy.max_concurrency}"
            )
        if (
            "has_key_1_eq_max_draft_len" in entry.get("rules", ())
            and name == "draft_len_schedule"
        ):
            spec[k_field] = value[1]
            notes.append(
                f"{contract.version} requires draft_len_schedule[1] == "
                f"max_draft_len: max_draft_len set to {value[1]}"
            )
    config = {"speculative_config": spec}
    return Snippet(target, "yaml", _yaml(config), config, tuple(notes))


def vllm_ranges(policy: Policy) -> list[list[int]] | None:
    """``num_speculative_tokens_per_batch_size`` entries ``[start, end, K]`` (inclusive;
    vLLM carries the last entry's K to every larger batch, ``build_dynamic_sd_schedule_lookup``
    in ``vllm/v1/spec_decode/dynamic/utils.py``); None when neither a cap nor a schedule."""
    k = policy.draft_len
    if k is None or (policy.schedule is None and policy.max_concurrency is None):
        return None
    pairs = list(policy.schedule or [(policy.max_concurrency or 1, k)])
    out, start = [], 1
    for batch, n in pairs:
        out.append([start, batch, n])
        start = batch + 1
    out.append([start, start, 0])
    return out


def vllm_snippet(policy: Policy, measured: Mapping[str, Any] | None = None) -> Snippet:
    """``vllm serve --speculative-config JSON`` for vLLM 0.32 (module docstring).

    Args:
        policy: the winner's policy.
        measured: the winner's own ``--speculative-config`` as its spec gives it
            (``vllm_server.args.speculative_config``; None: unknown): the keys the snippet
            does not set itself are added (n-gram's ``prompt_lookup_min`` / ``_max``, which
            vLLM would otherwise default to 5), so that the command serves what was
            measured; its ``model`` path stays the placeholder.
    """
    method = VLLM_METHODS.get(policy.mode)
    if method is None:
        return Snippet(
            "vLLM 0.32", "text", f"# vLLM serving is not mapped for mode {policy.mode}"
        )
    config: dict[str, Any] = {"method": method}
    if policy.mode in NEEDS_MODEL:
        config["model"] = NEEDS_MODEL[policy.mode]
    if policy.draft_len is not None:
        config["num_speculative_tokens"] = policy.draft_len
    notes = [
        "vLLM 0.32 has no disable_by_batch_size (vllm/config/speculative.py); "
        "num_speculative_tokens_per_batch_size with K = 0 above the crossover does its "
        "job (it switches full CUDA graphs to PIECEWISE and is off under data "
        "parallelism: vllm/config/vllm.py)"
    ]
    for key, value in (measured or {}).items():
        config.setdefault(key, value)
    if measured is None:
        notes.append(
            "the variant's own vLLM keys are unknown (no spec recorded, or vLLM cannot "
            "serve it as specified): vLLM's defaults may differ from what was measured, "
            "e.g. n-gram's prompt_lookup_min / _max"
        )
    ranges = vllm_ranges(policy)
    if ranges:
        config["num_speculative_tokens_per_batch_size"] = ranges
    elif policy.draft_len is None:
        notes.append(
            "no batch-size schedule: the variant's K is unknown (Medusa: the heads)"
        )
    text = f"vllm serve MODEL --speculative-config '{json.dumps(config)}'"
    return Snippet("vLLM 0.32", "bash", text, config, tuple(notes))


def engine_snippet(rec: Recommendation, policy: Policy | None) -> Snippet:
    """Which engine to serve per concurrency range (the engine path cannot switch
    speculation per batch: one engine, one K), from the best variant per tier."""
    lines, ranges = [], []
    for c in rec.tiers:
        if ranges and ranges[-1][0] == c.best:
            ranges[-1][2] = c.tier
        else:
            ranges.append([c.best, c.tier, c.tier])
    for best, first, last in ranges:
        span = first if first == last else f"{first} … {last}"
        lines.append(f"{span}: serve the `{best}` engine")
    if policy is not None and policy.schedule:
        shortest = min(n for _, n in policy.schedule)
        lines.append(
            f"rebuild `{policy.variant}` with max_draft_len {shortest} where the "
            f"schedule drafts {shortest} (an engine has one draft length)"
        )
    text = "\n".join(lines) or "no complete tier: nothing to serve"
    return Snippet("engine path", "text", text, {"ranges": ranges})


def trtbench_snippet(policy: Policy) -> Snippet:
    """The trtbench variant (``speculation:``) that runs the recommended policy on the
    reference backend, so a follow-up run can check it."""
    variant: dict[str, Any] = {
        "name": f"{policy.variant}-recommended",
        "mode": policy.mode,
    }
    if policy.draft_len is not None and policy.mode in methods.K_FROM_MAX_DRAFT_LEN:
        variant["max_draft_len"] = policy.draft_len
    speculation: dict[str, Any] = {}
    if policy.max_concurrency is not None:
        speculation["max_concurrency"] = policy.max_concurrency
    method = methods.method_of(policy.mode)
    if policy.schedule and not (method is not None and method.tree):
        speculation["draft_len_schedule"] = dict(policy.schedule)
    if speculation:
        variant["speculation"] = speculation
    config = {"variants": [variant]}
    return Snippet(
        "trtbench variant",
        "yaml",
        _yaml(config),
        config,
        ("add it to the spec's variants (keep the variant's other fields)",),
    )
