"""Repository validation rules (Triton's model repository docs) and ``trtbench deploy`` bad input.

Each broken repository is a valid rendered one with one hand edit, so each test shows the
rule it breaks. CLI runs go through ``trtbench.cli.main``: exit code 2 and one stderr line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.manifests import ENGINE_DIR, manifest
from trtbench.builders.manifest import write_manifest
from trtbench.core.errors import DeployError
from trtbench.core.run_dir import RunDir
from trtbench.spec.bench import DeploySpec
from trtbench.triton_repo.render import render_repository
from trtbench.triton_repo.validate import (
    ensure_valid,
    validate_files,
    validate_repository,
)
from trtbench.triton_repo.write import write_repository


def rendered(backend: str = "trtllm", mode: str = "baseline") -> dict[str, str]:
    return dict(render_repository(manifest(backend, mode), ENGINE_DIR, DeploySpec()))


def edit(files: dict[str, str], path: str, old: str, new: str) -> dict[str, str]:
    assert old in files[path], f"{old!r} not in {path}"
    return {**files, path: files[path].replace(old, new, 1)}


def messages(files: dict[str, str]) -> list[str]:
    return [str(p) for p in validate_files(files)]


ENSEMBLE = "ensemble/config.pbtxt"


@pytest.mark.parametrize(
    ("path", "old", "new", "expected"),
    [
        (
            "tensorrt_llm/config.pbtxt",
            'name: "tensorrt_llm"',
            'name: "tensorrt_llm_draft"',
            "tensorrt_llm/config.pbtxt: name 'tensorrt_llm_draft' differs from its folder",
        ),
        (
            "tensorrt_llm/config.pbtxt",
            "max_batch_size: 4",
            "max_batch_size: ${triton_max_batch_size}",
            "unfilled placeholder ${triton_max_batch_size}",
        ),
        (
            "preprocessing/config.pbtxt",
            "max_batch_size: 4",
            "max_batch_size: four",
            "preprocessing/config.pbtxt: does not parse as ModelConfig",
        ),
        (
            ENSEMBLE,
            'model_name: "postprocessing"',
            'model_name: "detokenizer"',
            "step 2 (detokenizer) names a model not in the repository",
        ),
        (
            ENSEMBLE,
            'input_map { key: "runtime_top_k" value: "top_k" }',
            'input_map { key: "top_k" value: "top_k" }',
            "step 1 (tensorrt_llm) maps unknown input 'top_k'",
        ),
        (
            ENSEMBLE,
            'input_map { key: "input_lengths" value: "_INPUT_LENGTHS" }',
            "",
            "step 1 (tensorrt_llm) leaves required input 'input_lengths' unmapped",
        ),
        (
            ENSEMBLE,
            'input_map { key: "sequence_length" value: "_SEQUENCE_LENGTH" }',
            'input_map { key: "sequence_length" value: "_SEQ_LEN" }',
            "reads '_SEQ_LEN', which no ensemble input or earlier step provides",
        ),
        (
            ENSEMBLE,
            'output_map { key: "token_ids" value: "output_ids" }',
            'output_map { key: "token_ids" value: "token_ids" }',
            "output 'output_ids' is produced by no step",
        ),
        (
            ENSEMBLE,
            'input_map { key: "runtime_top_p" value: "top_p" }',
            'input_map { key: "runtime_top_p" value: "top_k" }',
            "input 'runtime_top_p' gets TYPE_INT32, expects TYPE_FP32",
        ),
        (
            ENSEMBLE,
            "max_batch_size: 4",
            "max_batch_size: 8",
            "max_batch_size 8 exceeds preprocessing's 4",
        ),
        (
            "tensorrt_llm/config.pbtxt",
            "decoupled: true",
            "decoupled: false",
            "ensemble/config.pbtxt: must be decoupled: trtbench.json says it is called over a stream",
        ),
    ],
)
def test_each_rule_reports_the_broken_thing(path, old, new, expected):
    files = edit(rendered(), path, old, new)
    found = messages(files)
    assert any(expected in m for m in found), found


def test_python_model_needs_model_py():
    files = rendered("reference")
    del files["ensemble/1/model.py"]
    assert messages(files) == ["ensemble: python model without <version>/model.py"]


def test_metadata_must_match_the_served_model():
    files = rendered("reference")
    info = json.loads(files["trtbench.json"])
    files["trtbench.json"] = json.dumps(
        {**info, "extra_inputs": {"num_draft_tokens": 4}}
    )
    assert messages(files) == [
        "trtbench.json: input 'num_draft_tokens' is not an input of ensemble"
    ]
    files["trtbench.json"] = json.dumps({**info, "model_name": "tensorrt_llm_bls"})
    assert messages(files) == [
        "trtbench.json: names model 'tensorrt_llm_bls', which has no config"
    ]


def test_bls_model_names_must_exist():
    files = rendered("trtllm", "draft_target")
    del files["tensorrt_llm_draft/config.pbtxt"]
    found = messages(files)
    assert any(
        "tensorrt_llm_draft_model_name names 'tensorrt_llm_draft', which is not in the "
        "repository" in m
        for m in found
    ), found


def test_empty_repository():
    assert messages({}) == [
        ". : holds no model (no <model>/config.pbtxt)".replace(" :", ":")
    ]


def test_on_disk_version_folder_is_required(tmp_path):
    repo = write_repository(rendered(), tmp_path / "repo")
    assert validate_repository(repo) == []
    (repo / "tensorrt_llm" / "1").rmdir()
    (repo / "tensorrt_llm" / "01").mkdir()  # Triton ignores versions starting with 0
    assert [str(p) for p in validate_repository(repo)] == [
        "tensorrt_llm: has no numeric version folder (e.g. 1/)"
    ]


def test_write_replaces_the_old_repository(tmp_path):
    repo = tmp_path / "repo"
    write_repository(rendered("trtllm", "draft_target"), repo)
    write_repository(rendered("reference"), repo)
    assert sorted(p.name for p in repo.iterdir()) == ["ensemble", "trtbench.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]  # no staging left


def test_write_refuses_paths_outside_the_repository(tmp_path):
    with pytest.raises(DeployError, match="outside the model repository"):
        write_repository({"../escape.txt": "x"}, tmp_path / "repo")
    assert not (tmp_path / "escape.txt").exists()


def test_ensure_valid_is_one_line_with_a_count():
    files = edit(rendered(), ENSEMBLE, "max_batch_size: 4", "max_batch_size: 8")
    with pytest.raises(DeployError) as err:
        ensure_valid(validate_files(files), "R")
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("model repository R is invalid: ensemble/config.pbtxt: ")
    assert "(and 2 more)" in text  # exceeds preprocessing, tensorrt_llm, postprocessing


# --- CLI -------------------------------------------------------------------------------


def trtllm_run(tmp_path: Path) -> RunDir:
    """A run dir with hand-written trtllm build.json files (no engines needed to render)."""
    rd = RunDir(tmp_path / "run")
    tok = tmp_path / "tokenizer"
    tok.mkdir(exist_ok=True)
    for mode in ("baseline", "draft_target", "medusa"):
        m = manifest("trtllm", mode)
        m = m.model_copy(
            update={"variant": {**m.variant, "name": mode}, "tokenizer_dir": str(tok)}
        )
        rd.engine_dir(mode).mkdir(parents=True)
        write_manifest(rd.engine_dir(mode), m)
    return rd


def test_cli_check_validates_trtllm_repositories_and_writes_nothing(tmp_path, capsys):
    rd = trtllm_run(tmp_path)
    code, out, err = run_cli(["deploy", rd.root, "--check"], capsys)
    assert code == 0, err
    assert "draft_target: " in out and "(call tensorrt_llm_bls, one response" in out
    assert "medusa: " in out and "(call ensemble, streaming)" in out
    assert not (rd.root / "model_repo").exists()
    assert not rd.log_file.exists()  # --check writes nothing, not even a log
    code, out, err = run_cli(["deploy", rd.root, "--variant", "medusa"], capsys)
    assert code == 0, err
    assert (rd.model_repo("medusa") / "tensorrt_llm" / "1").is_dir()
    assert validate_repository(rd.model_repo("medusa")) == []


def test_cli_info_logs_go_to_the_run_log_and_to_the_terminal_with_v(tmp_path, capsys):
    rd = trtllm_run(tmp_path)
    code, _, err = run_cli(["deploy", rd.root, "--variant", "medusa"], capsys)
    assert code == 0, err
    assert "model repository" not in err  # INFO stays off the terminal by default
    written = f"model repository {rd.model_repo('medusa')} written"
    heading, *records = rd.log_file.read_text().splitlines()
    assert heading.startswith("=== ") and "trtbench deploy" in heading
    assert f"INFO trtbench.pipeline.deploy: {written}" in records[-1]
    code, _, err = run_cli(["-v", "deploy", rd.root, "--variant", "medusa"], capsys)
    assert code == 0 and written in err
    assert rd.log_file.read_text().count(written) == 2  # appended, not replaced


def one_line_error(code: int, err: str) -> str:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_cli_run_dir_without_builds(tmp_path, capsys):
    line = one_line_error(*run_cli(["deploy", tmp_path], capsys)[::2])
    assert "no built variant" in line and "trtbench build" in line


def test_cli_engine_dir_missing(tmp_path, capsys):
    rd = trtllm_run(tmp_path)
    code, _, err = run_cli(["deploy", rd.root, "--variant", "nope"], capsys)
    line = one_line_error(code, err)
    assert f"engine dir {rd.engine_dir('nope')} does not exist" in line
    assert "trtbench build" in line


def test_cli_engine_dir_not_built(tmp_path, capsys):
    rd = trtllm_run(tmp_path)
    rd.engine_dir("half").mkdir()
    code, _, err = run_cli(["deploy", rd.root, "--variant", "half"], capsys)
    line = one_line_error(code, err)
    assert "has no build.json" in line and "trtbench build" in line


def test_cli_bad_port_option_is_named(tmp_path, capsys):
    rd = trtllm_run(tmp_path)
    code, _, err = run_cli(["deploy", rd.root, "--grpc-port", "70000"], capsys)
    assert "--grpc-port" in one_line_error(code, err)


def test_cli_check_and_serve_exclude_each_other(tmp_path, capsys):
    rd = trtllm_run(tmp_path)
    code, _, err = run_cli(["deploy", rd.root, "--check", "--serve"], capsys)
    assert code == 2 and "--check" in err and "--serve" in err


def test_cli_check_refuses_a_model_changed_since_the_build(tmp_path, capsys):
    from trtbench.builders.manifest import describe_model_dir

    model = tmp_path / "target"
    model.mkdir()
    (model / "config.json").write_text('{"num_hidden_layers": 2}')
    rd = RunDir(tmp_path / "run")
    m = manifest("trtllm", "baseline")
    m = m.model_copy(
        update={
            "variant": {**m.variant, "name": "baseline"},
            "models": {"target": describe_model_dir(model)},
            "tokenizer_dir": str(model),
        }
    )
    rd.engine_dir("baseline").mkdir(parents=True)
    write_manifest(rd.engine_dir("baseline"), m)
    code, _, err = run_cli(["deploy", rd.root, "--check"], capsys)
    assert code == 0, err
    (model / "config.json").write_text('{"num_hidden_layers": 5}')  # edited after
    code, _, err = run_cli(["deploy", rd.root, "--check"], capsys)
    line = one_line_error(code, err)
    assert "1 model file(s) changed since the build" in line
    assert f"target: {model / 'config.json'} (sha256 differs from build.json)" in line
    assert "trtbench build SPEC" in line


def test_cli_check_refuses_a_model_folder_the_repository_loads_that_is_gone(
    tmp_path, capsys
):
    rd = trtllm_run(tmp_path)
    code, _, err = run_cli(["deploy", rd.root, "--check"], capsys)
    assert code == 0, err
    (tmp_path / "tokenizer").rmdir()  # the repositories name it (preprocessing, BLS)
    code, _, err = run_cli(["deploy", rd.root, "--check"], capsys)
    line = one_line_error(code, err)
    assert f"its tokenizer folder {tmp_path / 'tokenizer'} is gone" in line
    assert "trtbench build SPEC" in line
    code, _, err = run_cli(["deploy", rd.root, "--variant", "medusa"], capsys)
    assert "is gone" in one_line_error(code, err)  # writing checks it too
    assert not (rd.root / "model_repo" / "medusa").exists()
