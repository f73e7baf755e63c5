"""AIPerf artifact directories as trtbench runs, on real AIPerf 0.13.0 output
(tests/data/aiperf/README.md says how it was made).

Expected values come from the raw records, read here with nothing but ``json`` and the
definitions (docs/peers.md), and from AIPerf's own aggregates in profile_export_aiperf.json
(an independent implementation) where its definition is the same as trtbench's.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest

from tests.support.cli import run_cli
from tests.support.data import REPO_ROOT, get_test_data_dir
from tests.support.run_factory import summary_row, write_build, write_summary
from trtbench.core.errors import ConfigError
from trtbench.pipeline.peers import load_any, load_peer, split_label
from trtbench.pipeline.report import compare_runs, write_report
from trtbench.profiling.loadtest.files.schemas import SUMMARY_SCHEMA
from trtbench.profiling.peers.aiperf_files import artifact_dirs, read_artifacts
from trtbench.profiling.report.inputs import RUN_CSV_SCHEMAS

RUN = get_test_data_dir("aiperf/vllm-tiny")


def raw(tier: str) -> tuple[list[dict], dict]:
    """(profiling-phase JSONL records, the aggregate JSON) of one artifact directory."""
    lines = (RUN / tier / "profile_export.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    profiling = [r for r in records if r["metadata"]["benchmark_phase"] == "profiling"]
    return profiling, json.loads(
        (RUN / tier / "profile_export_aiperf.json").read_text()
    )


def values(records: list[dict], tag: str) -> np.ndarray:
    return np.array(
        [r["metrics"][tag]["value"] for r in records if tag in r["metrics"]]
    )


def p(v: np.ndarray, q: float) -> float:
    """Linear-interpolated percentile written out: rank q/100·(n − 1) between sorted values."""
    s = np.sort(v)
    rank = q / 100 * (len(s) - 1)
    lo = int(np.floor(rank))
    hi = min(lo + 1, len(s) - 1)
    return float(s[lo] + (rank - lo) * (s[hi] - s[lo]))


@pytest.fixture(scope="module")
def peer():
    return load_peer(RUN)


@pytest.mark.parametrize("tier", ["c1", "c4"])
def test_rows_match_the_raw_records_and_aiperf(peer, tier):
    row = peer.run.summary.set_index("tier").loc[tier]
    records, agg = raw(tier)
    assert len(records) == 24 and all(r.get("error") is None for r in records)
    assert row["variant"] == "vllm-tiny" and row["concurrency"] == int(tier[1:])
    assert (row["request_count"], row["error_count"], row["tier_status"]) == (
        24,
        0,
        "complete",
    )
    ttft = values(records, "time_to_first_token")
    e2e = values(records, "request_latency")
    itl = values(records, "inter_token_latency")
    for stat, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
        assert row[f"time_to_first_token_{stat}_ms"] == pytest.approx(
            p(ttft, q), rel=1e-12
        )
        assert row[f"request_latency_{stat}_ms"] == pytest.approx(p(e2e, q), rel=1e-12)
        # no request failed, so AIPerf's aggregate (failed ones included) is the same set
        assert row[f"time_to_first_token_{stat}_ms"] == pytest.approx(
            agg["time_to_first_token"][stat], rel=1e-9
        )
    assert row["time_to_first_token_std_ms"] == pytest.approx(
        np.sqrt(((ttft - ttft.mean()) ** 2).mean()), rel=1e-9
    )  # ddof 0, as AIPerf's std
    assert row["time_to_first_token_std_ms"] == pytest.approx(
        agg["time_to_first_token"]["std"], rel=1e-9
    )
    # TPOT ← AIPerf's per-request ITL = (E2E − TTFT) / (OSL − 1), OSL 16 here
    assert row["time_per_output_token_mean_ms"] == pytest.approx(itl.mean(), rel=1e-12)
    assert row["time_per_output_token_mean_ms"] == pytest.approx(
        float(np.mean((e2e - ttft) / 15)), rel=1e-6
    )
    assert row["time_per_output_token_mean_ms"] == pytest.approx(
        agg["inter_token_latency"]["avg"], rel=1e-9
    )
    assert row["output_sequence_length_mean_tokens"] == 16.0
    assert row["osl_mismatch_count"] == 0
    # duration = max end − min start; throughput = Σ OSL / duration (trtbench's definition)
    start = min(r["metadata"]["request_start_ns"] for r in records)
    end = max(r["metadata"]["request_end_ns"] for r in records)
    assert row["duration_s"] == pytest.approx((end - start) / 1e9, rel=1e-12)
    assert row["duration_s"] == pytest.approx(
        agg["benchmark_duration"]["avg"], abs=1e-6
    )
    tput = 24 * 16 / ((end - start) / 1e9)
    assert row["output_token_throughput_tokens_per_s"] == pytest.approx(tput, rel=1e-12)
    # AIPerf divides by its profiling phase's window, a few ms longer: within 1 %
    aiperf_tput = agg["output_token_throughput"]["avg"]
    assert aiperf_tput < tput and tput / aiperf_tput == pytest.approx(1.0, abs=0.01)


def test_measured_figures(peer):
    s = peer.run.summary.set_index("tier")
    # c1: AIPerf 0.13.0's own p50s (profile_export_aiperf.json)
    assert s.at["c1", "time_to_first_token_p50_ms"] == pytest.approx(27.8558165)
    assert s.at["c4", "time_to_first_token_p50_ms"] == pytest.approx(116.3038565)
    assert s.at["c1", "request_latency_p50_ms"] == pytest.approx(33.9183885)


def test_itl_only_where_each_response_carried_one_token(peer):
    s = peer.run.summary.set_index("tier")
    c1, _ = raw("c1")
    c4, _ = raw("c4")
    gaps1 = [g for r in c1 for g in r["metrics"]["inter_chunk_latency"]["value"]]
    # a request whose tokens all came in one response has no inter_chunk_latency at all
    gaps4 = [
        g
        for r in c4
        for g in r["metrics"].get("inter_chunk_latency", {}).get("value", [])
    ]
    assert len(gaps1) == 24 * 15  # OSL − 1 gaps each: one token per response
    assert len(gaps4) < 24 * 15  # some responses carried several tokens
    assert s.at["c1", "inter_token_latency_count"] == 360
    assert s.at["c1", "inter_token_latency_p50_ms"] == pytest.approx(
        p(np.array(gaps1), 50)
    )
    assert s.at["c1", "tokens_per_response_mean_tokens"] == 1.0
    assert s.at["c4", "inter_chunk_latency_count"] == len(gaps4)
    assert s.at["c4", "inter_chunk_latency_mean_ms"] == pytest.approx(np.mean(gaps4))
    assert np.isnan(s.at["c4", "inter_token_latency_p50_ms"])
    assert np.isnan(s.at["c4", "tokens_per_response_mean_tokens"])
    assert any("c4" in n and "per-token ITL" in n for n in peer.notes)
    # never invented: AIPerf's records carry no queue, server or speculative figures
    assert (
        s[
            [
                "client_queue_time_mean_ms",
                "server_queue_time_mean_ms",
                "request_goodput_per_s",
            ]
        ]
        .isna()
        .all()
        .all()
    )


def test_layout_warmup_and_labels():
    assert artifact_dirs(RUN) == [
        RUN / "c1",
        RUN / "c4",
    ]  # phases/ folders are not tiers
    art = read_artifacts(RUN / "c1")
    assert (art.version, art.tier, art.warmup_records, len(art.records)) == (
        "0.13.0",
        "c1",
        2,
        24,
    )
    assert split_label("base=some/dir")[0] == "base"
    assert split_label(str(RUN)) == (None, RUN)
    one = load_any(f"baseline={RUN / 'c4'}", RUN_CSV_SCHEMAS)
    assert list(one.run.variants) == ["baseline"] and one.run.baseline == "baseline"
    assert list(one.run.summary["tier"]) == ["c4"]


def _copy(tmp_path):
    dst = tmp_path / "aiperf" / "c1"
    shutil.copytree(RUN / "c1", dst)
    return dst


def test_a_failed_request_is_counted_not_measured(tmp_path):
    dst = _copy(tmp_path)
    path = dst / "profile_export.jsonl"
    lines = path.read_text().splitlines()
    docs = [json.loads(line) for line in lines]
    failed = next(
        i for i, d in enumerate(docs) if d["metadata"]["benchmark_phase"] == "profiling"
    )
    docs[failed]["error"] = {
        "code": 500,
        "type": "Internal Server Error",
        "message": "x",
    }
    path.write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    row = load_peer(dst).run.summary.iloc[0]
    assert (row["request_count"], row["error_count"]) == (24, 1)
    ok = [
        d
        for i, d in enumerate(docs)
        if d["metadata"]["benchmark_phase"] == "profiling" and i != failed
    ]
    ttft = values(ok, "time_to_first_token")
    assert row["time_to_first_token_count"] == 23
    assert row["time_to_first_token_p50_ms"] == pytest.approx(p(ttft, 50))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda d: (d / "profile_export.jsonl").unlink(),
            "profile_export.jsonl: is missing",
        ),
        (
            lambda d: (d / "profile_export.jsonl").write_text('{"metadata": {"sess\n'),
            "profile_export.jsonl line 1: not JSON",
        ),
        (
            lambda d: (d / "profile_export_aiperf.json").write_text("{}"),
            "profile_export_aiperf.json: has no 'input_config' object",
        ),
        (
            lambda d: (d / "profile_export.jsonl").write_text(
                re.sub(
                    r'("time_to_first_token":\{"value":[^,]+,"unit":)"ms"',
                    r'\1"min"',
                    (d / "profile_export.jsonl").read_text(),
                    count=1,
                )
            ),
            "line 1: metric 'time_to_first_token' has unit 'min'",
        ),
    ],
)
def test_malformed_directory_is_one_config_error(tmp_path, damage, message):
    dst = _copy(tmp_path)
    damage(dst)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as exc:
        load_peer(dst)
    assert "\n" not in str(exc.value) and str(dst) in str(exc.value)


def _trtbench_run(root):
    rows = [
        summary_row(
            "baseline",
            c,
            ttft_p50=20.0 + c,
            ttft_p95=40.0,
            tpot=3.0,
            tpot_p50=3.0,
            e2e_p50=70.0,
            tok_s=100.0 * c,
        )
        for c in (1, 4)
    ]
    write_summary(root, rows)
    write_build(root, "baseline", "baseline")
    return root


def test_compare_cli_pairs_an_aiperf_run_with_a_trtbench_one(tmp_path, capsys):
    run = _trtbench_run(tmp_path / "run")
    code, out, _ = run_cli(["compare", run, f"baseline={RUN}"], capsys)
    assert code == 0
    # TTFT p50 21 (trtbench) vs AIPerf's 27.86 ms at c1; tok/s 100 vs 384 / duration
    assert "| baseline | c1 | 21 | 27.86 | 1.326 |" in out
    assert "AIPerf 0.13.0 measurement" in out
    md = compare_runs(RUN, run).markdown  # A = AIPerf under its folder name
    assert "| vllm-tiny | c1 |" in md and "| baseline | c1 |" in md


def test_report_shows_a_peer_beside_the_run(tmp_path, capsys):
    run = _trtbench_run(tmp_path / "run")
    code, out, _ = run_cli(["report", run, "--peer", f"aiperf-vllm={RUN}"], capsys)
    assert code == 0
    text = (run / "report.md").read_text()
    assert "| aiperf-vllm | c1 | complete | 27.9 |" in text
    assert "`aiperf-vllm` is an AIPerf 0.13.0 measurement" in text
    with pytest.raises(ConfigError, match="already a variant"):
        write_report(run, [f"baseline={RUN}"])


def test_bad_aiperf_dir_exits_2_with_one_line(tmp_path, capsys):
    run = _trtbench_run(tmp_path / "run")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "profile_export_aiperf.json").write_text("not json")
    code, out, err = run_cli(["compare", run, bad], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "profile_export_aiperf.json: is not readable JSON" in err
    code, _, err = run_cli(
        ["report", run, "--peer", tmp_path / "empty-nothing"], capsys
    )
    assert code == 2 and "no AIPerf artifact directory" in err


def test_docs_name_only_real_summary_columns():
    """Every trtbench column in docs/peers.md's mapping table is a summary.csv column."""
    names = {c.name for c in SUMMARY_SCHEMA}
    text = (REPO_ROOT / "docs" / "peers.md").read_text()
    table = text[text.index("## Names and units") :].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    cited = [n for row in rows for n in re.findall(r"`([a-z_*]+)`", row.split("|")[1])]
    assert len(cited) >= 15
    for name in cited:
        assert (
            name.replace("*", "p50") in names or name.replace("*", "count") in names
        ), name


def test_rate_phase_and_duplicate_tiers(tmp_path):
    dst = _copy(tmp_path)
    path = dst / "profile_export_aiperf.json"
    doc = json.loads(path.read_text())
    profiling = doc["input_config"]["phases"][1]
    assert profiling["kind"] == "profiling"
    profiling.update(type="poisson", rate=2.5, concurrency=8)
    path.write_text(json.dumps(doc))
    row = load_peer(dst).run.summary.iloc[0]
    assert (row["tier"], row["request_rate_per_s"], row["max_concurrency"]) == (
        "r2.5",
        2.5,
        8,
    )
    assert pd.isna(row["concurrency"])
    shutil.copytree(RUN / "c1", tmp_path / "aiperf" / "again-c1")
    shutil.copytree(RUN / "c1", tmp_path / "aiperf" / "c1-too")
    with pytest.raises(ConfigError, match="are both tier c1"):
        load_peer(tmp_path / "aiperf")
