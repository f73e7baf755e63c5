"""The report's "Lossless gate" section, recomputed from a hand-made ``loadtest/outputs.csv``."""

from __future__ import annotations

import hashlib

import pandas as pd

from tests.support.run_factory import summary_row, write_build, write_summary
from trtbench.core.export import write_csv
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.report import write_report
from trtbench.profiling.loadtest.files.outputs import OUTPUTS_SCHEMA
from trtbench.profiling.report.lossless_section import FLAG, lossless_lines

IDS = [[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]]


def _rows(variant: str, tier: str, outputs: list[list[int]]) -> list[dict]:
    return [
        {
            "variant": variant,
            "tier": tier,
            "repeat": 0,
            "request_index": i,
            "request_id": f"{variant}-{tier}-{i}",
            "output_tokens": len(ids),
            "output_kind": "ids",
            "output_digest": hashlib.blake2b(
                b"".join(int(t).to_bytes(4, "little") for t in ids), digest_size=8
            ).hexdigest(),
            "output_token_ids": " ".join(map(str, ids)),
        }
        for i, ids in enumerate(outputs)
    ]


def _run(root, dt_c2: list[list[int]]):
    write_summary(
        root, [summary_row(v, c, tpot=10.0) for v in ("baseline", "dt") for c in (1, 2)]
    )
    write_build(root, "baseline", "baseline")
    write_build(root, "dt", "draft_target", draft_len=3)
    rows = _rows("baseline", "c1", IDS) + _rows("baseline", "c2", IDS)
    rows += _rows("dt", "c1", IDS) + _rows("dt", "c2", dt_c2)
    write_csv(
        pd.DataFrame(rows), RunDir(root).loadtest_dir / "outputs.csv", OUTPUTS_SCHEMA
    )
    return root


def test_report_flags_a_tier_below_100_percent_with_its_divergence(tmp_path):
    root = _run(tmp_path / "run", [IDS[0], [9, 2, 6, 7, 3]])  # id 3 changed
    text = write_report(root).report_path.read_text()
    section = text.split("### Lossless gate", 1)[1].split("\n### ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| dt ")]
    assert lines[0].startswith("| dt | c1 | 2 | 2 | 100.0 | - | ok |")
    assert lines[1].startswith(f"| dt | c2 | 2 | 1 | 50.0 | 3 / 3 | {FLAG} |")
    assert f"{FLAG}: outputs differ from the baseline's at `dt` c2." in section
    assert "| baseline |" not in section


def test_all_equal_says_so_and_no_flag(tmp_path):
    root = _run(tmp_path / "run", IDS)
    text = write_report(root).report_path.read_text()
    assert "Every compared output equals the baseline's." in text
    assert FLAG not in text


def test_without_outputs_or_baseline_the_section_says_why():
    summary = pd.DataFrame({"variant": ["baseline", "dt"], "tier": ["c1", "c1"]})
    assert lossless_lines(summary, None, None)[-1] == (
        "No baseline variant in this run: outputs are not compared."
    )
    assert lossless_lines(summary, None, "baseline")[-1] == (
        "No outputs were recorded in this run (`loadtest/outputs.csv`)."
    )


def test_nothing_comparable_is_not_called_lossless(tmp_path):
    """A baseline counted in ids and a variant returning text only (Triton's llmapi model)
    cannot be compared: the section must not say every compared output is equal."""
    root = _run(tmp_path / "run", IDS)
    outputs = RunDir(root).loadtest_dir / "outputs.csv"
    frame = pd.read_csv(outputs)
    text_rows = frame["variant"] == "dt"
    frame.loc[text_rows, "output_kind"] = "text"
    frame.loc[text_rows, "output_token_ids"] = None
    write_csv(frame, outputs, OUTPUTS_SCHEMA)
    text = write_report(root).report_path.read_text()
    section = text.split("### Lossless gate", 1)[1].split("\n### ", 1)[0]
    assert "Every compared output equals the baseline's." not in section
    assert "No output could be compared with the baseline's" in section
    (row,) = [ln for ln in section.splitlines() if ln.startswith("| dt | c1 ")]
    assert row.startswith("| dt | c1 | 0 | 0 |")
