"""Run directories for report tests: a hand-made run with rounds.csv whose output tok/s and
TPOT ratios disagree (written through the real schemas), and a copy of a real run.

The hand-made run (:func:`make_split_run`): baseline, ``ngram`` (n-gram, K = 4) and
``medusa`` at c1, c2, c4 and c8, 4 interleaved rounds, every cell measured while other
processes took 40 % of the host. The baseline makes 100, 180, 300 and 500 tok/s; every cell
of a round is scaled by that round's drift (1.0, 0.9, 1.05, 0.95), which cancels in a
paired ratio. Per-round ratios over the baseline:

    tier  ngram output tok/s        ngram TPOT (base / ngram)  medusa (both figures)
    c1    1.30 0.85 1.10 1.25       as tok/s                   1.50 1.55 1.45 1.52
    c2    1.25 1.28 1.30 1.24       1.50 0.95 1.30 1.10        1.10 1.00 1.20 1.05
    c4    1.12 1.15 1.10 1.13       as tok/s                   0.95 1.00 0.90 1.05
    c8    0.95 0.80 0.90 1.05       1.35 1.40 1.38 1.36        0.85 0.90 0.80 0.88

So by output tok/s (the objective) ngram is significantly better at c2 and c4 only (tight
ratios), not at c1 (0.85 in round 1) or c8; medusa is best at c1 and the baseline at c8.
By TPOT ngram is not significantly better at c2 but is at c8: the figures a report must
not mix (issue 51: the answer said "significant at c2, c4" while the other tables, on TPOT,
said c2 was not distinguishable and c8 was).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from tests.support.data import get_test_data_dir
from tests.support.run_factory import summary_row, write_build, write_summary
from trtbench.core.export import write_csv
from trtbench.core.run_dir import RunDir
from trtbench.profiling.loadtest.files.rounds_table import ROUNDS_SCHEMA
from trtbench.profiling.loadtest.workload.repeats import log_t_interval, repeat_columns

BASE_TOK_S = {1: 100.0, 2: 180.0, 4: 300.0, 8: 500.0}
BASE_TPOT_MS = {1: 10.0, 2: 12.0, 4: 15.0, 8: 20.0}
DRIFT = (1.0, 0.9, 1.05, 0.95)
TOK_S_RATIOS = {
    "ngram": {
        1: (1.30, 0.85, 1.10, 1.25),
        2: (1.25, 1.28, 1.30, 1.24),
        4: (1.12, 1.15, 1.10, 1.13),
        8: (0.95, 0.80, 0.90, 1.05),
    },
    "medusa": {
        1: (1.50, 1.55, 1.45, 1.52),
        2: (1.10, 1.00, 1.20, 1.05),
        4: (0.95, 1.00, 0.90, 1.05),
        8: (0.85, 0.90, 0.80, 0.88),
    },
}
TPOT_RATIOS = {
    ("ngram", 2): (1.50, 0.95, 1.30, 1.10),
    ("ngram", 8): (1.35, 1.40, 1.38, 1.36),
}
OTHER_SHARE = 0.4


def _cells(variant: str, c: int) -> tuple[list[float], list[float]]:
    """Per round: (output tok/s, TPOT mean ms) of ``variant`` at concurrency ``c``."""
    ones = (1.0,) * len(DRIFT)
    tok = TOK_S_RATIOS.get(variant, {}).get(c, ones)
    tpot = TPOT_RATIOS.get((variant, c), tok)
    return (
        [BASE_TOK_S[c] * r * d for r, d in zip(tok, DRIFT, strict=True)],
        [BASE_TPOT_MS[c] / r / d for r, d in zip(tpot, DRIFT, strict=True)],
    )


def _interval(name: str, ratios: list[float]) -> dict[str, float]:
    mean, low, high, _ = log_t_interval(ratios)
    return dict(zip(repeat_columns(name), (mean, low, high), strict=True))


def make_split_run(root: Path) -> Path:
    """Write the hand-made run of the module docstring into ``root`` (no report yet)."""
    rows, rounds = [], []
    for variant in ("baseline", "ngram", "medusa"):
        for c in BASE_TOK_S:
            tok, tpot = _cells(variant, c)
            base_tok, base_tpot = _cells("baseline", c)
            row = summary_row(
                variant,
                c,
                tok_s=float(np.mean(tok)),
                tpot=float(np.mean(tpot)),
                tpot_p50=float(np.mean(tpot)),
                ttft_p50=20.0,
            )
            row.update(
                repeats_count=len(DRIFT),
                interference_rounds=len(DRIFT),
                interference_flag=True,
                host_other_cpu_share_max=OTHER_SHARE,
                **_interval(
                    "tpot_speedup_ratio",
                    [b / v for b, v in zip(base_tpot, tpot, strict=True)],
                ),
                **_interval(
                    "output_token_throughput_speedup_ratio",
                    [v / b for b, v in zip(base_tok, tok, strict=True)],
                ),
            )
            rows.append(row)
            rounds += [
                {
                    "variant": variant,
                    "tier": f"c{c}",
                    "round": r,
                    "request_count": 16,
                    "error_count": 0,
                    "ttft_p50_ms": 20.0,
                    "tpot_mean_ms": tpot[r],
                    "tpot_p50_ms": tpot[r],
                    "output_tokens_per_s": tok[r],
                    "host_other_cpu_share": OTHER_SHARE,
                    "interference_flag": True,
                }
                for r in range(len(DRIFT))
            ]
    write_summary(root, rows)
    write_csv(pd.DataFrame(rounds), RunDir(root).rounds_csv, ROUNDS_SCHEMA)
    write_build(root, "baseline", "baseline")
    write_build(root, "ngram", "ngram", draft_len=4)
    write_build(root, "medusa", "medusa", choices=[[0], [0, 0], [1]])
    design = {"name": "interleaved", "rounds": len(DRIFT), "co_resident": True}
    RunDir(root).update_run_json("design", {**design, "server_starts": 3})
    return root


def copy_real_run(root: Path) -> Path:
    """A copy of ``tests/data/demo_run`` (a real ``trtbench run`` of the demo spec, its
    tables only: README there) at ``root``, to render again."""
    shutil.copytree(get_test_data_dir("demo_run"), root)
    return root
