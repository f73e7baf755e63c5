"""Prompts for the load test: synthetic (ISL/OSL mean ± std) or a trtllm-bench JSONL dataset.

Synthetic prompts are windows of a fixed text corpus (this Python's own standard-library
sources, the text the tiny models were trained on) cut to a drawn number of tokens; the
lengths are ``max(1, round(N(mean, std)))`` drawn from the ``numpy.random.Generator`` passed
in, so a seed gives the same prompts on every run. Without a tokenizer, a "token" is a
whitespace-separated word (marked ``words`` in ``input_token_source``).

Dataset lines follow trtllm-bench's ``prepare_dataset.py`` output (research/loadtest.md
§1.10): ``{"task_id": …, "prompt": "…" | "input_ids": [...], "output_tokens": N}``.
"""

from __future__ import annotations

import json
import logging
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trtbench.errors import ConfigError
from trtbench.records import (
    TOKEN_SOURCE_DATASET,
    TOKEN_SOURCE_TOKENIZER,
    TOKEN_SOURCE_WORDS,
)

log = logging.getLogger(__name__)

CORPUS_MODULES = ("textwrap.py", "argparse.py", "difflib.py", "json/decoder.py")


@dataclass(frozen=True)
class Prompt:
    """One request's input.

    Attributes:
        task_id: dataset id or ``synthetic-<i>``.
        text: what is sent as ``text_input``.
        input_tokens: its length in tokens (``input_token_source`` says how counted).
        output_tokens: requested output length (``max_tokens``).
        input_token_source: ``tokenizer`` | ``dataset`` | ``words``.
        input_ids: the prompt's token ids when known (used to spot a prompt echo).
    """

    task_id: str
    text: str
    input_tokens: int
    output_tokens: int
    input_token_source: str
    input_ids: tuple[int, ...] | None = None


class TextTokenizer:
    """A Hugging Face fast tokenizer (``tokenizers.Tokenizer``) without special tokens."""

    def __init__(self, backend: object, name: str = ""):
        self._tok = backend
        self.name = name

    @classmethod
    def load(cls, path: Path) -> TextTokenizer:
        """Load ``tokenizer.json`` from a model directory (or the file itself).

        Raises:
            ConfigError: no fast tokenizer there.
        """
        from tokenizers import Tokenizer  # noqa: PLC0415 - optional until needed

        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise ConfigError(
                f"no tokenizer.json in {path}; pass --tokenizer DIR, a model directory "
                "saved with save_pretrained (fast tokenizer)"
            )
        return cls(Tokenizer.from_file(str(file)), str(path))

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def tokens_per_chunk(self, chunks: Sequence[str]) -> list[int]:
        """Tokens of the concatenated text, each assigned to the chunk where it ends.

        Re-tokenizes the whole text once (exact total; a token split across two chunks
        counts in the chunk that completes it).
        """
        ends = np.cumsum([len(c) for c in chunks])
        enc = self._tok.encode("".join(chunks), add_special_tokens=False)
        token_ends = np.array([end for _, end in enc.offsets], dtype=np.int64)
        which = np.searchsorted(ends, token_ends, side="left")
        which = np.clip(which, 0, max(len(chunks) - 1, 0))
        return np.bincount(which, minlength=len(chunks)).astype(int).tolist()


def corpus_text() -> str:
    """The synthetic-prompt corpus: a few standard-library sources of this Python."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return "\n".join((stdlib / m).read_text(encoding="utf-8") for m in CORPUS_MODULES)


def _draw_lengths(
    n: int, mean: float, std: float, rng: np.random.Generator
) -> np.ndarray:
    drawn = rng.normal(mean, std, size=n) if std > 0 else np.full(n, float(mean))
    return np.maximum(1, np.rint(drawn)).astype(int)


def synthetic_prompts(
    n: int,
    input_mean: int,
    input_std: float,
    output_mean: int,
    output_std: float,
    rng: np.random.Generator,
    tokenizer: TextTokenizer | None = None,
) -> list[Prompt]:
    """``n`` prompts with ISL ~ N(input_mean, input_std), OSL ~ N(output_mean, output_std).

    Each length is ``max(1, round(draw))``. With a tokenizer, a prompt is a window of
    ISL corpus tokens decoded to text (``input_tokens`` is its re-encoded length, which can
    differ by a token at the window edges); without, a window of ISL words.
    """
    isl = _draw_lengths(n, input_mean, input_std, rng)
    osl = _draw_lengths(n, output_mean, output_std, rng)
    corpus = corpus_text()
    units: Sequence = tokenizer.encode(corpus) if tokenizer else corpus.split()
    prompts = []
    for i in range(n):
        length = int(min(isl[i], len(units)))
        start = int(rng.integers(0, len(units) - length + 1))
        window = units[start : start + length]
        if tokenizer is None:
            text, ids, source = " ".join(window), None, TOKEN_SOURCE_WORDS
        else:
            text = tokenizer.decode(window)
            ids, source = tuple(tokenizer.encode(text)), TOKEN_SOURCE_TOKENIZER
        count = len(ids) if ids is not None else length
        prompts.append(Prompt(f"synthetic-{i}", text, count, int(osl[i]), source, ids))
    return prompts


def _dataset_prompt(
    data: object, where: str, tokenizer: TextTokenizer | None
) -> Prompt:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a dataset line is one JSON object")
    out = data.get("output_tokens")
    if not isinstance(out, int) or isinstance(out, bool) or out < 1:
        raise ConfigError(f"{where}: output_tokens must be an integer ≥ 1")
    task_id = str(data.get("task_id", where.rsplit(":", 1)[-1]))
    if isinstance(data.get("prompt"), str):
        text = data["prompt"]
        if tokenizer is None:
            return Prompt(task_id, text, len(text.split()), out, TOKEN_SOURCE_WORDS)
        ids = tuple(tokenizer.encode(text))
        return Prompt(task_id, text, len(ids), out, TOKEN_SOURCE_TOKENIZER, ids)
    ids = data.get("input_ids")
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise ConfigError(
            f"{where}: give either prompt (a string) or input_ids (a list of integers)"
        )
    if tokenizer is None:
        raise ConfigError(
            f"{where}: input_ids need a tokenizer to become text_input; pass --tokenizer "
            "DIR (the model directory)"
        )
    return Prompt(
        task_id, tokenizer.decode(ids), len(ids), out, TOKEN_SOURCE_DATASET, tuple(ids)
    )


def load_dataset(path: Path, tokenizer: TextTokenizer | None = None) -> list[Prompt]:
    """Read a trtllm-bench JSONL dataset; blank lines are skipped.

    Raises:
        ConfigError: missing file, a line that is not valid JSON or lacks a field (the
            message gives ``path:line``), or an empty dataset.
    """
    if not path.is_file():
        raise ConfigError(f"dataset {path} does not exist; pass a JSONL file")
    prompts = []
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{where}: not valid JSON ({exc.msg}); each line must be one object "
                    'like {"task_id": 0, "prompt": "...", "output_tokens": 64}'
                ) from None
            prompts.append(_dataset_prompt(data, where, tokenizer))
    if not prompts:
        raise ConfigError(f"dataset {path} holds no requests")
    return prompts
