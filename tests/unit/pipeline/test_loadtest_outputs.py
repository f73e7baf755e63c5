"""``write_loadtest`` merges the streamed output parts into ``loadtest/outputs.csv`` and
fills the summary's lossless columns; a re-measured variant replaces its own rows only."""

from __future__ import annotations

import pandas as pd

from trtbench.core.records import OutputRecord, RequestRecord, ResponseRecord
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.loadtest_files import record_files, write_loadtest
from trtbench.profiling.loadtest.files.outputs import ids_digest, read_outputs_csv
from trtbench.profiling.loadtest.records.outcome import LoadResult, TierOutcome
from trtbench.profiling.loadtest.records.record_sink import CsvRecordSink

MS = 1_000_000


def _measure(run_dir: RunDir, variant: str, outputs: list[list[int]]) -> LoadResult:
    """Stream one tier c1 of len(outputs) requests (each 10 ms, two responses) like measure()."""
    with CsvRecordSink(record_files(run_dir, variant)) as sink:
        for i, ids in enumerate(outputs):
            rid = f"{variant}-c1-{i}"
            t0 = i * 20 * MS
            req = RequestRecord(
                variant=variant,
                tier="c1",
                concurrency=1,
                request_rate_per_s=None,
                request_id=rid,
                task_id=f"synthetic-{i}",
                scheduled_ns=t0,
                sent_ns=t0,
                first_token_ns=t0 + 2 * MS,
                last_token_ns=t0 + 10 * MS,
                end_ns=t0 + 10 * MS,
                input_tokens=4,
                requested_output_tokens=len(ids),
                output_tokens=len(ids),
                token_responses=2,
                empty_responses=0,
                echoed_tokens=0,
                first_response_tokens=1,
                draft_tokens=None,
                accepted_draft_tokens=None,
                input_token_source="words",
                output_token_source="output_ids",
                request_index=i,
            )
            out = OutputRecord(
                variant,
                "c1",
                0,
                i,
                rid,
                len(ids),
                "ids",
                ids_digest(ids),
                " ".join(map(str, ids)),
            )
            responses = [
                ResponseRecord(variant, "c1", rid, 0, t0 + 2 * MS, 1, False),
                ResponseRecord(variant, "c1", rid, 1, t0 + 10 * MS, len(ids) - 1, True),
            ]
            sink.add(req, responses, out)
    return LoadResult(tiers=[TierOutcome("c1", requests=len(outputs))])


def test_outputs_merge_and_the_summary_gets_the_gate(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    same = [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]
    results = {
        "base": _measure(run_dir, "base", same),
        "spec": _measure(run_dir, "spec", [same[0], [6, 7, 0, 9, 10]]),
    }
    summary, warnings = write_loadtest(run_dir, results, baseline="base")
    rows = summary.set_index("variant")
    assert rows.loc["base", "lossless_status"] == "baseline"
    assert rows.loc["spec", "lossless_status"] == "mismatch"
    assert rows.loc["spec", "lossless_match_ratio"] == 0.5
    assert rows.loc["spec", "lossless_first_divergence_min_tokens"] == 2
    assert warnings[-1] == (
        "lossless gate: spec c1: 1 of 2 outputs equal the baseline's "
        "(first divergence at output token 2)"
    )
    outputs = read_outputs_csv(run_dir.loadtest_dir / "outputs.csv")
    assert list(outputs["request_id"]) == [
        "base-c1-0",
        "base-c1-1",
        "spec-c1-0",
        "spec-c1-1",
    ]
    assert not list((run_dir.loadtest_dir / "parts").glob("*.outputs.csv"))
    # The summary file holds the same columns (read back as written).
    back = pd.read_csv(run_dir.summary_csv).set_index("variant")
    assert back.loc["spec", "lossless_compared_count"] == 2
    # Re-measuring spec (fixed) replaces its rows; base's stay.
    summary, warnings = write_loadtest(
        run_dir, {"spec": _measure(run_dir, "spec", same)}, baseline="base"
    )
    assert summary.set_index("variant").loc["spec", "lossless_status"] == "ok"
    assert not any("lossless" in w for w in warnings)
    outputs = read_outputs_csv(run_dir.loadtest_dir / "outputs.csv")
    assert sorted(outputs["request_id"]) == [
        "base-c1-0",
        "base-c1-1",
        "spec-c1-0",
        "spec-c1-1",
    ]
