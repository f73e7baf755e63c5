"""``trtbench loadtest``'s peer spellings (AIPerf, ``vllm bench serve``) beside its own:
``--num-prompts`` = ``--requests-per-tier``, ``--isl`` / ``--osl`` = ``--input-len-mean`` /
``--output-len-mean``, ``--result-dir`` = ``--out``, ``--goodput`` = ``--slo`` (also in vLLM's
``KEY:MS`` form), and ``--response-mode``, which ``--endpoint`` used to be (hidden, deprecated).

Each pair is parsed by the command itself (click) and must give the same parameter value,
the hand-written one; the end-to-end run against a server is
``tests/integration/test_loadtest_peer_spellings.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_cli
from trtbench.commands.loadtest import loadtest, parse_slo
from trtbench.core.errors import ConfigError

URL = ["--url", "127.0.0.1:1"]


def params(args: list[str]) -> dict:
    return loadtest.make_context("loadtest", [*URL, *args]).params


@pytest.mark.parametrize(
    ("old", "new", "param", "value"),
    [
        ("--requests-per-tier", "--num-prompts", "requests_per_tier", 7),
        ("--input-len-mean", "--isl", "input_len_mean", 300),
        ("--output-len-mean", "--osl", "output_len_mean", 150),
        ("--out", "--result-dir", "out", Path("runs/x")),
        ("--slo", "--goodput", "slo", "ttft_ms=200"),
    ],
)
def test_the_peer_spelling_reaches_the_same_parameter(old, new, param, value):
    assert params([old, str(value)])[param] == value
    assert params([new, str(value)])[param] == value


@pytest.mark.parametrize(
    ("text", "slos"),
    [
        ("ttft_ms=200,tpot_ms=20", {"slo_ttft_ms": 200.0, "slo_tpot_ms": 20.0}),
        ("ttft:200 tpot:20", {"slo_ttft_ms": 200.0, "slo_tpot_ms": 20.0}),
        ("ttft:200,e2el:1500.5", {"slo_ttft_ms": 200.0, "slo_e2e_ms": 1500.5}),
        ("e2e_ms=900 tpot:12", {"slo_e2e_ms": 900.0, "slo_tpot_ms": 12.0}),
        ("", {}),
    ],
)
def test_goodput_takes_vllms_form_too(text, slos):
    assert parse_slo(text) == slos


@pytest.mark.parametrize("text", ["ttft=3", "ttft_ms:200", "itl:5", "ttft:x"])
def test_a_bad_goodput_pair_is_named(text):
    with pytest.raises(ConfigError, match=r"^--slo/--goodput: '") as info:
        parse_slo(text)
    assert "ttft_ms=200,tpot_ms=20" in str(info.value)
    assert "'ttft:200 tpot:20'" in str(info.value)


def test_response_mode_is_shown_and_endpoint_hidden(capsys):
    code, out, _ = run_cli(["loadtest", "--help"], capsys)
    assert code == 0
    assert "--response-mode [nostream|stream|unary]" in out
    assert "--endpoint" not in out
    for spelling in ("--num-prompts", "--isl", "--osl", "--goodput", "--result-dir"):
        assert spelling in out


def test_endpoint_still_sets_the_response_mode_with_a_note(capsys):
    """The old name's value reaches --response-mode: its --api check names the new option."""
    url = "http://127.0.0.1:1/v1"
    args = ["loadtest", "--api", "openai-completions", "--url", url]
    code, _, err = run_cli([*args, "--endpoint", "nostream"], capsys)
    assert code == 2
    assert err.splitlines() == [
        "trtbench: note: --endpoint is deprecated; use --response-mode (same values)",
        "trtbench: error: --response-mode goes with --api triton-grpc only (got --api "
        "openai-completions)",
    ]
    assert params(["--endpoint", "unary"])["endpoint"] == "unary"


def test_endpoint_and_response_mode_that_disagree_are_refused(capsys):
    args = ["loadtest", *URL, "--endpoint", "stream", "--response-mode", "unary"]
    code, _, err = run_cli(args, capsys)
    assert code == 2
    assert err.splitlines()[-1].startswith(
        "trtbench: error: --endpoint stream and --response-mode unary disagree; give "
        "--response-mode only"
    )
