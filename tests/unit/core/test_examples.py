"""The bundled example specs parse and say what the README says of them: the demo's example
(``examples/tiny-cpu.yaml``) has five variants — baseline, draft-target K=4, Medusa, n-gram
K=4, EAGLE-3 K=4 — at concurrency 1, 2, 4 and 8 in interleaved rounds of 8 requests, by need within a budget of
12 rounds or 1.5 minutes, and
the suite's cut of it (``tests/data/demo_quick.yaml``) keeps three of them with the same
models and settings."""

from __future__ import annotations

import pytest

from tests.support.data import REPO_ROOT, get_test_data_dir
from trtbench.spec.bench import load_spec
from trtbench.spec.design import resolve_design


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TRTBENCH_CACHE", str(tmp_path))


def test_the_demo_example_races_five_methods_in_interleaved_rounds():
    spec = load_spec(REPO_ROOT / "examples" / "tiny-cpu.yaml")
    modes = [(v.name, v.mode) for v in spec.variants]
    assert modes == [
        ("baseline", "baseline"),
        ("draft-k4", "draft_target"),
        ("medusa", "medusa"),
        ("ngram-k4", "ngram"),
        ("eagle3-k4", "eagle3"),
    ]
    assert [v.max_draft_len for v in spec.variants if v.mode != "medusa"][1:] == [4] * 3
    assert spec.loadtest.concurrency == [1, 2, 4, 8]
    assert spec.loadtest.requests_per_tier == 8
    design = resolve_design(spec, spec.variants)
    # rounds by need, within a budget that keeps the demo short
    assert (design.name, design.stop_when_decided) == ("interleaved", True)
    assert (design.rounds, design.max_minutes) == (36, 2.5)
    assert spec.loadtest.restart_every == 3  # fresh servers at every look


def test_the_suite_demo_is_a_cut_of_the_example():
    full = load_spec(REPO_ROOT / "examples" / "tiny-cpu.yaml")
    quick = load_spec(get_test_data_dir() / "demo_quick.yaml")
    kept = {v.name: v for v in full.variants}
    assert [v.name for v in quick.variants] == ["baseline", "draft-k4", "medusa"]
    for v in quick.variants:
        assert v == kept[v.name]
    assert quick.models == full.models and quick.deploy == full.deploy
    assert quick.loadtest.concurrency == [1, 4] and quick.loadtest.repeats == 3
