"""The LLM-API (PyTorch backend) contracts of TensorRT-LLM 1.2.1 and 1.4.0rc4 and the checks of
LLM(...) arguments / hand-written llm_api.yaml files against them (CPU only).

Expected values are hand-worked from the contract definitions (llm_args.py facts recorded in
builders/trtllm/data/llmapi_*.json): e.g. 1.2-era ``draft_len_schedule`` must map batch size 1 to
``max_draft_len``; ``acceptance_rate_window_size`` only exists from the 1.3 line on.
"""

from __future__ import annotations

import json
from importlib import resources

import pytest

from trtbench.builders.trtllm.llmapi_contract import (
    LLMAPI_VERSIONS,
    check_llm_args,
    load_llmapi_contract,
    newest_llmapi_version,
    version_having,
)
from trtbench.builders.trtllm.llmapi_files import check_llm_api_yaml, unchecked_keys
from trtbench.core.errors import ConfigError


@pytest.fixture(scope="module")
def rc4():
    return load_llmapi_contract("1.4.0rc4")


@pytest.fixture(scope="module")
def v121():
    return load_llmapi_contract("1.2.1")


def _raw(version: str) -> dict:
    name = "llmapi_" + version.replace(".", "_") + ".json"
    data = resources.files("trtbench.builders.trtllm").joinpath("data", name)
    return json.loads(data.read_text(encoding="utf-8"))


def _field_entries(raw: dict):
    for name, spec in raw["llm_args"].items():
        yield f"LLM.{name}", spec
    for cls, entry in raw["classes"].items():
        for name, spec in entry["fields"].items():
            yield f"{cls}.{name}", spec


# ---------------------------------------------------------------- the contract files


@pytest.mark.parametrize("version", LLMAPI_VERSIONS)
def test_every_field_cites_a_known_source_and_a_line_or_says_why_not(version):
    raw = _raw(version)
    assert raw["tensorrt_llm_version"] == version
    assert raw["engine_path"] is False
    entries = list(_field_entries(raw))
    assert len(entries) > 40
    for where, spec in entries:
        assert spec["source"] in raw["sources"], where
        if isinstance(spec["line"], int) and not isinstance(spec["line"], bool):
            assert spec["line"] >= 1, where
        else:
            assert spec["line"] is None, where
            assert spec["confirmed"] is False, where
            assert isinstance(spec.get("note"), str) and spec["note"].strip(), where
        assert spec["evidence"] in {
            "tag_source",
            "release_docs",
            "other_release_docs",
            "stored_copy",
            "second_hand",
        }, where
    for entry in raw["classes"].values():
        assert entry["source"] in raw["sources"]
        assert entry.get("why_source", entry["source"]) in raw["sources"]
    for tool in ("trtllm-serve", "trtllm-bench"):
        assert raw["cli"][tool]["source"] in raw["sources"]
    for sid, src in raw["sources"].items():
        assert isinstance(src["tag_verified"], bool), sid
        assert (
            src.get("commit") or src.get("index_id") or src.get("url") or src["path"]
        ), sid


def _is_stored_copy(src: dict) -> bool:
    return bool(src.get("path")) and bool(src.get("index_id") or src.get("commit"))


@pytest.mark.parametrize("version", LLMAPI_VERSIONS)
def test_fields_from_a_stored_copy_have_its_line_or_say_why_not(version):
    raw = _raw(version)
    cited = {spec["source"] for _, spec in _field_entries(raw)}
    stored = {sid for sid in cited if _is_stored_copy(raw["sources"][sid])}
    assert stored, version
    for sid in stored:
        src = raw["sources"][sid]
        # a stored copy is not known to be the tag: its lines are the copy's
        assert src["tag_verified"] is False, sid
        assert "not the tag" in src["line_basis"], sid
    for where, spec in _field_entries(raw):
        if spec["source"] not in stored:
            continue
        assert spec["confirmed"] is False, where
        line = spec["line"]
        if isinstance(line, int) and not isinstance(line, bool):
            assert line >= 1, where
        else:
            assert line is None and "not declared" in spec["note"], where


@pytest.mark.parametrize("version", LLMAPI_VERSIONS)
def test_fields_from_a_release_page_say_the_page_has_no_line_numbers(version):
    raw = _raw(version)
    for where, spec in _field_entries(raw):
        src = raw["sources"][spec["source"]]
        if src.get("url") and "nvidia.github.io/TensorRT-LLM/1." in src["url"]:
            assert spec["line"] is None, where
            assert "no line numbers" in spec["note"], where
            assert "generated from" in spec["note"] or "built from" in spec["note"], (
                where
            )


# (version, entry, path, index id, commit, line): read by hand in the stored copy of llm_args.py
# (index 7019226376, which the index ties to no commit), so a careless edit of the JSON is caught.
HAND_CHECKED_LINES = [
    ("1.2.1", "NGramDecodingConfig.max_matching_ngram_size", 1124),
    ("1.2.1", "CudaGraphConfig.batch_sizes", 103),
    ("1.2.1", "LLM.cuda_graph_config", 2863),  # TorchLlmArgs.cuda_graph_config
    ("1.2.1", "LLM.enable_iter_perf_stats", 2911),  # TorchLlmArgs
    ("1.2.1", "LLM.return_perf_metrics", 2251),  # BaseLlmArgs
    ("1.4.0rc4", "MedusaDecodingConfig.num_medusa_heads", 834),
]


@pytest.mark.parametrize(("version", "where", "line"), HAND_CHECKED_LINES)
def test_hand_checked_lines_of_the_stored_copy(version, where, line):
    raw = _raw(version)
    spec = dict(_field_entries(raw))[where]
    src = raw["sources"][spec["source"]]
    assert (src["path"], src["index_id"], src["commit"], spec["line"]) == (
        "tensorrt_llm/llmapi/llm_args.py",
        "7019226376",
        None,
        line,
    )


def test_every_decoding_type_names_a_described_class_with_that_literal():
    for version in LLMAPI_VERSIONS:
        raw = _raw(version)
        for decoding_type, cls in raw["decoding_types"].items():
            literal = raw["classes"][cls]["fields"]["decoding_type"]["choices"]
            assert decoding_type in literal, (version, decoding_type)


def test_versions_and_newest():
    assert LLMAPI_VERSIONS == ("1.2.1", "1.4.0rc4")
    assert newest_llmapi_version() == "1.4.0rc4"
    with pytest.raises(ConfigError, match=r"'1\.3\.0'.*1\.2\.1, 1\.4\.0rc4"):
        load_llmapi_contract("1.3.0")


def test_contract_accessors(rc4, v121):
    assert rc4.decoding_class("NGram") == "NGramDecodingConfig"
    assert v121.decoding_class("DraftTarget") == "DraftTargetDecodingConfig"
    assert rc4.import_of("LLM") == "tensorrt_llm"
    assert rc4.import_of("Eagle3DecodingConfig") == "tensorrt_llm.llmapi"
    assert v121.serve_options_flag == "--extra_llm_api_options"
    assert rc4.serve_options_flag == "--config"
    assert (
        rc4.entry("LLM", "cuda_graph_config")["type"] == "object:DecodeCudaGraphConfig"
    )
    assert v121.entry("LLM", "cuda_graph_config")["type"] == "object:CudaGraphConfig"
    assert rc4.entry("NGramDecodingConfig", "max_matching_ngram_size")["default"] == 2
    # inherited from DecodingBaseConfig
    assert rc4.entry("Eagle3DecodingConfig", "max_concurrency")["gt"] == 0
    assert "eagle3_one_model" in v121.class_fields("Eagle3DecodingConfig")
    assert "eagle3_one_model" not in rc4.class_fields("Eagle3DecodingConfig")
    assert v121.class_entry("MedusaDecodingConfig")["pytorch"] is False
    with pytest.raises(ConfigError, match="no_such_field"):
        rc4.entry("LLM", "no_such_field")


def test_version_having():
    assert version_having("DecodingBaseConfig", "acceptance_rate_window_size") == [
        "1.4.0rc4"
    ]
    assert version_having("DecodingBaseConfig", "acceptance_window") == ["1.2.1"]
    assert version_having("DecodingBaseConfig", "max_concurrency") == [
        "1.2.1",
        "1.4.0rc4",
    ]
    assert version_having("LLM", "disable_overlap_scheduler") == ["1.2.1", "1.4.0rc4"]
    assert version_having("DecodeCudaGraphConfig", "mode") == ["1.4.0rc4"]
    assert version_having("LLM", "nope") == []


# ---------------------------------------------------------------- valid argument sets

COMMON = {
    "model": "/models/target",
    "backend": "pytorch",
    "max_batch_size": 16,
    "max_seq_len": 2048,
    "tensor_parallel_size": 1,
    "kv_cache_config": {"free_gpu_memory_fraction": 0.85, "enable_block_reuse": True},
    "cuda_graph_config": {"batch_sizes": [1, 2, 4, 8], "enable_padding": True},
}

VALID_RC4 = {
    "eagle3": {
        "decoding_type": "Eagle3",
        "max_draft_len": 3,
        "speculative_model": "/models/eagle3",
        "max_concurrency": 8,
        "draft_len_schedule": {4: 3, 8: 1},
    },
    "draft_target": {
        "decoding_type": "DraftTarget",
        "max_draft_len": 4,
        "speculative_model": "/models/draft",
    },
    "ngram": {
        "decoding_type": "NGram",
        "max_draft_len": 4,
        "max_matching_ngram_size": 3,
    },
    "mtp": {"decoding_type": "MTP", "num_nextn_predict_layers": 1},
}


@pytest.mark.parametrize("mode", sorted(VALID_RC4))
def test_valid_plans_pass_on_1_4_0rc4(rc4, mode):
    args = {**COMMON, "speculative_config": dict(VALID_RC4[mode])}
    if mode == "draft_target":
        args["disable_overlap_scheduler"] = True
    assert check_llm_args(args, rc4) is None


def test_cuda_graphs_off_is_null_and_passes(rc4, v121):
    for contract in (rc4, v121):
        check_llm_args({**COMMON, "cuda_graph_config": None}, contract)


def test_baseline_without_speculation_passes(rc4):
    check_llm_args({**COMMON, "speculative_config": None}, rc4)


# ---------------------------------------------------------------- version differences


def test_knob_the_version_lacks_names_the_version_that_has_it(v121):
    spec = {**VALID_RC4["eagle3"], "acceptance_rate_window_size": 16}
    spec["draft_len_schedule"] = {1: 3, 8: 1}
    with pytest.raises(ConfigError) as err:
        check_llm_args({**COMMON, "speculative_config": spec}, v121)
    msg = str(err.value)
    assert msg.startswith("speculative_config.acceptance_rate_window_size is not in")
    assert "TensorRT-LLM 1.2.1 (it is in 1.4.0rc4)" in msg


def test_old_name_fails_on_the_new_version_naming_1_2_1(rc4):
    spec = {**VALID_RC4["ngram"], "acceptance_window": 16}
    with pytest.raises(ConfigError, match=r"acceptance_window .*\(it is in 1\.2\.1\)"):
        check_llm_args({"speculative_config": spec}, rc4)


def test_cuda_graph_mode_is_a_1_3_plus_field(v121, rc4):
    check_llm_args({"cuda_graph_config": {"mode": "decode"}}, rc4)
    with pytest.raises(
        ConfigError, match=r"cuda_graph_config\.mode .*it is in 1\.4\.0rc4"
    ):
        check_llm_args({"cuda_graph_config": {"mode": "decode"}}, v121)


def test_draft_len_schedule_needs_batch_size_1_on_1_2_1_only(v121, rc4):
    spec = {**VALID_RC4["draft_target"], "draft_len_schedule": {4: 4, 8: 2, 32: 1}}
    check_llm_args({"speculative_config": spec}, rc4)  # PR #10860 form
    with pytest.raises(ConfigError, match=r"draft_len_schedule=.*batch size 1"):
        check_llm_args({"speculative_config": spec}, v121)
    spec121 = {**spec, "draft_len_schedule": {1: 4, 8: 2, 32: 1}, "max_concurrency": 16}
    check_llm_args({"speculative_config": spec121}, v121)


def test_draft_len_schedule_values_above_max_draft_len_fail(rc4):
    spec = {
        **VALID_RC4["draft_target"],
        "draft_len_schedule": {4: 5},
    }  # 5 > max_draft_len 4
    with pytest.raises(ConfigError, match=r"draft lengths <= max_draft_len"):
        check_llm_args({"speculative_config": spec}, rc4)
    spec = {**VALID_RC4["draft_target"], "draft_len_schedule": {0: 2}}
    with pytest.raises(ConfigError, match=r"keys >= 1"):
        check_llm_args({"speculative_config": spec}, rc4)


# ---------------------------------------------------------------- bad input


def test_unknown_decoding_type_lists_the_known_ones(rc4):
    with pytest.raises(ConfigError) as err:
        check_llm_args({"speculative_config": {"decoding_type": "Eagle4"}}, rc4)
    msg = str(err.value)
    assert "'Eagle4'" in msg and "TensorRT-LLM 1.4.0rc4 has:" in msg
    for known in ("DraftTarget", "Eagle3", "MTP", "NGram"):
        assert known in msg


def test_described_elsewhere_decoding_type_says_so(rc4):
    with pytest.raises(ConfigError, match="PARD exists in TensorRT-LLM 1.4.0rc4 but"):
        check_llm_args({"speculative_config": {"decoding_type": "PARD"}}, rc4)


def test_missing_decoding_type(rc4):
    with pytest.raises(ConfigError, match="needs a decoding_type"):
        check_llm_args({"speculative_config": {"max_draft_len": 3}}, rc4)


@pytest.mark.parametrize("backend", ["pytorch", None, "_autodeploy"])
def test_medusa_is_refused_on_pytorch(rc4, v121, backend):
    args = {"speculative_config": {"decoding_type": "Medusa", "max_draft_len": 4}}
    if backend is not None:
        args["backend"] = backend
    for contract in (rc4, v121):
        with pytest.raises(ConfigError) as err:
            check_llm_args(args, contract)
        msg = str(err.value)
        assert "Medusa is not usable on the PyTorch backend" in msg
        assert "use backend: trtllm" in msg
        assert "\n" not in msg


def test_wrong_types_fail_naming_the_field(rc4):
    bad = {**VALID_RC4["ngram"], "max_draft_len": "4"}
    with pytest.raises(
        ConfigError, match=r"^speculative_config\.max_draft_len='4': expected int"
    ):
        check_llm_args({"speculative_config": bad}, rc4)
    # a bool is not an int, even though Python says isinstance(True, int)
    bad = {**VALID_RC4["ngram"], "max_draft_len": True}
    with pytest.raises(ConfigError, match=r"max_draft_len=True: expected int"):
        check_llm_args({"speculative_config": bad}, rc4)
    with pytest.raises(
        ConfigError, match=r"^disable_overlap_scheduler='yes': expected bool"
    ):
        check_llm_args({"disable_overlap_scheduler": "yes"}, rc4)
    with pytest.raises(
        ConfigError, match=r"eagle3_model_arch='llama4': must be one of"
    ):
        spec = {**VALID_RC4["eagle3"], "eagle3_model_arch": "llama4"}
        check_llm_args({"speculative_config": spec}, rc4)


def test_ranges(rc4):
    with pytest.raises(
        ConfigError, match=r"free_gpu_memory_fraction=1\.5: must be <= 1\.0"
    ):
        check_llm_args({"kv_cache_config": {"free_gpu_memory_fraction": 1.5}}, rc4)
    with pytest.raises(ConfigError, match=r"batch_sizes=\[0, 4\]: must be > 0"):
        check_llm_args({"cuda_graph_config": {"batch_sizes": [0, 4]}}, rc4)
    with pytest.raises(ConfigError, match=r"max_concurrency=0: must be > 0"):
        spec = {**VALID_RC4["eagle3"], "max_concurrency": 0}
        check_llm_args({"speculative_config": spec}, rc4)
    with pytest.raises(
        ConfigError, match=r"max_batch_size 4 must equal max\(batch_sizes\) = 8"
    ):
        check_llm_args(
            {"cuda_graph_config": {"batch_sizes": [1, 8], "max_batch_size": 4}}, rc4
        )


def test_required_fields(rc4):
    spec = {"decoding_type": "Eagle3", "max_draft_len": 3}
    with pytest.raises(
        ConfigError, match=r"speculative_model is required by Eagle3DecodingConfig"
    ):
        check_llm_args({"speculative_config": spec}, rc4)


def test_null_only_where_allowed(rc4):
    with pytest.raises(ConfigError, match=r"^kv_cache_config must not be null"):
        check_llm_args({"kv_cache_config": None}, rc4)


def test_a_nested_key_at_the_top_level_fails_naming_its_place(rc4):
    with pytest.raises(ConfigError) as err:
        check_llm_args({**COMMON, "max_draft_len": 4}, rc4)
    assert str(err.value) == (
        "max_draft_len is not a field of LLM in TensorRT-LLM 1.4.0rc4: it belongs in "
        "speculative_config; move it there"
    )


def test_other_top_level_keys_pass_unchecked_and_are_named(rc4):
    # the contract lists the LLM arguments trtbench writes, not all of TorchLlmArgs
    args = {**COMMON, "enable_attention_dp": True}
    check_llm_args(args, rc4)
    assert unchecked_keys(args, rc4) == ["enable_attention_dp"]


# ---------------------------------------------------------------- llm_api.yaml files


def test_yaml_with_unknown_decoding_type_fails_exit_2(tmp_path):
    path = tmp_path / "llm_api.yaml"
    path.write_text(
        "backend: pytorch\n"
        "speculative_config:\n"
        "  decoding_type: Eagle4\n"
        "  max_draft_len: 3\n"
        "cuda_graph_config: null\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as err:
        check_llm_api_yaml(path, "1.4.0rc4")
    assert err.value.exit_code == 2
    msg = str(err.value)
    assert msg.startswith(f"{path}: unknown decoding_type 'Eagle4'")
    assert "\n" not in msg


def test_valid_yaml_is_returned_with_int_schedule_keys(tmp_path):
    path = tmp_path / "llm_api.yaml"
    path.write_text(
        "backend: pytorch\n"
        "disable_overlap_scheduler: true\n"
        "speculative_config:\n"
        "  decoding_type: DraftTarget\n"
        "  max_draft_len: 4\n"
        "  speculative_model: /models/draft\n"
        "  draft_len_schedule: {1: 4, 8: 2}\n"
        "kv_cache_config: {free_gpu_memory_fraction: 0.9}\n",
        encoding="utf-8",
    )
    for version in LLMAPI_VERSIONS:
        data = check_llm_api_yaml(path, version)
        assert data["speculative_config"]["draft_len_schedule"] == {1: 4, 8: 2}
        assert data["disable_overlap_scheduler"] is True


def test_unreadable_or_malformed_yaml_is_one_line(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(
        ConfigError, match=r"^cannot read .*nope\.yaml: .*llm_api\.yaml path$"
    ):
        check_llm_api_yaml(missing, "1.4.0rc4")
    with pytest.raises(ConfigError) as err:
        check_llm_api_yaml(tmp_path, "1.4.0rc4")  # a directory
    assert "\n" not in str(err.value)
    broken = tmp_path / "broken.yaml"
    broken.write_text("speculative_config: {decoding_type: [\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        check_llm_api_yaml(broken, "1.4.0rc4")
    assert "is not valid YAML" in str(err.value) and "\n" not in str(err.value)
    listed = tmp_path / "list.yaml"
    listed.write_text("- backend\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match="must hold a mapping of LLM arguments, got list"
    ):
        check_llm_api_yaml(listed, "1.2.1")
