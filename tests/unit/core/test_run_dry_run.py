"""``trtbench run --dry-run`` and the ``--concurrency`` / ``--rounds`` overrides, through the
real CLI on the small real models.

The spec: baseline and draft-target K=4 on the reference backend (both served by Triton's
reference engine, so co-resident: the interleaved design), tiers c1 and c2 of 5 requests, one
round. Cells per round = variants x tiers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.run_specs import reference_run_spec, write_spec

VARIANTS = [
    {"name": "baseline", "mode": "baseline"},
    {"name": "draft-k4", "mode": "draft_target", "max_draft_len": 4},
]


def spec_file(directory: Path, models, **loadtest) -> Path:
    spec = reference_run_spec(
        "dry",
        models,
        VARIANTS,
        max_batch_size=4,
        deploy={},
        profile={},
        requests=5,
        output_tokens=8,
        **loadtest,
    )
    return write_spec(directory, spec)


def dry_run(capsys, spec: Path, *args) -> list[str]:
    code, out, err = run_cli(["run", spec, "--dry-run", *args], capsys)
    assert code == 0, err
    return out.splitlines()


def line(lines: list[str], prefix: str) -> str:
    found = [x for x in lines if x.startswith(prefix)]
    assert len(found) == 1, lines
    return found[0]


def test_the_plan_names_variants_tiers_cells_and_writes_nothing(
    capsys, tmp_path, tiny_models
):
    out = tmp_path / "runs" / "dry"
    lines = dry_run(capsys, spec_file(tmp_path, tiny_models), "--out", out)
    assert line(lines, "run dir:") == f"run dir: {out} (not created by a dry run)"
    assert not out.exists() and not out.parent.exists()
    assert line(lines, "variants") == "variants (2):"
    rows = [x.split() for x in lines if x.startswith("  ")]
    assert rows == [
        ["baseline", "baseline", "backend", "reference,", "server", "triton"],
        [
            "draft-k4",
            "draft_target,",
            "K=4",
            "backend",
            "reference,",
            "server",
            "triton",
        ],
    ]
    assert line(lines, "tiers") == "tiers (2): c1, c2"
    assert line(lines, "design").startswith("design interleaved: 1 round(s), 2 server")
    assert (
        line(lines, "cells")
        == "cells: 4 per round (2 variants x 2 tiers), 4 in 1 round(s)"
    )
    assert line(lines, "requests per cell") == (
        "requests per cell: 5 requests; 1 warm-up request(s) per server start"
    )
    assert line(lines, "prompts").startswith("prompts: 5 checked")


def test_a_bad_input_fails_the_dry_run_as_it_fails_the_run(
    capsys, tmp_path, tiny_models
):
    """The same checks: the same one line, exit 2, and no run directory either way."""
    models = {**tiny_models, "draft": tmp_path / "no-draft"}
    spec = spec_file(tmp_path, models)
    out = tmp_path / "run"
    errors = []
    for extra in (["--dry-run"], []):
        code, _, err = run_cli(["run", spec, "--out", out, *extra], capsys)
        assert code == 2
        assert len(err.strip().splitlines()) == 1
        errors.append(err)
    assert errors[0] == errors[1]
    assert "models.draft" in errors[0] and str(tmp_path / "no-draft") in errors[0]
    assert not out.exists()


def test_a_missing_server_executable_is_named_not_fatal(capsys, tmp_path, tiny_models):
    """trtllm-serve missing: the run stops (exit 2); the dry run names it and exits 0."""
    missing = tmp_path / "bin" / "trtllm-serve"
    spec = tmp_path / "serve.yaml"
    spec.write_text(
        "name: serve\nbackend: trtllm-pytorch\ntrtllm_version: 1.2.1\n"
        f"models: {{target: {tiny_models['target']}}}\n"
        "variants: [{name: base, mode: baseline, server: trtllm-serve, "
        "max_input_len: 64, max_seq_len: 128}]\n"
        f"deploy: {{trtllm_serve: {missing}}}\n"
        "loadtest: {concurrency: [1], requests_per_tier: 2, rounds: 1, input_len_mean: 16}\n"
    )
    code, _, err = run_cli(["run", spec, "--out", tmp_path / "run"], capsys)
    assert code == 2
    assert f"deploy.trtllm_serve '{missing}' is not an executable file" in err
    lines = dry_run(capsys, spec, "--out", tmp_path / "run")
    needs = lines[lines.index("a real run needs what this machine lacks:") + 1 :]
    assert any(
        f"deploy.trtllm_serve '{missing}' is not an executable file" in x for x in needs
    )
    # the contract the options were checked against, and why that one
    assert (
        "LLM-API options checked against TensorRT-LLM 1.2.1 (trtllm_version)" in lines
    )


def test_every_variant_that_needs_trtllm_serve_is_named(capsys, tmp_path, tiny_models):
    spec = tmp_path / "serve.yaml"
    spec.write_text(
        "name: serve\nbackend: trtllm-pytorch\n"
        f"models: {{target: {tiny_models['target']}}}\n"
        "variants: [{name: a, mode: baseline, server: trtllm-serve, max_input_len: 64, "
        "max_seq_len: 128}, {name: b, mode: ngram, max_draft_len: 2, server: trtllm-serve, "
        "max_input_len: 64, max_seq_len: 128}]\n"
        f"deploy: {{trtllm_serve: {tmp_path / 'none'}}}\n"
        "loadtest: {concurrency: [1], requests_per_tier: 2, rounds: 1, input_len_mean: 16}\n"
    )
    lines = dry_run(capsys, spec, "--out", tmp_path / "run")
    assert any("and variants a, b (server: trtllm-serve) need it" in x for x in lines)
    # no trtllm_version and no tensorrt_llm here: the newest contract, and the advice
    newest = [x for x in lines if x.startswith("LLM-API options checked against")]
    assert len(newest) == 1 and newest[0].endswith(
        ", the newest contract (no tensorrt_llm here, no trtllm_version): set "
        "trtllm_version to the version in your image to check against that one"
    )


def test_concurrency_and_rounds_override_the_spec(capsys, tmp_path, tiny_models):
    lines = dry_run(
        capsys,
        spec_file(tmp_path, tiny_models),
        "--concurrency",
        "1,2,4",
        "--rounds",
        "3",
    )
    assert line(lines, "tiers") == "tiers (3): c1, c2, c4"
    assert line(lines, "design").startswith("design interleaved: 3 round(s)")
    assert (
        line(lines, "cells")
        == "cells: 6 per round (2 variants x 3 tiers), 18 in 3 round(s)"
    )


def test_rounds_auto_races_within_the_default_budget(capsys, tmp_path, tiny_models):
    lines = dry_run(capsys, spec_file(tmp_path, tiny_models), "--rounds", "auto")
    assert "rounds by need (budget: 12 rounds;" in line(
        lines, "design"
    )  # max_rounds 12
    assert line(lines, "cells") == (
        "cells: 4 per round (2 variants x 2 tiers), at most 48 in at most 12 round(s)"
    )


def test_a_fixed_rounds_override_drops_the_race_budget(capsys, tmp_path, tiny_models):
    """The file races (rounds: auto, budget 4 rounds); --rounds 2 measures 2 rounds (the
    budget bounds a race only, so it is dropped rather than refused)."""
    spec = spec_file(tmp_path, tiny_models, rounds="auto", budget={"max_rounds": 4})
    assert "at most 16 in at most 4 round(s)" in line(dry_run(capsys, spec), "cells")
    lines = dry_run(capsys, spec, "--rounds", "2")
    assert (
        line(lines, "cells")
        == "cells: 4 per round (2 variants x 2 tiers), 8 in 2 round(s)"
    )


@pytest.mark.parametrize(
    ("option", "value", "spec_value", "message"),
    [
        (
            "--concurrency",
            "1,0",
            [1, 0],
            "loadtest.concurrency[1]: Input should be greater than or equal to 1",
        ),
        (
            "--concurrency",
            "2,x",
            [2, "x"],
            "loadtest.concurrency[1]: Input should be a valid integer",
        ),
        ("--concurrency", "2,2", [2, 2], "loadtest.concurrency: 2 is listed twice"),
        (
            "--rounds",
            "0",
            0,
            "loadtest.rounds: Input should be greater than or equal to 1",
        ),
        ("--rounds", "x", "x", "loadtest.rounds: Input should be a valid integer"),
    ],
)
def test_a_bad_override_is_one_line_as_in_the_spec(
    capsys, tmp_path, tiny_models, option, value, spec_value, message
):
    spec = spec_file(tmp_path, tiny_models)
    code, _, err = run_cli(["run", spec, "--dry-run", option, value], capsys)
    assert code == 2
    assert err.splitlines() == [err.strip()]
    assert err.startswith(f"trtbench: error: {spec} with {option} {value}: {message}")
    # the same value written in the file reads the same after the file's name
    key = "concurrency" if option == "--concurrency" else "rounds"
    other = tmp_path / "other"
    other.mkdir()
    in_file = spec_file(other, tiny_models, **{key: spec_value})
    code, _, err_file = run_cli(["run", in_file, "--dry-run"], capsys)
    assert code == 2
    assert err_file.split(": ", 3)[3] == err.split(": ", 3)[3]


def test_result_dir_is_out(capsys, tmp_path, tiny_models):
    spec = spec_file(tmp_path, tiny_models)
    by_out = line(dry_run(capsys, spec, "--out", tmp_path / "r"), "run dir:")
    by_alias = line(dry_run(capsys, spec, "--result-dir", tmp_path / "r"), "run dir:")
    assert by_out == by_alias == f"run dir: {tmp_path / 'r'} (not created by a dry run)"


def test_overrides_do_not_reach_slurm_shards(capsys, tmp_path, tiny_models):
    spec = spec_file(tmp_path, tiny_models)
    code, _, err = run_cli(
        ["run", spec, "--executor", "slurm", "--rounds", "3"], capsys
    )
    assert code == 2
    assert err.splitlines() == [err.strip()]
    assert "--concurrency and --rounds do not reach the Slurm shards" in err
