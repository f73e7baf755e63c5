"""Prompts for the load test: synthetic (ISL/OSL mean ± std) or a trtllm-bench JSONL dataset.

Synthetic prompts are windows of a fixed text corpus (this Python's own standard-library
sources, the text the tiny models were trained on) cut to a drawn number of tokens; the
lengths are ``max(1, round(N(mean, std)))`` drawn from the ``numpy.random.Generator`` passed
in, so a seed gives the same prompts on every run. Without a tokenizer, a "token" is a
whitespace-separated word (marked ``words`` in ``input_token_source``).

Dataset lines follow trtllm-bench's ``prepare_dataset.py`` output (NVIDIA/TensorRT-LLM
``benchmarks/cpp/prepare_dataset.py``):
``{"task_id": …, "prompt": "…" | "input_ids": [...], "output_tokens": N}``. Every line is
checked before anything is sent (UTF-8 bytes, one JSON object, text that can be sent, token ids
inside the vocabulary, a positive ``output_tokens`` that fits ``max_tokens``);
:func:`check_prompt_limits` then holds the prompts against an engine's limits.
"""

from __future__ import annotations

import codecs
import gzip
import json
import logging
import sysconfig
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trtbench.core.errors import ConfigError
from trtbench.core.records import (
    TOKEN_SOURCE_DATASET,
    TOKEN_SOURCE_TOKENIZER,
    TOKEN_SOURCE_WORDS,
)

log = logging.getLogger(__name__)

CORPUS_MODULES = ("textwrap.py", "argparse.py", "difflib.py", "json/decoder.py")
MAX_OUTPUT_TOKENS = 2**31 - 1
"""The most tokens a request can ask for: ``max_tokens`` is sent as INT32."""
DATASET_LINE = '{"task_id": 0, "prompt": "...", "output_tokens": 64}'


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
        origin: ``file:line`` of a dataset prompt (empty for synthetic ones).
        category: what kind of traffic it stands for: the dataset's own category (e.g.
            MT-Bench's ``writing``, ``coding``) or its source's name; empty when none was
            given (synthetic prompts, a single trtllm-bench file).
    """

    task_id: str
    text: str
    input_tokens: int
    output_tokens: int
    input_token_source: str
    input_ids: tuple[int, ...] | None = None
    origin: str = ""
    category: str = ""

    @property
    def where(self) -> str:
        """How error messages name it: ``data.jsonl:7 (task 12)`` or ``prompt synthetic-3``."""
        if self.origin:
            return f"{self.origin} (task {self.task_id})"
        return f"prompt {self.task_id}"


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

    @property
    def vocab_size(self) -> int:
        """Ids this tokenizer knows, added tokens included: valid ids are 0 … vocab_size-1."""
        return int(self._tok.get_vocab_size(with_added_tokens=True))

    @property
    def special_tokens(self) -> int:
        """Tokens the server adds to every prompt (it encodes with special tokens: BOS…)."""
        post = getattr(self._tok, "post_processor", None)
        return int(post.num_special_tokens_to_add(False)) if post is not None else 0

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


def shown_value(value: object) -> str:
    """``value`` as JSON for a message, cut to 40 characters."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def sendable_text(text: str, field: str, where: str) -> str:
    """``text`` unless it holds a lone surrogate (JSON allows ``"\\ud800"``; UTF-8 does not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigError(
            f"{where}: {field} holds a lone surrogate \\u{ord(text[exc.start]):04x} at "
            f"character {exc.start}, which cannot be sent as UTF-8; write the character "
            "itself or a complete surrogate pair"
        ) from None
    return text


def positive_tokens(data: dict, where: str, key: str = "output_tokens") -> int:
    """``data[key]``: a whole number of tokens in ``1 … MAX_OUTPUT_TOKENS``.

    Raises:
        ConfigError: missing, not an integer, below 1 or above INT32 (names ``where``).
    """
    out = data.get(key)
    if isinstance(out, bool) or not isinstance(out, int) or out < 1:
        got = "it is missing" if out is None else f"got {shown_value(out)}"
        raise ConfigError(
            f"{where}: {key} must be a positive integer ({got}); write a whole "
            f'number of tokens, e.g. "{key}": 64'
        )
    if out > MAX_OUTPUT_TOKENS:
        raise ConfigError(
            f"{where}: {key} {out} is above {MAX_OUTPUT_TOKENS} (max_tokens is sent "
            "as INT32); ask for fewer tokens"
        )
    return out


def _input_ids(ids: object, where: str, vocab_size: int | None) -> tuple[int, ...]:
    if not isinstance(ids, list) or not ids:
        raise ConfigError(
            f"{where}: give either prompt (a non-empty string) or input_ids (a non-empty "
            "list of integers)"
        )
    for i, tok in enumerate(ids):
        if isinstance(tok, bool) or not isinstance(tok, int):
            raise ConfigError(
                f"{where}: input_ids[{i}] is {shown_value(tok)}, not a token id; input_ids "
                "holds integers only"
            )
        if tok < 0 or (vocab_size is not None and tok >= vocab_size):
            vocab = f"[0, {vocab_size})" if vocab_size is not None else "of ids ≥ 0"
            raise ConfigError(
                f"{where}: input_ids[{i}] = {tok} is outside the tokenizer's vocabulary "
                f"{vocab}; tokenize the dataset with this model's tokenizer"
            )
    return tuple(ids)


def task_id_of(data: dict, where: str, key: str = "task_id") -> str:
    """``data[key]`` (a string or an integer) as text; the line number when absent."""
    raw_id = data.get(key, where.rsplit(":", 1)[-1])
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
        raise ConfigError(
            f"{where}: {key} must be a string or an integer, got {shown_value(raw_id)}"
        )
    return sendable_text(str(raw_id), key, where)


def text_prompt(
    task_id: str,
    text: str,
    output_tokens: int,
    tokenizer: TextTokenizer | None,
    where: str,
    category: str = "",
) -> Prompt:
    """A dataset prompt from its text: tokens counted by ``tokenizer``, else words."""
    if tokenizer is None:
        count, ids, source = len(text.split()), None, TOKEN_SOURCE_WORDS
    else:
        ids = tuple(tokenizer.encode(text))
        count, source = len(ids), TOKEN_SOURCE_TOKENIZER
    return Prompt(task_id, text, count, output_tokens, source, ids, where, category)


def dataset_prompt(data: object, where: str, tokenizer: TextTokenizer | None) -> Prompt:
    """One checked trtllm-bench line (``prompt`` text or ``input_ids``) as a Prompt."""
    if not isinstance(data, dict):
        raise ConfigError(
            f"{where}: a dataset line is one JSON object, like {DATASET_LINE}"
        )
    out = positive_tokens(data, where)
    task_id = task_id_of(data, where)
    text = data.get("prompt")
    if isinstance(text, str) and text:
        text = sendable_text(text, "prompt", where)
        return text_prompt(task_id, text, out, tokenizer, where)
    vocab = tokenizer.vocab_size if tokenizer is not None else None
    ids = _input_ids(data.get("input_ids"), where, vocab)
    if tokenizer is None:
        raise ConfigError(
            f"{where}: input_ids need a tokenizer to become text_input; pass --tokenizer "
            "DIR (the model directory)"
        )
    text = sendable_text(tokenizer.decode(ids), "the decoded input_ids", where)
    return Prompt(task_id, text, len(ids), out, TOKEN_SOURCE_DATASET, ids, where)


def parse_json_line(raw: bytes, where: str, example: str = DATASET_LINE) -> object:
    """One line's JSON value, or a ConfigError naming the bad byte or syntax (``example``:
    what a good line looks like, shown in the fix)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{where}: byte 0x{raw[exc.start]:02x} at column {exc.start + 1} is not "
            "UTF-8; save the dataset as UTF-8 (e.g. `iconv -t UTF-8`)"
        ) from None
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{where}: not valid JSON ({exc.msg}); each line must be one object like "
            f"{example}"
        ) from None
    except (ValueError, RecursionError) as exc:  # a 5000-digit number, deep nesting
        what = str(exc).split(";")[0] or "nested too deeply"
        raise ConfigError(
            f"{where}: not a usable JSON line ({what}); each line must be one object "
            f"like {example}"
        ) from None


def read_jsonl(
    path: Path, example: str = DATASET_LINE, label: str = "dataset"
) -> Iterator[tuple[str, object]]:
    """``(path:line, JSON value)`` of every non-blank line of a JSONL file (gzip when it
    ends in ``.gz``), read as bytes; a UTF-8 byte-order mark is allowed.

    Raises:
        ConfigError: a missing or unreadable file (named ``label`` and ``path``), a line
            that is not UTF-8 or not JSON (``path:line``, ``example`` in the fix).
    """
    if path.is_dir():
        raise ConfigError(f"{label} {path} is a directory; pass a JSONL file in it")
    if not path.is_file():
        raise ConfigError(f"{label} {path} does not exist; pass a JSONL file")
    opener = gzip.open if path.suffix == ".gz" else Path.open
    try:
        with opener(path, "rb") as handle:
            for lineno, raw in enumerate(handle, start=1):
                if lineno == 1:
                    raw = raw.removeprefix(codecs.BOM_UTF8)
                if raw.strip():
                    where = f"{path}:{lineno}"
                    yield where, parse_json_line(raw, where, example)
    except (
        EOFError,
        gzip.BadGzipFile,
        zlib.error,
    ) as exc:  # the gzip stream, not access
        raise ConfigError(
            f"{label} {path} is a damaged or cut gzip file ({exc}); download or "
            "compress it again (`gzip -t` checks one)"
        ) from None
    except OSError as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise ConfigError(
            f"cannot read {label} {path} ({reason}); fix its permissions or pass "
            "another file"
        ) from None


def load_dataset(path: Path, tokenizer: TextTokenizer | None = None) -> list[Prompt]:
    """Read and check a trtllm-bench JSONL dataset; blank lines are skipped.

    The file is read as bytes, line by line (:func:`read_jsonl`).

    Args:
        path: the ``.jsonl`` file.
        tokenizer: counts prompt tokens, turns ``input_ids`` into text and bounds the ids
            (``0 ≤ id < tokenizer.vocab_size``); without one, prompts count words.

    Raises:
        ConfigError: missing or unreadable file, no request in it, or a bad line, named
            ``path:line``: bytes that are not UTF-8, not one JSON object, a lone surrogate
            in a string, ``input_ids`` that are not integers or lie outside the vocabulary,
            ``output_tokens`` that is not an integer in ``1 … MAX_OUTPUT_TOKENS``.
    """
    prompts = [dataset_prompt(d, where, tokenizer) for where, d in read_jsonl(path)]
    if not prompts:
        raise ConfigError(f"dataset {path} holds no requests")
    return prompts


def _limit_fix(prompt: Prompt, what: str) -> str:
    if prompt.origin:
        return f"shorten that line's {what}"
    field = "input_len" if what == "prompt" else "output_len"
    return f"lower loadtest.{field}_mean / {field}_std"


def check_prompt_limits(
    prompts: Sequence[Prompt],
    *,
    max_input_len: int | None = None,
    max_seq_len: int | None = None,
    max_output_len: int | None = None,
    vocab_size: int | None = None,
    special_tokens: int = 0,
    engine: str = "the engine",
) -> None:
    """Check every prompt against an engine's limits (pure); None skips a limit.

    Input lengths counted in words (no tokenizer) are not held against token limits.

    Args:
        prompts: the requests' inputs.
        max_input_len: most prompt tokens the engine accepts.
        max_seq_len: most prompt + output tokens per request.
        max_output_len: most output tokens per request.
        vocab_size: the engine's vocabulary; every known input id must be below it.
        special_tokens: tokens the server adds to each prompt (BOS), counted as input.
        engine: how messages name the engine (``variant baseline``).

    Raises:
        ConfigError: the first prompt over a limit, named by ``file:line (task id)`` or
            ``prompt synthetic-<i>``, with the limit and what to change.
    """
    for p in prompts:
        counted = p.input_token_source != TOKEN_SOURCE_WORDS
        n = p.input_tokens + special_tokens if counted else 1
        added = f" (+{special_tokens} the server adds)"
        extra = added if counted and special_tokens else ""
        bad = [i for i in p.input_ids or () if vocab_size and not 0 <= i < vocab_size]
        if bad:
            raise ConfigError(
                f"{p.where}: token id {bad[0]} is outside the vocabulary [0, {vocab_size}) "
                f"of {engine}; tokenize the prompts with that model's tokenizer"
            )
        if counted and max_input_len is not None and n > max_input_len:
            raise ConfigError(
                f"{p.where}: {p.input_tokens} input tokens{extra} exceed max_input_len "
                f"{max_input_len} of {engine}; {_limit_fix(p, 'prompt')} or build with a "
                "larger max_input_len"
            )
        if max_output_len is not None and p.output_tokens > max_output_len:
            raise ConfigError(
                f"{p.where}: output_tokens {p.output_tokens} exceed max_output_len "
                f"{max_output_len} of {engine}; {_limit_fix(p, 'output_tokens')}"
            )
        if max_seq_len is not None and n + p.output_tokens > max_seq_len:
            tokens = f"{p.input_tokens} input tokens{extra} + " if counted else ""
            raise ConfigError(
                f"{p.where}: {tokens}{p.output_tokens} output tokens exceed max_seq_len "
                f"{max_seq_len} of {engine}; {_limit_fix(p, 'output_tokens')} or build "
                "with a larger max_seq_len"
            )
