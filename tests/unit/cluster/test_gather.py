"""Merging the shards' files: hand-worked CSVs, host records, log tails."""

from __future__ import annotations

import csv
from pathlib import Path

from trtbench.cluster.gather import log_tail, merge_csv, merge_run_dirs, read_host
from trtbench.cluster.shards import Shard
from trtbench.core.run_dir import RunDir

S0 = Shard(0, ("base", "dt"))
S1 = Shard(1, ("base", "med"))


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_rows_are_copied_as_text_and_the_baseline_is_named_per_shard(tmp_path):
    a = _write(
        tmp_path / "a.csv",
        'variant,tier,digest,input\nbase,c1,007,"x, y"\ndt,c1,1.50,z\n',
    )
    b = _write(
        tmp_path / "b.csv", "variant,tier,digest,extra\nbase,c1,008,e\nmed,c1,2,f\n"
    )
    out = tmp_path / "out.csv"
    assert merge_csv([(a, S0), (b, S1)], out, "base") == 4
    assert _rows(out) == [
        {
            "variant": "base@s0",
            "tier": "c1",
            "digest": "007",
            "input": "x, y",
            "extra": "",
        },
        {"variant": "dt", "tier": "c1", "digest": "1.50", "input": "z", "extra": ""},
        {
            "variant": "base@s1",
            "tier": "c1",
            "digest": "008",
            "input": "",
            "extra": "e",
        },
        {"variant": "med", "tier": "c1", "digest": "2", "input": "", "extra": "f"},
    ]


def test_no_source_writes_nothing(tmp_path):
    out = tmp_path / "out.csv"
    assert merge_csv([(tmp_path / "absent.csv", S0)], out, "base") == 0
    assert not out.exists()


def test_run_dirs_merge_and_a_stale_merged_file_goes(tmp_path):
    root = RunDir(tmp_path / "run")
    s0 = RunDir(tmp_path / "run" / "shards" / "s0")
    _write(s0.summary_csv, "variant,tier\nbase,c1\ndt,c1\n")
    _write(s0.build_json("dt"), "{}")
    _write(s0.build_json("base"), "{}")
    _write(
        root.acceptance_csv, "variant\nold\n"
    )  # from an earlier gather; no shard has it now
    written = merge_run_dirs(root, [(S0, s0)], "base")
    assert written == {"loadtest/summary.csv": 2}
    assert not root.acceptance_csv.exists()
    assert root.build_json("dt").is_file() and not root.build_json("base").exists()


def test_host_records(tmp_path):
    _write(
        tmp_path / "host.txt",
        "host=gpu-07\nnode=gpu-07\njob=5_1\ncontainer_image=nvcr.io#x\n",
    )
    _write(
        tmp_path / "gpus.csv",
        "NVIDIA H200, GPU-aaa, 570.86\nNVIDIA H200, GPU-bbb, 570.86\n",
    )
    host = read_host(tmp_path)
    assert host.host == "gpu-07" and host.container_image == "nvcr.io#x"
    assert host.gpus == (
        ("NVIDIA H200", "GPU-aaa", "570.86"),
        ("NVIDIA H200", "GPU-bbb", "570.86"),
    )
    assert host.gpu_models == ("NVIDIA H200",)
    assert read_host(tmp_path / "none").gpus == ()


def test_log_tail_keeps_the_last_non_empty_lines(tmp_path):
    log = _write(tmp_path / "x.log", "a\n\nb\nc\n\n")
    assert log_tail(log, 2) == ["b", "c"]
    assert log_tail(None) == [] and log_tail(tmp_path / "none.log") == []
