"""The corpus and tokenizer of the tiny models: standard-library sources and a byte-level BPE.

The first steps of :mod:`trtbench.builders.tiny.tiny_training` (which re-exports every
name here), kept apart so that module holds the models and their training loops and both stay
within the size budget. Imported only when something must be built.
"""

from __future__ import annotations

import json
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from trtbench.builders.tiny.tiny_recipe import Recipe

SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")  # ids 0..3, the Llama convention


def select_corpus(
    recipe: Recipe, stdlib: Path | None = None
) -> tuple[list[str], list[str]]:
    """Deterministic (train, held-out) texts from the top-level standard-library ``*.py`` files.

    Files are taken in name order, skipping those over ``max_file_bytes``; every 8th file is
    held out until ``eval_bytes`` is reached, the rest train until ``train_bytes``.
    """
    root = Path(stdlib or sysconfig.get_paths()["stdlib"])
    train: list[str] = []
    held: list[str] = []
    sizes = [0, 0]
    for index, path in enumerate(sorted(root.glob("*.py"))):
        size = path.stat().st_size
        if size > recipe.max_file_bytes or size == 0:
            continue
        is_eval = index % 8 == 7
        bucket, limit = (1, recipe.eval_bytes) if is_eval else (0, recipe.train_bytes)
        if sizes[bucket] >= limit:
            continue
        (held if is_eval else train).append(
            path.read_text(encoding="utf-8", errors="replace")
        )
        sizes[bucket] += size
    return train, held


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE (GPT-2 style) with ``<unk> <s> </s> <pad>`` as ids 0..3; adds ``<s>`` first."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=1024,
    )


def encode_stream(
    tokenizer: PreTrainedTokenizerFast, texts: Sequence[str]
) -> torch.Tensor:
    """One long 1-D id stream: ``<s> file </s> <s> file </s> …``."""
    ids: list[int] = []
    for encoded in tokenizer.backend_tokenizer.encode_batch(list(texts)):
        ids.extend(encoded.ids)
        ids.append(tokenizer.eos_token_id)
    return torch.tensor(ids, dtype=torch.long)


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, directory: Path) -> None:
    """``save_pretrained`` with ``tokenizer_class: PreTrainedTokenizerFast`` in the config.

    transformers 5 writes its own class name (``TokenizersBackend``), which transformers 4.x
    (TensorRT-LLM / Triton images) cannot resolve; both versions load ``PreTrainedTokenizerFast``.
    """
    tokenizer.save_pretrained(directory)
    config_path = Path(directory) / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2) + "\n")


def load_tokenizer(directory: Path) -> PreTrainedTokenizerFast:
    """The tokenizer saved with a tiny model."""
    return PreTrainedTokenizerFast.from_pretrained(directory)
