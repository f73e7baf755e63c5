"""``loadtest.datasets`` in the bench spec: paths resolved like the others, defaults, and
one-line errors naming the source (``loadtest.datasets[i]``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtbench.core.errors import ConfigError
from trtbench.spec.bench import parse_spec

HEAD = """
models: {target: /m/target}
variants: [{name: base, mode: baseline}]
loadtest:
"""


def loadtest(body: str, base: Path = Path("/specs")):
    return parse_spec(HEAD + body, "spec.yaml", base).loadtest


def error(body: str) -> str:
    with pytest.raises(ConfigError) as info:
        loadtest(body)
    return str(info.value)


def test_sources_resolve_paths_against_the_spec_folder(monkeypatch):
    monkeypatch.delenv("DATA_DIR", raising=False)
    spec = loadtest(
        "  datasets:\n"
        "    - {path: data/q.jsonl, format: mtbench, weight: 2, category: chat/v1}\n"
        "    - {path: '${DATA_DIR:-/d}/s.json', format: sharegpt, limit: 10}\n"
        "    - {format: humaneval, output_tokens: 128}\n"
        "    - {path: ~/mine.jsonl, format: jsonl, prompt_field: question}\n"
    )
    first, second, third, fourth = spec.datasets
    assert first.path == Path("/specs/data/q.jsonl")
    assert (first.format, first.weight, first.category) == ("mtbench", 2.0, "chat/v1")
    assert second.path == Path("/d/s.json")
    assert (second.weight, second.limit, second.output_tokens) == (1.0, 10, None)
    assert (third.path, third.output_tokens, third.category) == (None, 128, None)
    assert fourth.path == Path.home() / "mine.jsonl"
    assert fourth.prompt_field == "question"
    assert spec.dataset is None


def test_no_datasets_by_default():
    assert loadtest("  {concurrency: [1]}").datasets is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "  {dataset: a.jsonl, datasets: [{path: q.jsonl, format: mtbench}]}",
            "spec.yaml: loadtest: give dataset (one trtllm-bench file) or datasets (a "
            "list of sources), not both; list the file as a source: {path: FILE, "
            "format: trtllm}",
        ),
        (
            "  datasets: [{path: q.jsonl, format: jsonl}]",
            "spec.yaml: loadtest.datasets[0]: a jsonl source needs prompt_field: the "
            "name of the field that holds the prompt text",
        ),
        (
            "  datasets: [{format: humaneval}, {path: q.jsonl, format: vllm, "
            "prompt_field: text}]",
            "spec.yaml: loadtest.datasets[1]: prompt_field is for format jsonl only; a "
            "vllm source knows its prompt field: drop prompt_field",
        ),
        (
            "  datasets: [{format: sharegpt}]",
            "spec.yaml: loadtest.datasets[0]: a sharegpt source needs path: the dataset "
            "file",
        ),
        (
            "  datasets: [{path: q.jsonl, format: mtbench, weight: 0}]",
            "spec.yaml: loadtest.datasets[0].weight: Input should be greater than 0",
        ),
        (
            "  datasets: [{path: q.jsonl, format: mtbench, wieght: 2}]",
            "spec.yaml: loadtest.datasets[0].wieght: unknown key; did you mean 'weight'?",
        ),
        (
            "  datasets: [{path: q.csv, format: csv}]",
            "spec.yaml: loadtest.datasets[0].format: Input should be 'trtllm', "
            "'sharegpt', 'mtbench', 'humaneval', 'jsonl', 'aiperf' or 'vllm'",
        ),
        (
            "  datasets: [{path: q.jsonl, format: vllm, output_tokens: 0}]",
            "spec.yaml: loadtest.datasets[0].output_tokens: Input should be greater "
            "than or equal to 1",
        ),
        (
            "  datasets: []",
            "spec.yaml: loadtest.datasets: List should have at least 1 item after "
            "validation, not 0",
        ),
    ],
)
def test_bad_sources_are_named(body, message):
    assert error(body) == message
