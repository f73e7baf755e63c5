"""Speculative counts over OpenAI HTTP from the server's Prometheus counters, against a real
``vllm serve`` of the tiny target with the tiny draft model (``draft_model``, K = 4).

``trtbench loadtest --api openai-completions`` runs one tier of 4 requests (fixed lengths,
``ignore_eos``). The test scrapes ``/metrics`` itself when the tier starts and ends (from the
progress's ``tier_started`` / ``tier_ended``, which run right after trtbench's own scrape
before the tier and right after its scrape after the tier, with no request in between),
parses the text with its own regular expression and computes vLLM's figures by hand; the
summary and acceptance rows must equal them."""

from __future__ import annotations

import json
import re

import httpx
import pandas as pd
import pytest

from tests.support.vllm_serve import openai_loadtest
from trtbench.commands.stage_lines import StageLines

pytestmark = pytest.mark.integration

K = 4
OUTPUT_TOKENS = 12
SAMPLE = re.compile(
    r"^vllm:spec_decode_num_(drafts|draft_tokens|accepted_tokens|accepted_tokens_per_pos)"
    r"_total\{([^}]*)\} (\S+)$"
)


def scrape(metrics: str) -> dict[str, float]:
    """``{"drafts": …, "draft_tokens": …, "accepted_tokens": …, "pos0": …, …}``, summed."""
    out: dict[str, float] = {}
    for line in httpx.get(metrics, timeout=10).text.splitlines():
        m = SAMPLE.match(line)
        if m is None:
            continue
        name, labels, value = m.groups()
        if name == "accepted_tokens_per_pos":
            name = "pos" + re.search(r'position="(\d+)"', labels).group(1)
        out[name] = out.get(name, 0.0) + float(value)
    return out


@pytest.fixture
def spec_url(vllm_draft_url) -> str:
    """The session's vLLM draft-model server, K = :data:`K` (tests/integration/conftest.py)."""
    return vllm_draft_url


def test_tier_acceptance_from_prometheus(
    spec_url, tiny_models, tmp_path, capsys, monkeypatch
):
    metrics = spec_url.removesuffix("/v1") + "/metrics"
    scrapes: list[dict[str, float]] = []

    class ScrapingProgress(StageLines):  # the CLI's progress, scraping around tiers
        def tier_started(self, variant, tier, total):
            scrapes.append(scrape(metrics))
            super().tier_started(variant, tier, total)

        def tier_ended(self):
            scrapes.append(scrape(metrics))
            super().tier_ended()

    monkeypatch.setattr("trtbench.commands.loadtest.StageLines", ScrapingProgress)
    out = tmp_path / "run"
    openai_loadtest(
        capsys,
        spec_url,
        tiny_models["target"],
        out,
        variant="vllm-draft",
        concurrency="2",
        output_tokens=OUTPUT_TOKENS,
    )
    assert len(scrapes) == 2
    before, after = scrapes
    d = {k: after[k] - before.get(k, 0.0) for k in after}
    drafts, proposed, accepted = d["drafts"], d["draft_tokens"], d["accepted_tokens"]
    assert drafts > 0 and proposed <= K * drafts
    length = 1 + accepted / drafts  # vLLM's acceptance length
    assert 1 < length <= 1 + K

    req = pd.read_csv(out / "loadtest" / "requests.csv")
    assert len(req) == 4 and (req["output_tokens"] == OUTPUT_TOKENS).all()
    row = pd.read_csv(out / "loadtest" / "summary.csv").iloc[0]
    assert row["spec_decode_counts_source"] == "server_prometheus"
    assert row["acceptance_length_tokens"] == pytest.approx(length, rel=1e-12)
    assert row["draft_acceptance_rate_ratio"] == pytest.approx(
        accepted / proposed, rel=1e-12
    )
    assert row["accepted_drafts_per_step_tokens"] == pytest.approx(accepted / drafts)
    assert (
        row["verify_steps_count"],
        row["proposed_draft_tokens_count"],
        row["accepted_draft_tokens_count"],
    ) == (drafts, proposed, accepted)
    acc = pd.read_csv(out / "loadtest" / "acceptance.csv")
    assert list(acc["kind"]) == ["position"] * K
    assert list(acc["draft_position"]) == list(range(1, K + 1))
    assert set(acc["source"]) == {"server_prometheus"}
    assert list(acc["steps_count"]) == [drafts] * K
    assert list(acc["hits_count"]) == [d[f"pos{j}"] for j in range(K)]
    rates = [d[f"pos{j}"] / drafts for j in range(K)]
    assert list(acc["value_ratio"]) == pytest.approx(rates, rel=1e-12)
    assert rates == sorted(
        rates, reverse=True
    )  # a later draft is accepted only after the earlier
    run = json.loads((out / "run.json").read_text())
    [counts] = run["loadtest"]["vllm-draft"]["tiers"]["c2"]["server_spec_counts"]
    assert (counts["drafts"], counts["accepted"]) == (drafts, accepted)
    print(
        f"vLLM draft_model K={K}: acceptance length {length:.3f} "
        f"({accepted:g} accepted / {drafts:g} drafts), rate {accepted / proposed:.3f}"
    )
