"""``trtbench loadtest`` bad input that needs no server: exit code 2 and one line naming it."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.cli import run_cli
from trtbench.cli import main
from trtbench.triton_repo.ports import free_port


def run(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(["loadtest", *args])
    return int(info.value.code), capsys.readouterr().err.strip()


def test_unreachable_url(capsys, tmp_path):
    url = f"localhost:{free_port()}"  # nothing listens there
    code, err = run(capsys, "--url", url, "--out", str(tmp_path))
    assert code == 2
    assert len(err.splitlines()) == 1
    assert f"cannot reach Triton at {url}" in err and "--url" in err


@pytest.mark.parametrize("value", ["0", "4,-2"])
def test_concurrency_must_be_positive(capsys, tmp_path, value):
    code, err = run(
        capsys, "--url", "localhost:1", "--concurrency", value, "--out", str(tmp_path)
    )
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "--concurrency" in err and "greater than or equal to 1" in err


@pytest.mark.parametrize("value", ["1,x", "1,,2", "1,", ","])
def test_concurrency_that_is_not_a_number(capsys, tmp_path, value):
    code, err = run(capsys, "--url", "localhost:1", "--concurrency", value)
    assert code == 2
    assert "--concurrency" in err and "comma-separated" in err


def test_dataset_line_that_is_not_json(capsys, tmp_path):
    data = tmp_path / "d.jsonl"
    good = json.dumps({"task_id": 1, "prompt": "x", "output_tokens": 3})
    data.write_text(f"{good}\n{good}\n{{oops\n")
    code, err = run(
        capsys, "--url", "localhost:1", "--dataset", str(data), "--out", str(tmp_path)
    )
    assert code == 2
    assert len(err.splitlines()) == 1
    assert f"{data}:3: not valid JSON" in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--slo", "ttft=3"], "--slo"),
        (["--requests-per-tier", "5", "--duration-s", "2"], "not both"),
        (["--burstiness", "0"], "--burstiness"),
    ],
)
def test_other_bad_options_name_the_option(capsys, tmp_path, args, needle):
    code, err = run(capsys, "--url", "localhost:1", *args, "--out", str(tmp_path))
    assert code == 2
    assert needle in err


# --- every input checked before the first tier (nothing listens at --url, so an error
# --- about the input proves it came before connecting, let alone measuring) ---------


def fails_before_connecting(capsys, tmp_path, *args) -> str:
    out = tmp_path / "out"
    code, _, err = run_cli(
        ["loadtest", "--url", f"127.0.0.1:{free_port()}", "--out", out, *args], capsys
    )
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trtbench: error: "), err
    assert "cannot reach" not in err
    assert not (out / "loadtest").exists()
    return lines[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--concurrency", "2,2"], "--concurrency: 2 is listed twice"),
        (["--concurrency", "1,4,1"], "--concurrency: 1 is listed twice"),
        (["--request-rate", "2.5,1,2.5"], "--request-rate: 2.5 is listed twice"),
    ],
)
def test_duplicate_tiers_name_the_option(capsys, tmp_path, args, needle):
    assert needle in fails_before_connecting(capsys, tmp_path, *args)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b'{"prompt": "\xff\xfe", "output_tokens": 3}', ":2: byte 0xff at column 13"),
        (
            b'{"prompt": "\\udc80", "output_tokens": 3}',
            ":2: prompt holds a lone surrogate",
        ),
        (
            b'{"prompt": "x", "output_tokens": 1e11}',
            ":2: output_tokens must be a positive",
        ),
        (
            b'{"prompt": "x", "output_tokens": 2.5}',
            ":2: output_tokens must be a positive",
        ),
        (b'{"input_ids": [5, 2048], "output_tokens": 3}', ":2: input_ids[1] = 2048 is"),
    ],
)
def test_bad_dataset_lines_stop_before_the_first_tier(
    capsys, tmp_path, tiny_models, line, needle
):
    data = tmp_path / "d.jsonl"
    good = json.dumps({"task_id": 1, "prompt": "x", "output_tokens": 3}).encode()
    data.write_bytes(good + b"\n" + line + b"\n")
    err = fails_before_connecting(
        capsys, tmp_path, "--dataset", data, "--tokenizer", tiny_models["target"]
    )
    assert f"{data}{needle}" in err


def test_an_unwritable_out_stops_before_measuring(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run_cli(
        ["loadtest", "--url", f"127.0.0.1:{free_port()}", "--out", blocker / "run"],
        capsys,
    )
    assert code == 2
    assert err.strip() == (
        f"trtbench: error: cannot write to {blocker / 'run'} (Not a directory); choose "
        "another --out or fix its permissions"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into 0555 folders")
def test_a_read_only_out_stops_before_measuring(capsys, tmp_path):
    out = tmp_path / "out"
    (out / "loadtest").mkdir(parents=True)
    (out / "loadtest").chmod(0o555)
    try:
        code, _, err = run_cli(
            ["loadtest", "--url", f"127.0.0.1:{free_port()}", "--out", out], capsys
        )
    finally:
        (out / "loadtest").chmod(0o755)
    assert code == 2
    assert f"cannot write to {out / 'loadtest'} (Permission denied)" in err
    assert list((out / "loadtest").iterdir()) == []
