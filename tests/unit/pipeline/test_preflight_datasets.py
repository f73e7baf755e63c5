"""``loadtest.datasets`` through the pipeline: ``make_prompts`` mixes the sources with the
spec's seed and request count, and a bad record stops ``trtbench run`` / ``loadtest``
preflight with exit 2 and one line before anything is built or sent."""

from __future__ import annotations

import sys
from collections import Counter

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.data import get_test_data_dir
from trtbench.core.errors import ConfigError
from trtbench.pipeline.loadtest import make_prompts
from trtbench.pipeline.preflight import preflight_loadtest
from trtbench.spec.bench import LoadtestSpec

DATA = get_test_data_dir("datasets")
BAD_LINE = '{"prompt": "b", "output_tokens": 2.5}'


def sources(**loadtest) -> LoadtestSpec:
    return LoadtestSpec.model_validate(
        {
            "datasets": [
                {"path": str(DATA / "question.jsonl"), "format": "mtbench"},
                {"path": str(DATA / "vllm.jsonl"), "format": "vllm", "weight": 3},
            ],
            **loadtest,
        }
    )


def test_make_prompts_mixes_the_sources_with_the_spec_seed():
    spec = sources(requests_per_tier=8, seed=5, output_len_mean=40)
    prompts = make_prompts(spec, None)
    # 8 by weights 1:3 → 2 questions, 6 vllm prompts (each record three times)
    kinds = Counter("vllm" if p.category == "vllm" else "mtbench" for p in prompts)
    assert kinds == {"mtbench": 2, "vllm": 6}
    outputs = Counter(p.output_tokens for p in prompts)
    assert outputs == {40: 2 + 3, 10: 3}  # India's own 10; Iran and questions: 40
    same = make_prompts(spec, None)
    assert [p.origin for p in same] == [p.origin for p in prompts]
    other = make_prompts(sources(requests_per_tier=8, seed=6, output_len_mean=40), None)
    assert [p.origin for p in other] != [p.origin for p in prompts]


def test_a_duration_tier_draws_the_prompt_pool():
    assert len(make_prompts(sources(duration_s=5), None)) == 256


def test_a_single_dataset_still_sends_every_line_in_order():
    spec = LoadtestSpec(dataset=DATA / "trtllm.jsonl", requests_per_tier=8)
    assert [p.task_id for p in make_prompts(spec, None)] == ["t1", "2"]


def test_loadtest_preflight_refuses_a_bad_record(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a"}\n' + BAD_LINE + "\n")
    spec = LoadtestSpec.model_validate(
        {"datasets": [{"path": str(bad), "format": "vllm"}]}
    )
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as info:
        preflight_loadtest(spec, out)
    assert str(info.value).startswith(
        f"{bad}:2: output_tokens must be a positive integer (got 2.5); "
    )
    assert not out.exists()


def test_run_refuses_a_bad_dataset_before_building(tmp_path, capsys, tiny_models):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a"}\n' + BAD_LINE + "\n")
    spec = tmp_path / "spec.yaml"
    datasets = [
        {"path": str(DATA / "question.jsonl"), "format": "mtbench"},
        {"path": "bad.jsonl", "format": "vllm"},  # relative: against the spec's folder
    ]
    spec.write_text(
        yaml.safe_dump(
            {
                "models": {"target": str(tiny_models["target"])},
                "variants": [{"name": "base", "mode": "baseline"}],
                # any executable: preflight checks it and never starts it
                "deploy": {"tritonserver": sys.executable},
                "loadtest": {"concurrency": [1], "datasets": datasets},
            }
        )
    )
    out = tmp_path / "out"
    code, _, err = run_cli(["run", spec, "--out", out], capsys)
    assert code == 2, err
    assert err.strip().splitlines() == [
        f"trtbench: error: {bad}:2: output_tokens must be a positive integer (got "
        '2.5); write a whole number of tokens, e.g. "output_tokens": 64'
    ]
    assert not out.exists()  # nothing built, nothing measured, no empty run dir
