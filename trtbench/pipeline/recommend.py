"""The recommendation of a run, joined from its tables and the LLM-API contracts.

Analysis: :mod:`trtbench.profiling.report.recommendation`; the config snippets:
:mod:`~trtbench.profiling.report.recommendation_config` (each TensorRT-LLM version's
``speculative_config`` fields from ``builders/trtllm/data/llmapi_<version>.json``); text and
``recommendation.json``: :mod:`~trtbench.profiling.report.recommendation_text`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from trtbench.builders.trtllm.llmapi_contract import (
    LLMAPI_VERSIONS,
    load_llmapi_contract,
)
from trtbench.core.errors import ConfigError
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.vllm_deploy import recorded_spec
from trtbench.profiling.memory.kv_pressure import (
    kv_pressure,
    largest_unqueued_concurrency,
)
from trtbench.profiling.memory.server_metrics import read_server_metrics_csv
from trtbench.profiling.report.category_section import category_advice
from trtbench.profiling.report.design_section import whole_run_interference
from trtbench.profiling.report.recommendation import Recommendation, recommend
from trtbench.profiling.report.recommendation_config import (
    TRTLLM_DECODING,
    ContractView,
    Policy,
    Snippet,
    engine_snippet,
    llmapi_snippet,
    make_policy,
    trtbench_snippet,
    vllm_snippet,
)
from trtbench.profiling.report.recommendation_text import (
    other_snippet_lines,
    recommendation_json,
    recommendation_lines,
)
from trtbench.profiling.report.run_data import RunData
from trtbench.spec.report import (
    check_goodput_slos,
    recorded_equivalence_margin,
    recorded_report,
    resolve_objective,
)
from trtbench.vllm_server.args import speculative_config

RECOMMENDATION_JSON = "recommendation.json"


@dataclass(frozen=True)
class RunRecommendation:
    """The section's Markdown lines, the JSON document, the recommendation they say (its
    ``ratios`` and ``pairs``: the margins the rest of the report shows) and the appendix's
    section of every other server's config."""

    lines: list[str]
    document: dict[str, Any]
    recommendation: Recommendation
    appendix: list[str]


def contract_view(version: str, mode: str) -> ContractView:
    """What TensorRT-LLM ``version``'s LLM-API contract offers the decoding config of
    ``mode`` (a ConfigError of the contract becomes ``decoding_type`` None)."""
    contract = load_llmapi_contract(version)
    name = TRTLLM_DECODING.get(mode)
    try:
        cls = contract.decoding_class(name)
    except ConfigError:
        return ContractView(contract.version, None, {})
    entry = contract.class_entry(cls)
    return ContractView(
        contract.version,
        name,
        contract.class_fields(cls),
        entry.get("pytorch") is not False,
    )


def _snippets(run: RunData, rec: Any, policy: Policy | None) -> list[Snippet]:
    if policy is None:
        return [engine_snippet(rec, None)]
    if policy.mode is None:  # a server trtbench did not build: no config to write out
        return []
    out = [trtbench_snippet(policy)]
    out += [
        llmapi_snippet(policy, contract_view(v, policy.mode))
        for v in reversed(LLMAPI_VERSIONS)
    ]
    out += [
        vllm_snippet(policy, _vllm_keys(run, policy.variant)),
        engine_snippet(rec, policy),
    ]
    return out


def _vllm_keys(run: RunData, variant: str) -> dict[str, Any] | None:
    """``variant``'s ``--speculative-config`` from the spec run.json recorded, its
    adaptive speculation left out (the snippet writes the policy's); None where the run
    recorded no spec or vLLM cannot serve the variant as specified."""
    try:
        spec = recorded_spec(RunDir(run.root))
        mine = next((v for v in spec.variants if v.name == variant), None)
        if mine is None:
            return None
        return speculative_config(
            mine.model_copy(update={"speculation": None}), spec.models
        )
    except (ConfigError, OSError):
        return None


def read_kv_pressure(root: Path) -> pd.DataFrame | None:
    """:func:`~trtbench.profiling.memory.kv_pressure.kv_pressure` of the run's
    ``server_metrics.csv`` (None: no file, or no tier has the KV and request gauges).
    Read once per report and shared by the Recommendation and the KV section.

    Raises:
        DataFileError: server_metrics.csv is damaged.
    """
    path = RunDir(root).server_metrics_csv
    if not path.is_file():
        return None
    table = kv_pressure(read_server_metrics_csv(path))
    return None if table.empty else table


def unqueued_concurrency(table: pd.DataFrame | None) -> pd.Series | None:
    """Per variant, the largest concurrency served without queueing, from
    :func:`read_kv_pressure`'s table (None: no table, or no variant has such a tier)."""
    if table is None:
        return None
    calm = largest_unqueued_concurrency(table).dropna()
    return calm if not calm.empty else None


def recommend_run(
    run: RunData,
    tiers: pd.DataFrame,
    variants: pd.DataFrame,
    memory: pd.DataFrame | None,
    objective: str | None = None,
    kv: pd.DataFrame | None = None,
) -> RunRecommendation:
    """The Recommendation of ``run`` by ``objective`` (None: run.json's recorded
    ``report.objective``, else output_tok_s).

    Args:
        run: the loaded run.
        tiers: ``comparison.tier_table`` output.
        variants: the variants table (``pipeline.report.variants_frame``).
        memory: ``comparison.memory_extra`` output (None: not measured).
        objective: the CLI's ``--objective``.
        kv: :func:`read_kv_pressure` of the run (None: no KV / request gauges).

    Raises:
        ConfigError: an unknown objective, or goodput on a run without SLOs.
    """
    recorded, slos = recorded_report(run.run)
    chosen = resolve_objective(objective, recorded)
    goodput = run.summary.get("request_goodput_per_s")
    measured = (
        goodput is not None and pd.to_numeric(goodput, errors="coerce").notna().any()
    )
    check_goodput_slos(chosen, bool(slos) or bool(measured))
    rec = recommend(
        tiers,
        run.summary,
        chosen,
        run.baseline,
        memory,
        run.memory_breakdown,
        unqueued_concurrency(kv),
        run.rounds,
        run.design,
        run.schedule,
        recorded_equivalence_margin(run.run),
    )
    policy = make_policy(rec, variants, tiers, run.acceptance)
    snippets = _snippets(run, rec, policy)
    lines, document = (
        recommendation_lines(rec, policy, snippets, whole_run_interference(run.rounds)),
        recommendation_json(rec, policy, snippets),
    )
    mix_lines, mix = category_advice(run.categories, run.baseline)
    if mix is not None:
        lines = [*lines, "", *mix_lines]
        document = {**document, "categories": mix}
    appendix = other_snippet_lines(policy, snippets)
    return RunRecommendation(lines, document, rec, appendix)
