"""docs/recommendation.md and docs/outputs.md say what the recommendation code does (issue 51):
the draft-length thresholds are the code's (the README said 0.5 for every mode, the code keeps
n-gram positions down to 0.1), and the documented ``recommendation.json`` fields are exactly
the keys the writers emit for a hand-made result with every part filled in."""

from __future__ import annotations

import re

import pandas as pd

from tests.support.data import REPO_ROOT
from trtbench.cluster.gather import ShardHost, ShardView
from trtbench.cluster.report import SPEEDUP, best_per_tier
from trtbench.cluster.report import recommendation as cluster_recommendation
from trtbench.cluster.shards import Shard
from trtbench.core import methods
from trtbench.profiling.report.category_section import category_advice
from trtbench.profiling.report.margins import OBJECTIVE_INFO, Margin
from trtbench.profiling.report.recommendation import (
    Crossover,
    MemoryCost,
    Recommendation,
    TierChoice,
)
from trtbench.profiling.report.recommendation_config import (
    Policy,
    Snippet,
    accept_threshold,
)
from trtbench.profiling.report.recommendation_text import recommendation_json

DOCS = REPO_ROOT / "docs"
FREE_FORM = {"snippets[].config", "categories.mix", "categories.winners"}
"""Objects keyed by data (a target's own config keys, category and tier names)."""
MARGINS = {"tiers[].over_baseline", "tiers[].runner_up"}


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the first Markdown table in ``text``, cells stripped."""
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("|")
    ]
    return rows[2:]  # header and |---| left out


def documented(section: str) -> set[str]:
    """The backticked first cells of the table under ``### section`` in docs/outputs.md."""
    text = (DOCS / "outputs.md").read_text()
    part = text.split(f"### {section}", 1)[1].split("\n### ", 1)[0]
    return {re.fullmatch(r"`(.+)`", r[0]).group(1) for r in table_rows(part)}


def key_paths(
    value: object, prefix: str = "", stop: set[str] = frozenset()
) -> set[str]:
    """Every key of a JSON document as a path (``tiers[].best``); not below ``stop``."""
    out: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}{key}"
            out.add(path)
            if path not in stop:
                out |= key_paths(item, f"{path}.", stop)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        out |= key_paths(value[0], f"{prefix[:-1]}[].", stop)
    return out


def test_the_documented_thresholds_are_the_codes_for_every_drafting_mode():
    text = (DOCS / "recommendation.md").read_text()
    part = text.split("## The config it recommends", 1)[1].split("\n## ", 1)[0]
    seen = {}
    for row in table_rows(part):
        for mode in re.findall(r"`(\w+)`", row[1]):
            seen[mode] = float(row[2])
    drafting = {
        m.name
        for m in methods.METHODS.values()
        if m.draft_length in ("max_draft_len", "num_nextn_predict_layers")
    }
    assert set(seen) == drafting  # the doc's table has every drafting mode
    assert {"draft_target", "eagle3", "mtp", "ngram"} <= drafting  # + any added since
    assert {m: accept_threshold(m) for m in seen} == seen
    assert seen["ngram"] == 0.1 and seen["eagle3"] == 0.5  # the values the issue found


def full_recommendation() -> dict:
    """recommendation.json of a hand-made result with every list and object filled in, plus
    the categories part the pipeline adds (``trtbench.pipeline.recommend``)."""
    better = Margin("base", 1.2, 1.1, 1.3, True, "b", rounds=3, decision="better")
    open_ = Margin("ng", 1.02, 0.9, 1.1, False, "b", rounds=3)
    rec = Recommendation(
        objective=OBJECTIVE_INFO["output_tok_s"],
        baseline="base",
        tiers=(TierChoice("c1", 1.0, "dt", 100.0, open_, better, ("x",), ("dt",)),),
        crossovers=(Crossover("dt", 4.0, 8.0, 6.0, 4.0, 8.0, "b", 2.0),),
        memory=(MemoryCost("dt", 1.0, 2.0, "p", 3.0, 4.0, 8.0, "q"),),
        excluded=("`dt` c16: partial",),
        winner="dt",
        winner_reason="best at 1 tier",
    )
    policy = Policy("dt", "draft_target", 4, 4, ((1, 4), (4, 2)), ("n",))
    snippet = Snippet("trtbench", "yaml", "t", {"speculation": {}}, ("n",))
    categories = pd.DataFrame(
        {
            "variant": ["base", "dt"],
            "tier": ["c1", "c1"],
            "category": ["chat", "chat"],
            "concurrency": [1, 1],
            "request_rate_per_s": [float("nan")] * 2,
            "requests_count": [4, 4],
            "acceptance_length_tokens": [float("nan"), 2.0],
            "tpot_speedup_p50_ratio": [float("nan"), 1.3],
            "time_per_output_token_p50_ms": [1.0, 1.0],
            "tier_status": ["complete", "complete"],
        }
    )
    _, mix = category_advice(categories, "base")
    return {**recommendation_json(rec, policy, [snippet]), "categories": mix}


def test_the_documented_fields_are_the_keys_recommendation_json_has():
    doc = full_recommendation()
    emitted = key_paths(doc, stop=FREE_FORM | MARGINS)
    assert documented("Fields") == emitted
    margin_keys = key_paths(doc["tiers"][0]["over_baseline"])
    assert margin_keys == key_paths(doc["tiers"][0]["runner_up"])
    assert documented("A margin") == margin_keys


def test_the_documented_cluster_fields_are_the_keys_it_has():
    """A cluster run's document, its tiers from the merged summary of one finished shard."""
    shard = Shard(0, ("base", "dt"))
    host = ShardHost("h", "n", (), "")
    view = ShardView(shard, "7_0", "COMPLETED", "done", host, None, (1, 1), True, ())
    summary = pd.DataFrame(
        {
            "variant": ["base@s0", "dt"],
            "tier": ["c1", "c1"],
            "tier_status": ["complete", "complete"],
            SPEEDUP: [1.0, 1.3],
            f"{SPEEDUP}_ci95_low": [1.0, 1.1],
            f"{SPEEDUP}_ci95_high": [1.0, 1.5],
        }
    )
    tiers = best_per_tier(summary, [view], "base")
    assert [t["best"] for t in tiers] == ["dt"]
    doc = cluster_recommendation(tiers, "base", False, [])
    assert documented("A cluster run's `recommendation.json`") == key_paths(doc)
