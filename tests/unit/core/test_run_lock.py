"""One writer per run directory, released by the kernel when the holder dies."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from tests.support.timing import report_timing
from trtbench.core.errors import RunDirBusyError
from trtbench.core.run_lock import LOCK_NAME, OWNER_NAME, run_dir_lock

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from trtbench.core.run_lock import run_dir_lock
    with run_dir_lock(Path(sys.argv[1]), "trtbench run spec.yaml"):
        print("held", flush=True)
        time.sleep(60)
    """
)


@pytest.fixture
def holder(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


def test_a_second_writer_fails_at_once_naming_the_holder(tmp_path, holder):
    # The holder keeps the lock until the fixture kills it after the test: a lock that
    # waited for it would hang here (pytest's timeout), not raise.
    start = time.monotonic()
    with (
        pytest.raises(RunDirBusyError) as info,
        run_dir_lock(tmp_path / "run", "trtbench loadtest"),
    ):
        pass
    report_timing(
        "run lock: second writer refused after", time.monotonic() - start, 2, "s"
    )
    message = str(info.value)
    assert f"trtbench PID {holder.pid}" in message
    assert "`trtbench run spec.yaml`" in message
    assert "choose another --out" in message


def test_a_killed_holder_leaves_no_stale_lock(tmp_path, holder):
    holder.kill()
    holder.wait()
    with run_dir_lock(tmp_path / "run", "trtbench report"):
        assert (tmp_path / "run" / OWNER_NAME).read_text().count(str(os.getpid())) == 1
    assert not (tmp_path / "run" / OWNER_NAME).exists()


def test_a_command_that_wrote_nothing_leaves_no_directory(tmp_path):
    with run_dir_lock(tmp_path / "new", "trtbench build"):
        assert (tmp_path / "new" / LOCK_NAME).exists()
    assert not (tmp_path / "new").exists()
    with run_dir_lock(tmp_path / "kept", "trtbench build"):
        (tmp_path / "kept" / "run.json").write_text("{}")
    assert (tmp_path / "kept" / "run.json").exists()
