"""``--tokenizer`` takes a Hugging Face hub id: loaded from the local HF cache first (issue 51:
the README's ``--tokenizer Qwen/Qwen2.5-1.5B-Instruct`` failed with "no tokenizer.json").

The cache is a real one in a temporary ``HF_HOME`` (the ``hub/models--ORG--NAME`` layout
huggingface_hub writes: ``refs/main`` → ``snapshots/<commit>/``), holding a word-level
tokenizer whose vocabulary is written here, so the ids are known by hand. There is no
network to the hub here: the hub branch is exercised only through its failure line. Each
case runs in a fresh interpreter, since huggingface_hub reads ``HF_HOME`` once at import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trtbench.profiling.loadtest.workload.tokenizer_source import is_hub_id

REPO_ID = "acme-trtbench/tiny-words"
VOCAB = {"[UNK]": 0, "hello": 1, "world": 2, "tokens": 3}
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def hf_cache(home: Path) -> Path:
    """``home/hub`` holding ``REPO_ID`` at ``COMMIT`` as huggingface_hub caches it: the
    tokenizer files and the config.json AutoTokenizer reads; returns the snapshot folder."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, PreTrainedTokenizerFast

    repo = home / "hub" / f"models--{REPO_ID.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(
        snapshot
    )
    LlamaConfig(
        vocab_size=len(VOCAB),
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=1,
    ).save_pretrained(snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


def env_with(home: Path, **extra: str) -> dict[str, str]:
    """This environment with the HF cache at ``home`` (no other cache variable leaking in)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE")
    }
    return {**env, "HF_HOME": str(home), **extra}


def test_a_hub_id_is_loaded_from_the_local_hf_cache(tmp_path):
    hf_cache(tmp_path / "hf")
    code = (
        "import json\n"
        "from trtbench.pipeline.loadtest import open_tokenizer\n"
        f"tok = open_tokenizer({REPO_ID!r})\n"
        "print(json.dumps([tok.encode('hello world tokens again'), tok.name,"
        " tok.vocab_size]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,  # no folder called acme-trtbench here: the id is not a path
        env=env_with(tmp_path / "hf"),
        capture_output=True,
        text=True,
        check=True,
    )
    ids, name, vocab = json.loads(out.stdout.strip().splitlines()[-1])
    assert ids == [1, 2, 3, 0]  # "again" is not in the vocabulary: [UNK]
    assert name == REPO_ID
    assert vocab == 4


def test_neither_a_path_nor_a_cached_hub_id_exits_2_naming_both(tmp_path):
    """One line naming the local path tried and the hub id, before any request is sent
    (the URL answers nothing: the line comes from the preflight)."""
    hf_cache(tmp_path / "hf")  # a cache without the id asked for
    missing = "acme-trtbench/not-cached"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "trtbench.cli",
            "loadtest",
            "--api",
            "openai-completions",
            "--url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--tokenizer",
            missing,
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=tmp_path,
        env=env_with(tmp_path / "hf", HF_HUB_OFFLINE="1"),  # no retries against the hub
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert str(tmp_path / missing) in lines[0]  # the local path tried
    assert f"hub id {missing}" in lines[0]
    assert str(tmp_path / "hf" / "hub") in lines[0]  # the cache searched


@pytest.mark.parametrize(
    "text, hub",
    [
        ("Qwen/Qwen2.5-1.5B-Instruct", True),
        ("gpt2", True),
        ("/models/llama", False),
        ("./llama", False),
        ("~/llama", False),
        ("a/b/c", False),
        ("org/../x", False),
    ],
)
def test_what_can_name_a_hub_repository(text, hub):
    assert is_hub_id(text) is hub
