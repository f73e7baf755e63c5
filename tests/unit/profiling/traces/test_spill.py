"""Rows parked on disk and read back by partition or by key range (profiling/traces/spill.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from trtbench.profiling.traces.spill import SortedRuns, SpillFiles


def run(keys: list[int], tags: list[str]) -> pa.RecordBatch:
    return pa.record_batch(
        {"key": pa.array(keys, pa.int64()), "tag": pa.array([ord(t) for t in tags])}
    )


def test_key_ranges_are_half_open_and_keep_run_order(tmp_path: Path) -> None:
    with SortedRuns(tmp_path, "key") as runs:
        runs.append(run([1, 3, 3, 7], list("abcd")))
        runs.append(run([], []))  # an empty run is no run
        runs.append(run([2, 3, 9], list("efg")))
        runs.close()
        got = runs.read(3, 8)
        assert got is not None
        # run 0's rows with 3 <= key < 8, then run 1's: not merged by key
        assert got["key"].tolist() == [3, 3, 7, 3]
        assert "".join(map(chr, got["tag"])) == "bcdf"
        assert runs.read(8, None)["key"].tolist() == [9]
        assert runs.read(1, 3)["key"].tolist() == [1, 2]
        assert runs.read(10, None) is None
        assert runs.read(4, 7) is None  # inside run 0's span, no key there
        assert runs.rows == 7
        folder = runs.folder
    assert not folder.exists()
    # the arrays read are copies: valid after the file and its map are gone
    assert got["key"].sum() == 16 and isinstance(got["key"], np.ndarray)


def test_spill_parts_come_back_in_append_order(tmp_path: Path) -> None:
    with SpillFiles(tmp_path, 3) as spill:
        spill.append(2, run([5], "x"))
        spill.append(0, run([1, 2], "yz"))
        spill.append(2, run([6], "w"))
        spill.close()
        assert spill.read(1) is None
        assert spill.read(2).column("key").to_pylist() == [5, 6]
        assert spill.read(0).column("key").to_pylist() == [1, 2]
        assert spill.rows == [2, 0, 2]
