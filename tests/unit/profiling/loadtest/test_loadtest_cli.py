"""``trtbench loadtest`` bad input that needs no server: exit code 2 and one line naming it."""

from __future__ import annotations

import json

import pytest

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
    code, err = run(capsys, "--url", "localhost:1", "--concurrency", value,
                    "--out", str(tmp_path))  # fmt: skip
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "--concurrency" in err and "greater than or equal to 1" in err


def test_concurrency_that_is_not_a_number(capsys, tmp_path):
    code, err = run(capsys, "--url", "localhost:1", "--concurrency", "1,x")
    assert code == 2
    assert "--concurrency" in err and "comma-separated" in err


def test_dataset_line_that_is_not_json(capsys, tmp_path):
    data = tmp_path / "d.jsonl"
    good = json.dumps({"task_id": 1, "prompt": "x", "output_tokens": 3})
    data.write_text(f"{good}\n{good}\n{{oops\n")
    code, err = run(capsys, "--url", "localhost:1", "--dataset", str(data),
                    "--out", str(tmp_path))  # fmt: skip
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
