"""``trtbench build`` with the reference backend: build.json, run.json, and every bad input.

Models are small random Llamas and Medusa heads saved in their real formats in a temp dir.
CLI runs go through ``trtbench.cli.main``: exit code 2 and one stderr line that names the
field/path and the fix.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
import transformers
import yaml

from tests.support.cli import run_cli
from tests.support.random_llama import (
    make_tokenizer,
    random_heads,
    random_llama,
    save_heads,
    save_model,
)
from trtbench.builders.reference.loading import load_engine

VOCAB = 64
TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory) -> dict[str, Path]:
    """Good and bad model dirs: target, draft, medusa and one broken dir per bad input."""
    root = tmp_path_factory.mktemp("models")
    tok = make_tokenizer(VOCAB)
    target = random_llama(seed=0, vocab_size=VOCAB)
    dirs = {
        "target": save_model(target, root / "target", tok),
        "draft": save_model(
            random_llama(seed=1, vocab_size=VOCAB), root / "draft", tok
        ),
        "draft_vocab": save_model(
            random_llama(seed=2, vocab_size=80),
            root / "draft_vocab",
            make_tokenizer(80),
        ),
        "draft_tok": save_model(
            random_llama(seed=3, vocab_size=VOCAB),
            root / "draft_tok",
            make_tokenizer(VOCAB, prefix="w"),
        ),
        "no_config": root / "no_config",
    }
    dirs["no_config"].mkdir()
    dirs["medusa"] = save_heads(
        random_heads(target, 3, seed=4), root / "medusa", dirs["target"]
    )
    wide = random_llama(seed=5, vocab_size=VOCAB, hidden=48)
    dirs["heads_hidden"] = save_heads(
        random_heads(wide, 3, seed=6), root / "heads_hidden", dirs["target"]
    )
    big = random_llama(seed=7, vocab_size=80)
    dirs["heads_vocab"] = save_heads(
        random_heads(big, 3, seed=8), root / "heads_vocab", dirs["target"]
    )
    return dirs


def make_spec(dirs, tmp_path: Path, models=None, variants=None, text=None) -> Path:
    models = models or {k: str(dirs[k]) for k in ("target", "draft", "medusa")}
    variants = variants or [
        {"name": "base", "mode": "baseline", "cuda_graphs": True},
        {"name": "dt", "mode": "draft_target", "max_draft_len": 4},
        {"name": "med", "mode": "medusa", "medusa_choices": TREE},
    ]
    for v in variants:
        v.setdefault("max_input_len", 32)
        v.setdefault("max_seq_len", 64)
    spec = tmp_path / "spec.yaml"
    doc = {"name": "t", "backend": "reference", "models": models, "variants": variants}
    spec.write_text(text if text is not None else yaml.safe_dump(doc))
    return spec


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_build_writes_manifests_and_run_json(model_dirs, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, _ = run_cli(
        ["build", make_spec(model_dirs, tmp_path), "--out", out], capsys
    )
    assert code == 0
    lines = [ln for ln in stdout.splitlines() if ln.startswith("built ")]
    assert len(lines) == 3
    assert "K=4" in lines[1] and "tree=6 nodes, depth 3, max_draft_len=6" in lines[2]
    assert "cuda_graphs=unavailable (no CUDA device" in lines[0]

    base = json.loads((out / "engines/base/build.json").read_text())
    target = model_dirs["target"]
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        assert base["models"]["target"]["sha256"][name] == sha256(target / name)
    hashed = base["models"]["target"]["sha256"]
    assert base["models"]["target"]["bytes"] == sum(
        (target / n).stat().st_size for n in hashed
    )
    assert base["models"]["draft"] is None and base["models"]["medusa"] is None
    assert base["mode"] == "baseline" and base["max_draft_len"] is None
    assert base["versions"]["torch"] == torch.__version__
    assert base["versions"]["transformers"] == transformers.__version__
    assert base["cuda_graphs"]["requested"] is True
    assert base["cuda_graphs"]["available"] is False
    assert "no CUDA device" in base["cuda_graphs"]["reason"]
    assert base["variant"]["max_seq_len"] == 64

    dt = json.loads((out / "engines/dt/build.json").read_text())
    assert dt["max_draft_len"] == 4
    draft = model_dirs["draft"]
    assert dt["models"]["draft"]["sha256"]["model.safetensors"] == sha256(
        draft / "model.safetensors"
    )
    assert dt["bytes_on_disk"] == (
        dt["models"]["target"]["bytes"] + dt["models"]["draft"]["bytes"]
    )
    # the random test models are under 1 MiB (2**20 B): the size is in KiB (2**10 B)
    assert dt["bytes_on_disk"] < 2**20
    assert f", {dt['bytes_on_disk'] / 2**10:.1f} KiB on disk, " in lines[1]
    assert dt["cuda_graphs"] == {
        "requested": False,
        "available": False,
        "reason": "not requested",
    }

    med = json.loads((out / "engines/med/build.json").read_text())
    assert med["max_draft_len"] == 6  # default: the tree's node count
    assert med["medusa"] == {
        "num_heads": 3,
        "num_layers": 1,
        "choices": sorted(TREE, key=lambda c: (len(c), c)),
    }
    heads_file = model_dirs["medusa"] / "medusa_lm_head.safetensors"
    assert med["models"]["medusa"]["sha256"]["medusa_lm_head.safetensors"] == sha256(
        heads_file
    )

    run = json.loads((out / "run.json").read_text())
    assert sorted(run["build"]["variants"]) == ["base", "dt", "med"]
    assert run["build"]["spec"]["name"] == "t"
    assert run["build"]["variants"]["dt"]["max_draft_len"] == 4


def test_built_engines_load_and_generate_greedy(model_dirs, tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        run_cli(["build", make_spec(model_dirs, tmp_path), "--out", out], capsys)[0]
        == 0
    )
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dirs["target"]
    ).eval()
    ids, want = [5, 6, 7], []
    with torch.inference_mode():
        for _ in range(12):  # greedy by full re-computation, no cache
            token = int(model(torch.tensor([ids + want])).logits[0, -1].argmax())
            want.append(token)
    for name in ("base", "dt", "med"):
        engine = load_engine(out / "engines" / name, device="cpu")
        assert engine.generate_ids(ids, 12, end_id=-1) == want, name
    engine = load_engine(out / "engines/base", device="cpu")
    assert engine.cuda_graphs.requested and not engine.cuda_graphs.available
    assert engine.max_seq_len == 64 and engine.eos_token_id == 1
    # the variant's max_batch_size (spec default 8) sizes the in-flight batch
    assert engine.max_batch_size == 8
    notes = json.loads((out / "engines/base/build.json").read_text())["reference"]
    assert notes["batching"].startswith("inflight: up to max_batch_size 8 sequences")


def test_rebuilding_one_variant_keeps_the_others_in_run_json(
    model_dirs, tmp_path, capsys
):
    spec, out = make_spec(model_dirs, tmp_path), tmp_path / "run"
    assert run_cli(["build", spec, "--out", out, "--variant", "dt"], capsys)[0] == 0
    assert sorted(p.name for p in (out / "engines").iterdir()) == ["dt"]
    assert run_cli(["build", spec, "--out", out, "--variant", "base"], capsys)[0] == 0
    run = json.loads((out / "run.json").read_text())
    assert sorted(run["build"]["variants"]) == ["base", "dt"]


def test_dry_run_writes_nothing(model_dirs, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, _ = run_cli(
        ["build", make_spec(model_dirs, tmp_path), "--out", out, "--dry-run"], capsys
    )
    assert code == 0
    assert [ln.split(":")[0] for ln in stdout.splitlines()] == [
        "would build base",
        "would build dt",
        "would build med",
    ]
    assert not out.exists()


def test_loading_an_engine_whose_model_changed_fails(model_dirs, tmp_path, capsys):
    target = save_model(
        random_llama(seed=0, vocab_size=VOCAB), tmp_path / "tgt", make_tokenizer(VOCAB)
    )
    models = {"target": str(target)}
    spec = make_spec(
        model_dirs,
        tmp_path,
        models=models,
        variants=[{"name": "b", "mode": "baseline"}],
    )
    assert run_cli(["build", spec, "--out", tmp_path / "run"], capsys)[0] == 0
    with (target / "config.json").open("a") as handle:
        handle.write("\n\n")
    from trtbench.core.errors import BuildError

    with pytest.raises(BuildError, match="changed since the build"):
        load_engine(tmp_path / "run/engines/b", device="cpu")


def _bad(dirs, key, value):
    models = {k: str(dirs[k]) for k in ("target", "draft", "medusa")}
    models[key] = str(dirs[value]) if value in dirs else value
    return models


BAD_MODELS = [
    (
        "target",
        "/nonexistent/target",
        ["models.target", "/nonexistent/target", "does not exist"],
    ),
    ("draft", "no_config", ["models.draft", "no_config", "has no config.json"]),
    (
        "draft",
        "draft_vocab",
        ["models.draft: vocab_size 80 differs from the target's 64"],
    ),
    (
        "draft",
        "draft_tok",
        ["models.draft: the tokenizer", "differs from the target's"],
    ),
    ("medusa", "heads_hidden", ["models.medusa", "hidden_size 48", "target has 32"]),
    ("medusa", "heads_vocab", ["models.medusa", "vocab_size 80", "target has 64"]),
    ("medusa", "/nonexistent/heads", ["models.medusa", "does not exist"]),
]


@pytest.mark.parametrize(("key", "value", "words"), BAD_MODELS)
def test_bad_model_dirs_exit_2_with_one_line(
    model_dirs, tmp_path, capsys, key, value, words
):
    spec = make_spec(model_dirs, tmp_path, models=_bad(model_dirs, key, value))
    code, _, err = run_cli(["build", spec, "--out", tmp_path / "run"], capsys)
    assert code == 2
    assert err.startswith("trtbench: error: ") and err.count("\n") == 1
    for word in words:
        assert word in err, (word, err)
    assert not (tmp_path / "run" / "run.json").exists()


BAD_VARIANTS = [
    (
        {
            "name": "deep",
            "mode": "medusa",
            "medusa_choices": [[0], [0, 0], [0, 0, 0], [0, 0, 0, 0]],
        },
        ["variants[0].medusa_choices", "depth 4 exceeds num_medusa_heads 3"],
    ),
    (
        {"name": "big", "mode": "medusa", "medusa_choices": TREE, "max_draft_len": 3},
        ["variants[0].medusa_choices", "6 nodes", "max_draft_len is 3"],
    ),
    (
        {"name": "tp", "mode": "baseline", "tp_size": 2},
        ["variants[0].tp_size", "tp_size: 1"],
    ),
]


@pytest.mark.parametrize(("variant", "words"), BAD_VARIANTS)
def test_bad_variants_exit_2_with_one_line(
    model_dirs, tmp_path, capsys, variant, words
):
    spec = make_spec(model_dirs, tmp_path, variants=[variant])
    code, _, err = run_cli(
        ["build", spec, "--out", tmp_path / "run", "--dry-run"], capsys
    )
    assert code == 2 and err.count("\n") == 1
    for word in words:
        assert word in err, (word, err)


def test_trtllm_backend_names_the_ngc_image(model_dirs, tmp_path, capsys):
    spec = make_spec(model_dirs, tmp_path)
    code, _, err = run_cli(
        ["build", spec, "--backend", "trtllm", "--out", tmp_path / "r"], capsys
    )
    assert code == 2 and err.count("\n") == 1
    assert "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3" in err
    assert "TensorRT-LLM 1.2.1" in err
    assert not (tmp_path / "r").exists()


def test_unknown_variant_lists_the_known_ones(model_dirs, tmp_path, capsys):
    spec = make_spec(model_dirs, tmp_path)
    code, _, err = run_cli(["build", spec, "--variant", "nope", "--dry-run"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "unknown variant 'nope'" in err and "base, dt, med" in err


def test_yaml_syntax_error_names_its_line(model_dirs, tmp_path, capsys):
    text = "name: t\nmodels:\n  target: /x\nvariants: [\n  {name: a, mode: baseline\n"
    spec = make_spec(model_dirs, tmp_path, text=text)
    code, _, err = run_cli(["build", spec, "--dry-run"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "line 6" in err and "YAML syntax error" in err


def test_each_model_dir_is_hashed_once_per_build(model_dirs, tmp_path, monkeypatch):
    """Three variants share the target: its files are read for hashing once, not three times."""
    from trtbench.builders import manifest as manifest_module
    from trtbench.builders.build import build_variants
    from trtbench.core.run_dir import RunDir
    from trtbench.spec.bench import load_spec

    hashed: list[Path] = []
    real = manifest_module.describe_model_dir

    def counting(path):
        hashed.append(Path(path).resolve())
        return real(path)

    monkeypatch.setattr(manifest_module, "describe_model_dir", counting)
    spec = load_spec(make_spec(model_dirs, tmp_path))
    manifests = build_variants(spec, out=RunDir(tmp_path / "run"))
    # target (shared by 3 variants), draft, medusa: one hash each.
    assert sorted(hashed) == sorted(
        Path(model_dirs[k]).resolve() for k in ("target", "draft", "medusa")
    )
    target_files = {m.models["target"].sha256["config.json"] for m in manifests}
    assert target_files == {sha256(Path(model_dirs["target"]) / "config.json")}


def _edited_copy(src: Path, dest: Path, **config) -> Path:
    """A copy of model dir ``src`` whose config.json says ``config`` (weights unchanged)."""
    shutil.copytree(src, dest)
    doc = json.loads((dest / "config.json").read_text())
    (dest / "config.json").write_text(json.dumps({**doc, **config}))
    return dest


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (
            {"num_hidden_layers": 5},
            ["num_hidden_layers 5", "hold 2 layers (indices 0..1)"],
        ),
        (
            {"hidden_size": 48},
            ["hidden_size 48", "model.embed_tokens.weight is [64, 32]"],
        ),
    ],
)
def test_weights_unlike_their_config_are_refused_before_anything_is_built(
    model_dirs, tmp_path, capsys, config, words
):
    layers = json.loads((model_dirs["target"] / "config.json").read_text())
    assert (
        layers["num_hidden_layers"] == 2 and layers["hidden_size"] == 32
    )  # the premise
    target = _edited_copy(model_dirs["target"], tmp_path / "target", **config)
    models = {"target": str(target)}
    spec = make_spec(
        model_dirs,
        tmp_path,
        models=models,
        variants=[{"name": "base", "mode": "baseline"}],
    )
    code, _, err = run_cli(["build", spec, "--out", tmp_path / "run"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"trtbench: error: {spec}: models.target: ")
    for word in words:
        assert word in err, (word, err)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["build", "run"])
def test_a_bad_second_variant_fails_before_the_first_is_built(
    model_dirs, tmp_path, capsys, command
):
    deep = [[0], [0, 0], [0, 0, 0], [0, 0, 0, 0]]  # deeper than the 3 heads
    variants = [
        {"name": "base", "mode": "baseline"},
        {"name": "deep", "mode": "medusa", "medusa_choices": deep},
    ]
    spec = make_spec(model_dirs, tmp_path, variants=variants)
    code, _, err = run_cli([command, spec, "--out", tmp_path / "run"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"trtbench: error: {spec}: variants[1].medusa_choices ")
    assert "depth 4 exceeds num_medusa_heads 3" in err
    assert not (tmp_path / "run").exists()  # nothing built, no run dir claimed
