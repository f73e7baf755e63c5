"""The tiny EAGLE-3 part: its checkpoint layout against vLLM 0.32's loader source, its held-out
acceptance, lossless serving on the real tiny models, and checkpoints that do not fit.

The layout expectations are read from vLLM's own files in ``.venv-vllm`` (``model_executor/
models/llama_eagle3.py`` and ``models/registry.py``), not from trtbench's code.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from safetensors import safe_open

from tests.support.cli import run_cli
from tests.support.data import REPO_ROOT
from trtbench.builders.reference.eagle3 import load_eagle3
from trtbench.builders.reference.loading import load_causal_lm, make_engine
from trtbench.core.errors import ConfigError

VLLM = next(
    (REPO_ROOT / ".venv-vllm" / "lib").glob("python3*/site-packages/vllm"), None
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def eagle_dir(tiny_models) -> Path:
    return tiny_models["target"].parent / "eagle3"


@pytest.fixture(scope="module")
def saved(eagle_dir):
    config = json.loads((eagle_dir / "config.json").read_text())
    with safe_open(str(eagle_dir / "model.safetensors"), "pt") as f:
        shapes = {k: list(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    return config, shapes


@pytest.mark.skipif(VLLM is None, reason="vLLM 0.32 is not installed in .venv-vllm")
def test_layout_is_what_vllm_llama_eagle3_loads(saved, tiny_models):
    src = (VLLM / "model_executor/models/llama_eagle3.py").read_text()
    registry = (VLLM / "model_executor/models/registry.py").read_text()
    config, shapes = saved
    target = json.loads((tiny_models["target"] / "config.json").read_text())
    hidden = target["hidden_size"]
    # the architecture name maps to vLLM's Eagle3LlamaForCausalLM
    archs = re.findall(
        r'"(\w+)": \("llama_eagle3", "Eagle3LlamaForCausalLM"\)', registry
    )
    assert config["architectures"][0] in archs
    # midlayer.* is vLLM's layers.0.*; q/k/v and gate/up are stacked from these names
    assert '"midlayer.": "layers.0."' in src
    stacked = re.findall(r'"(\.\w+_proj)": \("\.(\w+)"', src)
    assert {s for s, _ in stacked} == {
        ".q_proj",
        ".k_proj",
        ".v_proj",
        ".gate_proj",
        ".up_proj",
    }
    # layer 0's qkv reads 2 * hidden (embeddings ++ hidden states)
    assert "qkv_input_size = 2 * self.hidden_size if layer_idx == 0" in src
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    assert shapes["midlayer.self_attn.q_proj.weight"] == [heads * head_dim, 2 * hidden]
    for name in ("k_proj", "v_proj"):
        assert shapes[f"midlayer.self_attn.{name}.weight"] == [
            kv * head_dim,
            2 * hidden,
        ]
    assert shapes["midlayer.self_attn.o_proj.weight"] == [hidden, heads * head_dim]
    # fc fuses len(eagle_aux_hidden_state_layer_ids) target states of target_hidden_size
    assert "self.fc_input_size = target_hidden_size * self.num_aux_hidden_states" in src
    assert 'layer_ids = eagle_config.get("eagle_aux_hidden_state_layer_ids")' in src
    ids = config["eagle_aux_hidden_state_layer_ids"]
    assert all(0 <= i <= target["num_hidden_layers"] for i in ids)
    assert shapes["fc.weight"] == [hidden, hidden * len(ids)]
    # the draft's own LM head is draft_vocab_size x hidden; the full vocabulary: no d2t
    assert re.search(
        r"ParallelLMHead\(\s*self\.config\.draft_vocab_size,\s*"
        r"self\.config\.hidden_size",
        src,
    )
    assert config["draft_vocab_size"] == config["vocab_size"] == target["vocab_size"]
    assert shapes["lm_head.weight"] == [config["draft_vocab_size"], hidden]
    assert "d2t" not in shapes and "t2d" not in shapes
    # no embed_tokens in the checkpoint: vLLM drops the name and shares the target's
    assert 'orig_to_new_substr["embed_tokens"] = None' in src
    assert not any("embed_tokens" in k for k in shapes)
    # every tensor is one vLLM's layer / model holds
    inter = config["intermediate_size"]
    want = {
        **{
            f"midlayer.{n}.weight": [hidden]
            for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm")
        },
        "midlayer.mlp.gate_proj.weight": [inter, hidden],
        "midlayer.mlp.up_proj.weight": [inter, hidden],
        "midlayer.mlp.down_proj.weight": [hidden, inter],
        "norm.weight": [hidden],
    }
    assert "self.hidden_norm = RMSNorm(config.hidden_size" in src
    for name, shape in want.items():
        assert shapes[name] == shape, name
    assert len(shapes) == len(want) + 6  # + q, k, v, o, fc, lm_head
    assert config["num_hidden_layers"] == 1


def test_held_out_acceptance_is_far_above_chance(tiny_models):
    """quality.json: the first draft matches the target's greedy token on ~85 % of held-out
    continuation positions (chance: 1 / 2048); a 4-chain accepts > 1.5 drafts on average."""
    q = json.loads((tiny_models["target"].parent / "quality.json").read_text())
    assert q["eagle3_greedy_agreement"] > 0.7
    rates = q["eagle3_chain_acceptance"]
    assert len(rates) == 4 and rates == sorted(rates, reverse=True)
    assert rates[0] == pytest.approx(q["eagle3_greedy_agreement"], abs=0.01)
    assert q["eagle3_mean_accepted"] == pytest.approx(sum(rates), abs=1e-3)
    assert q["eagle3_mean_accepted"] > 1.5


@pytest.fixture(scope="module")
def real(tiny_models, eagle_dir):
    from transformers import AutoTokenizer

    target = load_causal_lm(tiny_models["target"], torch.float32, torch.device("cpu"))
    eagle = load_eagle3(eagle_dir, target, torch.float32, torch.device("cpu"))
    tok = AutoTokenizer.from_pretrained(tiny_models["target"])
    kw = {"max_seq_len": 160, "max_input_len": 64, "max_batch_size": 4}
    return {
        "baseline": make_engine("baseline", target, tok, **kw),
        "eagle3": make_engine("eagle3", target, tok, draft_len=4, eagle3=eagle, **kw),
        "tokenizer": tok,
    }


def heldout_prompts(tokenizer, count: int) -> list[list[int]]:
    """The first held-out prompts quality.json measured (same windows, same seed)."""
    from trtbench.builders.tiny import tiny_corpus as tc
    from trtbench.builders.tiny.tiny_recipe import Recipe
    from trtbench.builders.tiny.tiny_training import random_windows

    r = Recipe()
    stream = tc.encode_stream(tokenizer, tc.select_corpus(r)[1])
    windows = random_windows(
        stream, r.prompt_len, r.eval_prompts, np.random.default_rng([r.seed, 4])
    )
    return [w.tolist() for w in windows[:count]]


def run(engine, prompts, n):
    handles = [engine.submit(p, n, end_id=-1, start=False) for p in prompts]
    engine.batcher.run_until_idle()
    return [list(h) for h in handles]


def test_real_models_serve_baseline_tokens_with_the_measured_acceptance(
    real, tiny_models
):
    """Alone and 4 at a time, EAGLE-3 emits baseline's tokens; its accepted drafts per step on
    held-out prompts agree with quality.json's teacher-forced figure (the same windows)."""
    prompts = heldout_prompts(real["tokenizer"], 8)
    want = [
        [t for s in steps for t in s.token_ids]
        for steps in run(real["baseline"], prompts, 64)
    ]
    alone = [run(real["eagle3"], [p], 64)[0] for p in prompts]
    batched = run(real["eagle3"], prompts, 64)
    for w, a, b in zip(want, alone, batched, strict=True):
        assert [t for s in a for t in s.token_ids] == w
        assert [t for s in b for t in s.token_ids] == w
    steps = [s for a in alone for s in a[1:-1]]  # decode steps not cut by max_tokens
    accepted = sum(s.draft_accepted for s in steps) / len(steps)
    q = json.loads((tiny_models["target"].parent / "quality.json").read_text())
    assert accepted > 1.5
    assert accepted == pytest.approx(q["eagle3_mean_accepted"], abs=0.6)


def bad_copy(eagle_dir: Path, tmp_path: Path, **changes) -> Path:
    out = tmp_path / "bad-eagle3"
    shutil.copytree(eagle_dir, out)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, **changes}))
    return out


@pytest.mark.parametrize(
    ("changes", "phrase"),
    [
        ({"hidden_size": 128}, "hidden_size 128 does not fit the target's 192"),
        ({"vocab_size": 4096}, "vocab_size 4096 does not fit the target's 2048"),
        ({"draft_vocab_size": 1024}, "draft_vocab_size 1024 is a reduced vocabulary"),
        ({"architectures": ["LlamaForCausalLM"]}, "names no Eagle3 model"),
    ],
)
def test_a_checkpoint_that_does_not_fit_is_exit_2_with_one_line(
    tiny_models, eagle_dir, tmp_path, capsys, changes, phrase
):
    bad = bad_copy(eagle_dir, tmp_path, **changes)
    spec = tmp_path / "spec.yaml"
    variant = {
        "name": "e3",
        "mode": "eagle3",
        "speculative_model": str(bad),
        "max_draft_len": 4,
        "max_input_len": 32,
        "max_seq_len": 64,
    }
    doc = {
        "name": "t",
        "backend": "reference",
        "models": {"target": str(tiny_models["target"])},
        "variants": [variant],
    }
    spec.write_text(yaml.safe_dump(doc))
    code, _, err = run_cli(["build", spec, "--out", tmp_path / "run"], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "variants[0].speculative_model" in lines[0], err
    assert phrase in lines[0] and str(bad) in lines[0]


def test_good_checkpoint_builds_and_records_its_check(
    tiny_models, eagle_dir, tmp_path, capsys
):
    spec = tmp_path / "spec.yaml"
    variant = {
        "name": "e3",
        "mode": "eagle3",
        "speculative_model": str(eagle_dir),
        "max_draft_len": 4,
        "max_input_len": 32,
        "max_seq_len": 64,
    }
    doc = {
        "name": "t",
        "backend": "reference",
        "models": {"target": str(tiny_models["target"])},
        "variants": [variant],
    }
    spec.write_text(yaml.safe_dump(doc))
    out = tmp_path / "run"
    code, stdout, err = run_cli(["build", spec, "--out", out], capsys)
    assert code == 0, err
    manifest = json.loads((out / "engines/e3/build.json").read_text())
    assert manifest["mode"] == "eagle3" and manifest["max_draft_len"] == 4
    assert {"config.json", "model.safetensors"} <= set(
        manifest["models"]["eagle3"]["sha256"]
    )
    assert "'aux_layer_ids': [1, 2, 3]" in manifest["reference"]["eagle3"]


def test_tensors_that_do_not_match_the_config_are_refused(
    tiny_models, eagle_dir, tmp_path
):
    bad = bad_copy(eagle_dir, tmp_path, intermediate_size=256)
    target = load_causal_lm(tiny_models["target"], torch.float32, torch.device("cpu"))
    with pytest.raises(
        ConfigError,
        match=r"midlayer\.mlp\.down_proj\.weight \[192, 512\] "
        r"\(config: \[192, 256\]\).*re-export the checkpoint",
    ):
        load_eagle3(bad, target, torch.float32, torch.device("cpu"))


def test_llm_args_eagle3_serves_the_checkpoint(tiny_models, eagle_dir, real):
    """An LLM-API model.yaml with decoding_type Eagle3 runs the reference eagle3 mode."""
    from trtbench.builders.reference.llm_args import engine_from_llm_args

    args = {
        "model": str(tiny_models["target"]),
        "max_seq_len": 128,
        "max_batch_size": 2,
        "dtype": "float32",
        "cuda_graph_config": None,
        "speculative_config": {
            "decoding_type": "Eagle3",
            "speculative_model": str(eagle_dir),
            "max_draft_len": 3,
        },
    }
    engine = engine_from_llm_args(args, device="cpu")
    assert (engine.mode, engine.draft_len) == ("eagle3", 3)
    prompt = heldout_prompts(real["tokenizer"], 1)[0]
    [want] = run(real["baseline"], [prompt], 24)
    [got] = run(engine, [prompt], 24)
    assert [t for s in got for t in s.token_ids] == [
        t for s in want for t in s.token_ids
    ]
    assert max(s.draft_proposed for s in got) == 3
    with pytest.raises(ConfigError, match="has no speculative_model"):
        engine_from_llm_args(
            {**args, "speculative_config": {"decoding_type": "Eagle3"}}
        )
