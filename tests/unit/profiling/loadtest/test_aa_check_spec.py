"""``scripts/aa_check.py --spec``: the A/A spec built from a user's own bench spec.

Expected values are read off the user's spec written here (names, fields, paths): each
named variant twice under ``-a`` / ``-b`` with its fields unchanged, the power copy only
where the reference engine behind Triton can slow it, the loadtest's design and rounds
replaced. The A/A spec is then parsed by trtbench's own spec parser (it must load).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

from trtbench.spec.bench import load_spec

SCRIPT = Path(__file__).resolve().parents[4] / "scripts" / "aa_check.py"


@pytest.fixture(scope="module")
def aa():
    spec = importlib.util.spec_from_file_location("aa_check_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _user_spec(tmp_path: Path, server: str = "triton") -> Path:
    for d in ("models/target", "models/medusa"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "config.json").write_text("{}")
    tree = [[0], [1], [0, 0]]
    text = {
        "name": "mine",
        "backend": "reference",
        "models": {"target": "models/target", "medusa": "models/medusa"},
        "variants": [
            {"name": "base", "mode": "baseline", "max_batch_size": 4},
            {"name": "med", "mode": "medusa", "medusa_choices": tree},
            {"name": "ng", "mode": "ngram", "max_draft_len": 3, "server": server},
        ],
        "loadtest": {
            "concurrency": [2, 8],
            "rounds": "auto",
            "budget": {"max_rounds": 6},
            "requests_per_tier": 12,
        },
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(text, sort_keys=False))
    return path


def test_named_variants_run_as_twins_with_a_slowed_copy(aa, tmp_path):
    path = _user_spec(tmp_path)
    text, pairs = aa.twin_spec(path, ["med", "base"], "interleaved", 36, None, None, 3)
    out = yaml.safe_load(text)
    names = [v["name"] for v in out["variants"]]
    assert names == ["med-a", "med-b", "base-a", "base-b", "med-slow"]
    assert pairs.twins == (("med-a", "med-b"), ("base-a", "base-b"))
    assert pairs.slow == ("med-a", "med-slow")
    med = [v for v in out["variants"] if v["name"].startswith("med")]
    assert all(v["medusa_choices"] == [[0], [1], [0, 0]] for v in med)
    assert [v.get("handicap") for v in med] == [None, None, 0.1]
    assert out["variants"][2]["max_batch_size"] == 4
    lt = out["loadtest"]
    assert (lt["design"], lt["rounds"], lt["restart_every"]) == ("interleaved", 36, 3)
    assert "budget" not in lt and lt["concurrency"] == [2, 8]
    assert lt["requests_per_tier"] == 12
    assert out["models"]["target"] == str((tmp_path / "models/target").resolve())
    aa_path = tmp_path / "aa.yaml"
    aa_path.write_text(text)
    loaded = load_spec(aa_path)  # trtbench's parser takes it
    assert loaded.loadtest.restart_every == 3


def test_default_twins_are_the_first_two_and_tiers_replace(aa, tmp_path):
    path = _user_spec(tmp_path)
    text, pairs = aa.twin_spec(path, [], "interleaved", 12, [1], 8)
    out = yaml.safe_load(text)
    assert pairs.twins == (("base-a", "base-b"), ("med-a", "med-b"))
    assert pairs.slow == ("base-a", "base-slow")
    assert out["loadtest"]["concurrency"] == [1]
    assert out["loadtest"]["requests_per_tier"] == 8


def test_no_slowed_copy_where_no_handicap_applies(aa, tmp_path):
    path = _user_spec(tmp_path, server="vllm")
    text, pairs = aa.twin_spec(path, ["ng"], "interleaved", 12, None, None)
    assert pairs.slow is None
    assert [v["name"] for v in yaml.safe_load(text)["variants"]] == ["ng-a", "ng-b"]


def test_an_unknown_twin_names_the_choices(aa, tmp_path):
    path = _user_spec(tmp_path)
    with pytest.raises(
        SystemExit, match=r"--twins: nope not a variant .*base, med, ng"
    ):
        aa.twin_spec(path, ["nope"], "interleaved", 12, None, None)
