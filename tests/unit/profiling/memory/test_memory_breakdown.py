"""memory_breakdown: hand-worked weights, KV bytes per token, KV pool and peaks."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.support.data import get_test_data_dir
from trtbench.core.errors import ConfigError, DataFileError
from trtbench.profiling.memory.breakdown import (
    MEMORY_BREAKDOWN_SCHEMA,
    VariantMemoryInputs,
    kv_bytes_per_token,
    load_variant_inputs,
    memory_breakdown,
    write_memory_breakdown_csv,
)
from trtbench.profiling.memory.server_metrics import metrics_frame, parse_metrics_text

MiB = 2**20
LLAMA2_7B = {  # Llama-2-7b-hf config.json
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "hidden_size": 4096,
    "torch_dtype": "float16",
}
LLAMA3_8B = {  # Meta-Llama-3-8B config.json (grouped-query attention)
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(
    ("config", "kv_dtype_bytes", "expected"),
    [
        # 2 (K,V) × 32 layers × 32 heads × 128 dims × 2 bytes = 524288 (the known 0.5 MiB/token)
        (LLAMA2_7B, None, 524_288),
        # 2 × 32 × 8 KV heads × 128 × 2 = 131072
        (LLAMA3_8B, None, 131_072),
        # fp8 KV cache: 2 × 32 × 8 × 128 × 1 = 65536
        (LLAMA3_8B, 1, 65_536),
        # explicit head_dim wins over hidden/heads: 2 × 18 × 1 × 256 × 4 = 36864
        (
            {
                "num_hidden_layers": 18,
                "num_attention_heads": 8,
                "num_key_value_heads": 1,
                "hidden_size": 2048,
                "head_dim": 256,
                "dtype": "float32",
            },
            None,
            36_864,
        ),
    ],
)
def test_kv_bytes_per_token(config, kv_dtype_bytes, expected):
    assert kv_bytes_per_token(config, kv_dtype_bytes) == expected


@pytest.mark.parametrize(
    ("config", "names"),
    [
        (
            {"num_attention_heads": 8, "hidden_size": 64, "dtype": "float32"},
            "num_hidden_layers",
        ),
        ({**LLAMA2_7B, "torch_dtype": None}, "dtype"),
        ({**LLAMA2_7B, "torch_dtype": "float13"}, "float13"),
    ],
)
def test_kv_bytes_per_token_rejects_incomplete_configs(config, names):
    with pytest.raises(ConfigError, match=names):
        kv_bytes_per_token(config)


def kv_metrics(model: str, t_ns: int, phase: str) -> pd.DataFrame:
    """The real captured /metrics text (KV max 64 blocks × 32 tokens), relabelled ``model``."""
    text = (get_test_data_dir("server_metrics") / "metrics_kv_echo.txt").read_text()
    text = text.replace('model="kv_echo"', f'model="{model}"')
    return metrics_frame(parse_metrics_text(text, t_ns=t_ns, variant="dt", phase=phase))


def memory_rows(rows: list[tuple]) -> pd.DataFrame:
    cols = [
        "t_ns",
        "phase",
        "source",
        "device_index",
        "mem_used_bytes",
        "proc_used_bytes",
        "rss_bytes",
    ]
    return pd.DataFrame(rows, columns=cols)


def test_breakdown_of_a_draft_target_variant_on_two_gpus():
    metrics = pd.concat(
        [
            kv_metrics("tensorrt_llm", 1, "tier:c1"),
            kv_metrics("tensorrt_llm_draft", 1, "tier:c1"),
        ]
    )
    memory = memory_rows(
        [
            # load phase: not a load-test phase, its bigger readings do not count
            (1, "load", "nvml", 0, 90 * MiB, 80 * MiB, 10 * MiB),
            (1, "load", "nvml", 1, 90 * MiB, 80 * MiB, 10 * MiB),
            (2, "tier:c1", "nvml", 0, 30 * MiB, 20 * MiB, 5 * MiB),
            (2, "tier:c1", "nvml", 1, 12 * MiB, 10 * MiB, 5 * MiB),
            (3, "tier:c8", "nvml", 0, 25 * MiB, 24 * MiB, 7 * MiB),
            (3, "tier:c8", "nvml", 1, 20 * MiB, None, 7 * MiB),
        ]
    )
    inputs = VariantMemoryInputs(
        variant="dt",
        mode="draft_target",
        weight_bytes={"target": 1000, "draft": 200},
        weight_source="files",
        kv_bytes_per_token={"target": 131_072, "draft": 8_192},
        server_metrics=metrics,
        memory=memory,
    )
    row = memory_breakdown([inputs]).iloc[0]
    assert (row["target_weights_bytes"], row["draft_weights_bytes"]) == (1000, 200)
    assert pd.isna(row["medusa_heads_bytes"]) and row["weights_total_bytes"] == 1200
    assert (row["target_kv_max_blocks"], row["kv_tokens_per_block"]) == (64, 32)
    # 64 blocks × 32 tokens × 131072 B = 256 MiB; draft 64 × 32 × 8192 B = 16 MiB
    assert row["target_kv_pool_bytes"] == 256 * MiB
    assert row["draft_kv_pool_bytes"] == 16 * MiB
    assert row["kv_source"] == "server_metrics"
    # per reading: t=2 → 30+12 = 42 MiB, t=3 → 25+20 = 45 MiB; peak 45 MiB
    assert row["peak_device_used_bytes"] == 45 * MiB
    # per-process: t=2 → 20+10 = 30 MiB, t=3 → 24 (+NA) = 24 MiB; peak 30 MiB
    assert row["peak_proc_used_bytes"] == 30 * MiB
    assert row["peak_rss_bytes"] == 7 * MiB and row["peak_readings"] == 2
    assert row["memory_source"] == "nvml"


def test_breakdown_without_gpu_or_kv_metrics_keeps_rss_and_leaves_the_rest_empty():
    memory = memory_rows(
        [
            (1, "warmup", "rss", None, None, None, 900 * MiB),
            (2, "tier:c1", "rss", None, None, None, 300 * MiB),
            (3, "tier:c4", "rss", None, None, None, 350 * MiB),
        ]
    )
    inputs = VariantMemoryInputs(
        variant="medusa",
        mode="medusa",
        weight_bytes={"target": 1000, "medusa": 30},
        kv_bytes_per_token={"target": 4096},
        memory=memory,
    )
    row = memory_breakdown([inputs]).iloc[0]
    assert row["medusa_heads_bytes"] == 30 and row["weights_total_bytes"] == 1030
    assert row["peak_rss_bytes"] == 350 * MiB and row["memory_source"] == "rss"
    for col in (
        "peak_device_used_bytes",
        "target_kv_pool_bytes",
        "draft_kv_pool_bytes",
    ):
        assert pd.isna(row[col])
    assert row["target_kv_bytes_per_token"] == 4096


def write_model(path: Path, files: dict[str, int], config: dict | None) -> None:
    path.mkdir(parents=True)
    for name, size in files.items():
        (path / name).write_bytes(b"\0" * size)
    if config is not None:
        (path / "config.json").write_text(json.dumps(config))


def test_load_variant_inputs_counts_weight_files_only(tmp_path: Path):
    tiny = {
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "hidden_size": 192,
        "dtype": "float32",
    }
    write_model(
        tmp_path / "target", {"model.safetensors": 1000, "tokenizer.json": 500}, tiny
    )
    write_model(
        tmp_path / "medusa",
        {"medusa_lm_head.safetensors": 300},
        {"medusa_num_heads": 3},
    )
    build = tmp_path / "engines" / "medusa" / "build.json"
    build.parent.mkdir(parents=True)
    manifest = {
        "variant": {"name": "medusa"},
        "mode": "medusa",
        "models": {
            "target": {"path": str(tmp_path / "target"), "bytes": 1500 + 120},
            "draft": None,
            "medusa": {"path": str(tmp_path / "medusa"), "bytes": 330},
        },
    }
    build.write_text(json.dumps(manifest))
    got = load_variant_inputs(build)
    assert got.variant == "medusa" and got.mode == "medusa"
    assert dict(got.weight_bytes) == {"target": 1000, "medusa": 300}
    assert got.weight_source == "files"
    # 2 × 3 layers × 4 heads × 48 dims × 4 bytes = 4608
    assert dict(got.kv_bytes_per_token) == {"target": 4608}


def test_load_variant_inputs_falls_back_to_build_json_bytes(tmp_path: Path):
    build = tmp_path / "build.json"
    manifest = {
        "mode": "baseline",
        "models": {"target": {"path": "/nowhere", "bytes": 77}},
    }
    build.write_text(json.dumps(manifest))
    got = load_variant_inputs(build)
    assert dict(got.weight_bytes) == {"target": 77}
    assert got.weight_source == "build.json" and dict(got.kv_bytes_per_token) == {}


def test_load_variant_inputs_rejects_a_broken_manifest(tmp_path: Path):
    (tmp_path / "build.json").write_text("{not json")
    with pytest.raises(
        DataFileError, match="line 1 column 2: not valid JSON.*trtbench build"
    ):
        load_variant_inputs(tmp_path / "build.json")
    with pytest.raises(ConfigError, match="does not exist; run `trtbench build` again"):
        load_variant_inputs(tmp_path / "absent.json")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"schema_version": 99, "models": {}},
            "has schema_version 99 but this trtbench reads up to 1; upgrade trtbench",
        ),
        (
            {"models": {"target": {"path": "/nowhere", "bytes": "77"}}},
            r"models\.target\.bytes is '77' \(str\), expected int",
        ),
    ],
)
def test_load_variant_inputs_refuses_a_newer_or_mistyped_manifest(
    tmp_path, doc, message
):
    (tmp_path / "build.json").write_text(json.dumps(doc))
    with pytest.raises(DataFileError, match=message):
        load_variant_inputs(tmp_path / "build.json")


def test_load_variant_inputs_names_a_broken_model_config(tmp_path: Path):
    write_model(tmp_path / "target", {"model.safetensors": 10}, None)
    (tmp_path / "target" / "config.json").write_text("[1, 2]")
    build = tmp_path / "build.json"
    build.write_text(
        json.dumps({"models": {"target": {"path": str(tmp_path / "target")}}})
    )
    with pytest.raises(ConfigError) as err:
        load_variant_inputs(build)
    assert str(err.value) == (
        f"target model config {tmp_path / 'target' / 'config.json'} is not a JSON "
        "object; fix it or point models.target at a model directory, then run "
        "`trtbench build` again"
    )


def test_breakdown_csv_has_schema_columns(tmp_path: Path):
    frame = memory_breakdown(
        [VariantMemoryInputs("baseline", "baseline", {"target": 5})]
    )
    back = pd.read_csv(write_memory_breakdown_csv(frame, tmp_path / "mb.csv"))
    assert list(back.columns) == [c.name for c in MEMORY_BREAKDOWN_SCHEMA]
    assert back.loc[0, "target_weights_bytes"] == 5
