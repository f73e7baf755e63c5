"""A hand-made run for the follow-up tests (run_factory: real schemas and writers), with
its report rendered by the real pipeline, so recommendation.json is the recommendation's own.

Output tok/s [95 % interval]:

    tier  baseline           ngram (K=4)        ngram over baseline (paired ratio)
    c1    100 [90, 110]      150 [140, 160]     [1.3, 1.7]: pays
    c2    150 [140, 160]     140 [130, 150]     [0.8, 0.99]: stops

So the recommendation: ngram best at c1 (the only speculative winner), speculation off above
concurrency 1 (``max_concurrency: 1``); with per-position acceptance (0.9, 0.3, 0.05, 0.02) at
c1 the draft-length schedule is {1: 2} (the largest j with a_j >= 0.1, n-gram's threshold).
"""

from __future__ import annotations

import pandas as pd
import yaml

from tests.support.run_factory import (
    summary_row,
    throughput_intervals,
    write_build,
    write_summary,
)
from trtbench.core.export import write_csv
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.report import write_report
from trtbench.profiling.loadtest.stats.acceptance import ACCEPTANCE_SCHEMA
from trtbench.spec.bench import parse_spec

INTERVALS = {  # (variant, c): (tok/s, low, high, ratio low, ratio high)
    ("baseline", 1): (100, 90, 110, None, None),
    ("baseline", 2): (150, 140, 160, None, None),
    ("ngram", 1): (150, 140, 160, 1.3, 1.7),
    ("ngram", 2): (140, 130, 150, 0.8, 0.99),
}


def spec_text(models, repeats=3):
    """The run's spec YAML: baseline and ngram K=4 on the tiny target, tiers c1 and c2."""
    common = {
        "dtype": "float32",
        "max_batch_size": 4,
        "max_input_len": 64,
        "max_seq_len": 128,
    }
    return yaml.safe_dump(
        {
            "name": "fu",
            "backend": "reference",
            "models": {"target": str(models["target"])},
            "variants": [
                {"name": "baseline", "mode": "baseline", **common},
                {
                    "name": "ngram",
                    "mode": "ngram",
                    "max_draft_len": 4,
                    "prompt_lookup_max": 3,
                    **common,
                },
            ],
            "loadtest": {
                "concurrency": [1, 2],
                "repeats": repeats,
                "requests_per_tier": 4,
                "input_len_mean": 16,
                "output_len_mean": 8,
                "seed": 5,
            },
        }
    )


def make_run(root, models, repeats=3, scale=1.0):
    """Write the run (module docstring) into ``root`` and render its report; ``scale``
    multiplies every tok/s figure and interval end (the recommendation stays the same)."""
    rows = []
    for (variant, c), (v, lo, hi, rlo, rhi) in INTERVALS.items():
        v, lo, hi = v * scale, lo * scale, hi * scale
        row = summary_row(variant, c, tok_s=v, tpot=1000 / v)
        row.update(throughput_intervals(lo, hi, rlo, rhi, repeats))
        rows.append(row)
    write_summary(root, rows)
    write_build(root, "baseline", "baseline")
    write_build(root, "ngram", "ngram", draft_len=4)
    acc = [
        {
            "variant": "ngram",
            "tier": "c1",
            "kind": "position",
            "draft_position": j,
            "steps_count": 100,
            "hits_count": round(a * 100),
            "value_ratio": a,
            "source": "server_per_step",
        }
        for j, a in enumerate((0.9, 0.3, 0.05, 0.02), start=1)
    ]
    write_csv(pd.DataFrame(acc), RunDir(root).acceptance_csv, ACCEPTANCE_SCHEMA)
    spec = parse_spec(spec_text(models, repeats))
    RunDir(root).update_run_json("build", {"spec": spec.model_dump(mode="json")})
    write_report(root)
    return root
