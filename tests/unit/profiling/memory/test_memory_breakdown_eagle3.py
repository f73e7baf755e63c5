"""The memory breakdown of an eagle3 variant, from a real build of the tiny EAGLE-3 checkpoint.

Expected values by hand: the checkpoint's weight bytes are its ``*.safetensors`` file sizes
(``os.stat``); its KV bytes per token are ``2 × 1 layer × num_key_value_heads × head_dim ×
4`` (float32) read from its config.json here; its share of the target's KV pool is the pool's
blocks × tokens per block × that (the captured /metrics text: 64 blocks × 32 tokens). The
report's extra weights over the baseline are exactly the checkpoint's bytes, written as
``format_bytes`` would by definition: ``+<bytes / 2**20 to one decimal> MiB``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.support.data import get_test_data_dir
from tests.support.run_factory import summary_row, write_summary
from trtbench.builders.reference.build import build_reference_variant
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.report import write_report
from trtbench.profiling.memory.breakdown import (
    VariantMemoryInputs,
    load_variant_inputs,
    memory_breakdown,
    write_memory_breakdown_csv,
)
from trtbench.profiling.memory.server_metrics import metrics_frame, parse_metrics_text
from trtbench.spec.bench import parse_spec

MiB = 2**20


def weight_files_bytes(directory: Path) -> int:
    """Sizes of the checkpoint's weight files, by hand (the tiny parts hold safetensors)."""
    return sum(
        os.stat(directory / name).st_size
        for name in os.listdir(directory)
        if name.endswith(".safetensors")
    )


def eagle3_kv_per_token(directory: Path) -> int:
    config = json.loads((directory / "config.json").read_text())
    assert config["num_hidden_layers"] == 1 and config["dtype"] == "float32"
    return 2 * 1 * config["num_key_value_heads"] * config["head_dim"] * 4


@pytest.fixture(scope="module")
def built(tiny_models, tmp_path_factory):
    """A run dir with a baseline and an eagle3-k4 variant built for the reference backend."""
    root = tmp_path_factory.mktemp("eagle3-mem")
    spec = parse_spec(
        f"models: {{target: {tiny_models['target']}}}\n"
        "variants:\n"
        "  - {name: baseline, mode: baseline}\n"
        f"  - {{name: eagle3-k4, mode: eagle3, max_draft_len: 4, "
        f"speculative_model: {tiny_models['eagle3']}}}\n"
    )
    for variant in spec.variants:
        build_reference_variant(spec, variant, RunDir(root))
    return root


def test_weights_and_kv_of_the_real_checkpoint(built, tiny_models):
    rd = RunDir(built)
    manifest = json.loads(rd.build_json("eagle3-k4").read_text())
    assert Path(manifest["models"]["eagle3"]["path"]) == tiny_models["eagle3"].resolve()
    inputs = load_variant_inputs(rd.build_json("eagle3-k4"))
    row = memory_breakdown([inputs]).iloc[0]
    eagle = weight_files_bytes(tiny_models["eagle3"])
    target = weight_files_bytes(tiny_models["target"])
    assert eagle > 0
    assert row["eagle3_weights_bytes"] == eagle
    assert row["target_weights_bytes"] == target
    assert row["weights_total_bytes"] == target + eagle
    assert pd.isna(row["draft_weights_bytes"]) and pd.isna(row["medusa_heads_bytes"])
    assert row["eagle3_kv_bytes_per_token"] == eagle3_kv_per_token(
        tiny_models["eagle3"]
    )
    assert pd.isna(row["draft_kv_bytes_per_token"])
    assert row["weight_source"] == "files"


def test_trtllm_pytorch_manifest_records_it_as_speculative_model(tmp_path, tiny_models):
    """The LLM-API build names the EAGLE-3 dir ``models.speculative_model``; it is only the
    eagle3 role in an eagle3 variant."""
    target, eagle = tiny_models["target"], tiny_models["eagle3"]
    for mode, wanted in (("eagle3", weight_files_bytes(eagle)), ("baseline", None)):
        path = tmp_path / mode / "build.json"
        path.parent.mkdir()
        models = {
            "target": {"path": str(target), "sha256": {}, "bytes": 1},
            "speculative_model": {"path": str(eagle), "sha256": {}, "bytes": 1},
        }
        path.write_text(
            json.dumps(
                {
                    "schema_version": 1,
                    "backend": "trtllm-pytorch",
                    "variant": {"name": mode},
                    "mode": mode,
                    "models": models,
                }
            )
        )
        weights = load_variant_inputs(path).weight_bytes
        assert weights.get("eagle3") == wanted


def test_eagle3_kv_is_a_share_of_the_target_pool(tiny_models):
    text = (get_test_data_dir("server_metrics") / "metrics_kv_echo.txt").read_text()
    metrics = metrics_frame(
        parse_metrics_text(text, t_ns=1, variant="e", phase="tier:c1")
    )
    per_token = eagle3_kv_per_token(tiny_models["eagle3"])
    inputs = VariantMemoryInputs(
        variant="e",
        mode="eagle3",
        weight_bytes={"target": 1000, "eagle3": 100},
        kv_bytes_per_token={"target": 4096, "eagle3": per_token},
        server_metrics=metrics,
    )
    row = memory_breakdown([inputs]).iloc[0]
    assert row["target_kv_max_blocks"] == 64 and row["kv_tokens_per_block"] == 32
    assert row["target_kv_pool_bytes"] == 64 * 32 * 4096
    assert row["eagle3_kv_pool_bytes"] == 64 * 32 * per_token
    assert pd.isna(row["draft_kv_max_blocks"]) and pd.isna(row["draft_kv_pool_bytes"])


def test_report_extra_weights_are_the_checkpoint_bytes(built, tiny_models):
    rd = RunDir(built)
    inputs = [load_variant_inputs(rd.build_json(n)) for n in ("baseline", "eagle3-k4")]
    write_memory_breakdown_csv(memory_breakdown(inputs), rd.memory_breakdown_csv)
    rows = [
        summary_row(
            v, c, tpot=t, tpot_p50=t, ttft_p50=20.0, ttft_p95=30.0, tok_s=c * 1000.0 / t
        )
        for v, t in (("baseline", 10.0), ("eagle3-k4", 6.0))
        for c in (1, 4)
    ]
    write_summary(built, rows)
    write_report(built)
    text = (built / "report.md").read_text()
    eagle = weight_files_bytes(tiny_models["eagle3"])
    want = f"+{eagle / MiB:.1f} MiB"
    assert want != "+0.0 MiB"
    memory = text.split("## Memory", 1)[1].split("\n## ", 1)[0]
    [table_row] = [x for x in memory.splitlines() if x.startswith("| eagle3-k4 |")]
    cells = [c.strip() for c in table_row.strip("|").split("|")]
    assert cells[2] == want  # variant | weights | extra weights | …
    assert re.search(rf"`eagle3-k4`: extra weights {re.escape(want)}", text)


def test_a_draft_without_series_of_its_own_shares_the_target_pool():
    """The reference engine's draft_target: one pool (64 blocks x 32 tokens in the captured
    text), no draft series; the draft's share is 64 x 32 x its 1024 bytes per token."""
    text = (get_test_data_dir("server_metrics") / "metrics_kv_echo.txt").read_text()
    metrics = metrics_frame(
        parse_metrics_text(text, t_ns=1, variant="d", phase="tier:c1")
    )
    inputs = VariantMemoryInputs(
        variant="d",
        mode="draft_target",
        weight_bytes={"target": 1000, "draft": 100},
        kv_bytes_per_token={"target": 4096, "draft": 1024},
        server_metrics=metrics,
    )
    row = memory_breakdown([inputs]).iloc[0]
    assert row["target_kv_pool_bytes"] == 64 * 32 * 4096
    assert row["draft_kv_pool_bytes"] == 64 * 32 * 1024
    assert pd.isna(row["draft_kv_max_blocks"])
