"""Dataset lines checked before anything is sent, and prompts held against engine limits.

Every bad line is written to a real file as a user would have it (raw bytes where the bug is
in the bytes) and read with the real tiny target tokenizer where ids matter.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from trtbench.core.errors import ConfigError
from trtbench.profiling.loadtest.workload.prompts import (
    MAX_OUTPUT_TOKENS,
    TextTokenizer,
    check_prompt_limits,
    load_dataset,
    synthetic_prompts,
)

GOOD = json.dumps({"task_id": 0, "prompt": "def main():", "output_tokens": 4})


@pytest.fixture(scope="module")
def tiny_tok(tiny_models) -> TextTokenizer:
    """The tiny target's own tokenizer (2048 ids, BOS added by the server)."""
    return TextTokenizer.load(tiny_models["target"])


def write_bytes(tmp_path, *lines: bytes):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def error_of(path, tokenizer=None) -> str:
    with pytest.raises(ConfigError) as info:
        load_dataset(path, tokenizer)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_bytes_that_are_not_utf8_name_line_and_column(tmp_path):
    bad = b'{"prompt": "caf\xe9", "output_tokens": 3}'  # Latin-1 é
    path = write_bytes(tmp_path, GOOD.encode(), bad)
    message = error_of(path)
    assert message.startswith(f"{path}:2: byte 0xe9 at column 16 is not UTF-8")
    assert "save the dataset as UTF-8" in message


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    path = write_bytes(tmp_path, b"\xef\xbb\xbf" + GOOD.encode())
    assert [p.task_id for p in load_dataset(path)] == ["0"]


@pytest.mark.parametrize("field", ["prompt", "task_id"])
def test_a_lone_surrogate_cannot_be_sent(tmp_path, field):
    line = {"task_id": 1, "prompt": "ok", "output_tokens": 3, field: "x\ud800y"}
    text = json.dumps(line)  # ensure_ascii: the file holds the escape \ud800
    assert "\\ud800" in text
    message = error_of(write_bytes(tmp_path, text.encode()))
    assert ":1: " in message and field in message
    assert "lone surrogate \\ud800 at character 1" in message


@pytest.mark.parametrize("line", ["[1, 2]", '"a prompt"', "7", "null"])
def test_a_line_that_is_not_an_object(tmp_path, line):
    message = error_of(write_bytes(tmp_path, GOOD.encode(), line.encode()))
    assert ":2: a dataset line is one JSON object" in message


def test_a_number_too_long_for_python_is_one_line(tmp_path):
    line = '{"prompt": "x", "output_tokens": ' + "9" * 5000 + "}"
    message = error_of(write_bytes(tmp_path, line.encode()))
    assert ":1: not a usable JSON line" in message


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("1e11", "got 100000000000.0"),
        ("2.5", "got 2.5"),
        ('"x"', 'got "x"'),
        ("0", "got 0"),
        ("-3", "got -3"),
        ("true", "got true"),
        ("NaN", "got NaN"),
    ],
)
def test_output_tokens_must_be_a_positive_integer(tmp_path, value, shown):
    line = f'{{"task_id": 5, "prompt": "x", "output_tokens": {value}}}'
    message = error_of(write_bytes(tmp_path, GOOD.encode(), line.encode()))
    assert f":2: output_tokens must be a positive integer ({shown})" in message


def test_output_tokens_above_int32_is_refused(tmp_path):
    line = json.dumps({"prompt": "x", "output_tokens": MAX_OUTPUT_TOKENS + 1})
    message = error_of(write_bytes(tmp_path, line.encode()))
    assert (
        f":1: output_tokens {MAX_OUTPUT_TOKENS + 1} is above {MAX_OUTPUT_TOKENS}"
        in message
    )
    ok = json.dumps({"prompt": "x", "output_tokens": MAX_OUTPUT_TOKENS})
    assert (
        load_dataset(write_bytes(tmp_path, ok.encode()))[0].output_tokens
        == MAX_OUTPUT_TOKENS
    )


@pytest.mark.parametrize(
    ("ids", "needle"),
    [
        ([5, "7"], 'input_ids[1] is "7", not a token id'),
        ([5, 2.0], "input_ids[1] is 2.0, not a token id"),
        ([True], "input_ids[0] is true, not a token id"),
        ([], "input_ids (a non-empty list of integers)"),
        ([5, -1], "input_ids[1] = -1 is outside the tokenizer's vocabulary [0, 2048)"),
        (
            [5, 2048],
            "input_ids[1] = 2048 is outside the tokenizer's vocabulary [0, 2048)",
        ),
    ],
)
def test_input_ids_are_integers_inside_the_vocabulary(tmp_path, tiny_tok, ids, needle):
    line = json.dumps({"task_id": "t", "input_ids": ids, "output_tokens": 3})
    message = error_of(write_bytes(tmp_path, line.encode()), tiny_tok)
    assert ":1: " in message and needle in message


def test_valid_input_ids_become_text(tmp_path, tiny_tok):
    ids = tiny_tok.encode("import os")
    line = json.dumps({"task_id": "t", "input_ids": ids, "output_tokens": 3})
    (prompt,) = load_dataset(write_bytes(tmp_path, line.encode()), tiny_tok)
    assert prompt.text == "import os" and prompt.input_ids == tuple(ids)
    assert prompt.origin == f"{tmp_path / 'data.jsonl'}:1"


def test_an_unreadable_dataset_is_one_line(tmp_path):
    folder = tmp_path / "d.jsonl"
    folder.mkdir()
    assert (
        error_of(folder) == f"dataset {folder} is a directory; pass a JSONL file in it"
    )
    assert "does not exist" in error_of(tmp_path / "nope.jsonl")


def test_a_cut_gzip_dataset_is_named_damaged_not_a_permission_problem(tmp_path):
    line = b'{"task_id": "t", "prompt": "hi", "output_tokens": 3}\n'
    whole = gzip.compress(line * 500)
    cut = tmp_path / "data.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])  # a download that stopped halfway
    message = error_of(cut)
    assert message.startswith(f"dataset {cut} is a damaged or cut gzip file (")
    assert "permissions" not in message and "gzip -t" in message


def dataset_prompts(tmp_path, tok, *lines: dict):
    path = write_bytes(tmp_path, *(json.dumps(line).encode() for line in lines))
    return path, load_dataset(path, tok)


def test_limits_name_the_first_bad_dataset_line(tmp_path, tiny_tok):
    long_text = " ".join(["value"] * 40)
    path, prompts = dataset_prompts(
        tmp_path,
        tiny_tok,
        {"task_id": "a", "prompt": "x = 1", "output_tokens": 4},
        {"task_id": "b", "prompt": long_text, "output_tokens": 4},
    )
    n = prompts[1].input_tokens
    check_prompt_limits(prompts, max_input_len=n + 1, max_seq_len=n + 5)
    with pytest.raises(ConfigError) as info:
        check_prompt_limits(
            prompts, max_input_len=n, special_tokens=1, engine="variant v"
        )
    assert str(info.value).startswith(
        f"{path}:2 (task b): {n} input tokens (+1 the server adds) exceed max_input_len "
        f"{n} of variant v; shorten that line's prompt"
    )
    with pytest.raises(
        ConfigError,
        match=rf"{path.name}:2 \(task b\): {n} input tokens"
        rf" \+ 4 output tokens exceed max_seq_len {n + 3}",
    ):
        check_prompt_limits(prompts, max_seq_len=n + 3)
    with pytest.raises(
        ConfigError, match=r":1 \(task a\): output_tokens 4 exceed max_output_len 3"
    ):
        check_prompt_limits(prompts, max_output_len=3)


def test_limits_check_known_ids_against_the_engine_vocabulary(tmp_path, tiny_tok):
    _, prompts = dataset_prompts(
        tmp_path, tiny_tok, {"task_id": "z", "input_ids": [3, 2047], "output_tokens": 2}
    )
    check_prompt_limits(prompts, vocab_size=2048)
    with pytest.raises(
        ConfigError,
        match=r"\(task z\): token id 2047 is outside the "
        r"vocabulary \[0, 2000\) of the engine",
    ):
        check_prompt_limits(prompts, vocab_size=2000)


def test_synthetic_lengths_beyond_the_limits_name_the_spec_fields(tiny_tok):
    rng = np.random.default_rng(0)
    prompts = synthetic_prompts(4, 40, 0, 16, 0, rng, tiny_tok)
    with pytest.raises(ConfigError) as info:
        check_prompt_limits(prompts, max_input_len=20, engine="variant base")
    message = str(info.value)
    assert message.startswith("prompt synthetic-0: ")
    assert "exceed max_input_len 20 of variant base" in message
    assert "lower loadtest.input_len_mean / input_len_std" in message
    with pytest.raises(
        ConfigError, match="lower loadtest.output_len_mean / output_len_std"
    ):
        check_prompt_limits(prompts, max_seq_len=50)


def test_word_counted_prompts_are_not_held_against_token_limits(tmp_path):
    _, prompts = dataset_prompts(
        tmp_path, None, {"prompt": " ".join(["w"] * 50), "output_tokens": 2}
    )
    check_prompt_limits(prompts, max_input_len=10, max_seq_len=3)
    with pytest.raises(ConfigError, match="2 output tokens exceed max_seq_len 2"):
        check_prompt_limits(prompts, max_seq_len=2)
