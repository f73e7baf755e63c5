"""``profile.nsys`` in ``trtbench run`` without a GPU: the nsys session's command lines (written
out by hand from the nsys User Guide's Launch/Start/Stop/Shutdown switch tables), which tier is
recorded, what happens when nsys refuses, the analysis of a real nsys export, and the early
error when nsys is missing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.support.data import external_fixture
from tests.support.synth_nsys import write_decode_export
from trtbench.cli import main
from trtbench.core.errors import ConfigError, NotAvailableError
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.tier_capture import (
    TierCapture,
    analyze_capture,
    capture_for,
    profiled_tier,
)
from trtbench.profiling.loadtest.workload.schedule import Tier
from trtbench.profiling.traces import nsys_profile
from trtbench.profiling.traces.nsys_profile import NsysProfileSpec
from trtbench.profiling.traces.nsys_session import (
    NsysSession,
    collect_sqlite,
    nsys_export_argv,
    nsys_launch_argv,
    nsys_shutdown_argv,
    nsys_start_argv,
    nsys_stop_argv,
    session_name,
)
from trtbench.spec.bench import BenchSpec

NSYS = Path("/opt/nsys/bin/nsys")


def session(tmp_path: Path, **spec: object) -> NsysSession:
    return NsysSession("trtbench-base-7", NsysProfileSpec(tmp_path, "c4", **spec), NSYS)  # type: ignore[arg-type]


def bench(**profile: object) -> BenchSpec:
    return BenchSpec.model_validate(
        {
            "models": {"target": "/m"},
            "variants": [{"name": "base", "mode": "baseline"}],
            "loadtest": {"concurrency": [1, 4, 8]},
            "profile": profile,
        }
    )


def test_session_names_start_with_a_letter_and_keep_safe_characters():
    assert session_name("trtbench", "draft-k4", "1234") == "trtbench-draft-k4-1234"
    assert session_name("med.v2", "9") == "med_v2-9"
    assert session_name("4bit") == "s4bit"


def test_session_command_lines(tmp_path):
    s = session(tmp_path)
    assert nsys_launch_argv(s, ["tritonserver", "--grpc-port=1"]) == [
        "/opt/nsys/bin/nsys",
        "launch",
        "--session-new=trtbench-base-7",
        "--trace=cuda,nvtx",
        "--cuda-graph-trace=node",
        "tritonserver",
        "--grpc-port=1",
    ]
    assert nsys_start_argv(s) == [
        "/opt/nsys/bin/nsys",
        "start",
        "--session=trtbench-base-7",
        "--sample=none",
        "--cpuctxsw=none",
        "--export=sqlite",
        "--force-overwrite=true",
        f"--output={tmp_path}/c4",
    ]
    assert nsys_stop_argv(s) == [str(NSYS), "stop", "--session=trtbench-base-7"]
    assert nsys_shutdown_argv(s) == [str(NSYS), "shutdown", "--session=trtbench-base-7"]
    assert nsys_export_argv(NSYS, tmp_path / "a.nsys-rep", tmp_path / "a.sqlite") == [
        str(NSYS),
        "export",
        "--type=sqlite",
        "--force-overwrite=true",
        f"--output={tmp_path}/a.sqlite",
        f"{tmp_path}/a.nsys-rep",
    ]
    assert s.report_path == tmp_path / "c4.nsys-rep"


def test_a_session_refuses_a_capture_range(tmp_path):
    with pytest.raises(ConfigError, match="capture_range none"):
        nsys_launch_argv(session(tmp_path, capture_range="cudaProfilerApi"))


def test_the_profiled_tier_is_a_position_in_the_tier_list():
    assert profiled_tier(bench()) is None  # nsys off
    assert profiled_tier(bench(nsys=True)) == Tier(concurrency=1)
    assert profiled_tier(bench(nsys=True, nsys_tier=2)) == Tier(concurrency=8)
    with pytest.raises(ConfigError, match=r"profile.nsys_tier 3 .*0=c1, 1=c4, 2=c8"):
        profiled_tier(bench(nsys=True, nsys_tier=3))


def test_capture_records_only_its_tier_between_start_and_stop(tmp_path):
    sent: list[list[str]] = []
    capture = TierCapture(session(tmp_path), Tier(concurrency=4), sent.append)
    for c in (1, 4, 8):  # the load generator's order of calls
        capture.tier_started(Tier(concurrency=c))
        capture.tier_ended()
    capture.close()
    assert [argv[1] for argv in sent] == ["start", "stop", "shutdown"]
    assert capture.recorded and not capture.active and capture.errors == []


def test_ctrl_c_inside_the_tier_still_stops_the_collection(tmp_path):
    sent: list[list[str]] = []
    capture = TierCapture(session(tmp_path), Tier(concurrency=1), sent.append)
    capture.tier_started(Tier(concurrency=1))  # interrupted: tier_ended never comes
    capture.close()
    assert [argv[1] for argv in sent] == ["start", "stop", "shutdown"]
    assert capture.recorded


def test_a_refused_start_is_a_warning_and_records_nothing(tmp_path):
    sent: list[str] = []

    def refuse(argv):
        sent.append(argv[1])
        if argv[1] in ("start", "shutdown"):
            raise NotAvailableError("`nsys start` exited with 1: 'no such session'")

    capture = TierCapture(session(tmp_path), Tier(concurrency=4), refuse)
    capture.tier_started(Tier(concurrency=4))
    capture.tier_ended()
    capture.close()
    assert sent == ["start", "shutdown"]  # no stop for a collection that never opened
    files, notes = analyze_capture(capture)
    assert files == []
    assert notes == [
        f"nsys trace of {tmp_path.name} c4: `nsys start` exited with 1: 'no such session'"
    ]


def real_vector_add(path: Path) -> int:
    """The real nsys 2022.4 export (schema 3.0.0) copied to ``path``: its kernel count."""
    real = external_fixture("nsys/vector_add_schema3.sqlite")
    path.write_bytes(real.read_bytes())
    with sqlite3.connect(f"file:{real}?mode=ro", uri=True) as conn:
        (kernels,) = conn.execute(
            "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ).fetchone()
    assert kernels == 4  # tests/data/README.md: a tiny vector add, 4 kernels
    return kernels


def synthetic_decode(path: Path) -> int:
    """A synthesized decode loop (3 eager steps of 4 launches): 12 kernels."""
    write_decode_export(path, steps=3, kernels_per_step=4)
    return 3 * 4


@pytest.mark.parametrize("make_export", [real_vector_add, synthetic_decode])
def test_recorded_export_is_analyzed_into_the_three_csvs(tmp_path, make_export):
    out = tmp_path / "traces" / "base"
    out.mkdir(parents=True)
    kernels = make_export(out / "c4.sqlite")
    capture = TierCapture(
        NsysSession("s", NsysProfileSpec(out, "c4"), NSYS), Tier(4), lambda argv: None
    )
    capture.tier_started(Tier(concurrency=4))
    capture.tier_ended()
    files, notes = analyze_capture(capture)
    assert notes == []
    assert [p.name for p in files] == [
        "c4.sqlite",
        "kernel_launches.csv",
        "launch_summary.csv",
        "steps.csv",
    ]
    assert len(pd.read_csv(out / "kernel_launches.csv")) == kernels
    assert collect_sqlite(capture.session, wait_s=0) == out / "c4.sqlite"


def test_capture_for_clears_an_earlier_runs_trace_of_that_variant(tmp_path):
    rd = RunDir(tmp_path)
    old = rd.traces_dir / "base"
    old.mkdir(parents=True)
    for name in ("c1.nsys-rep", "c1.sqlite", "steps.csv", "notes.txt"):
        (old / name).write_text("old")
    capture = capture_for(rd, bench(nsys=True), "base", NSYS)
    assert capture is not None and capture.tier == Tier(concurrency=1)
    assert capture.session.spec.out_dir == old
    assert sorted(p.name for p in old.iterdir()) == ["notes.txt"]  # not ours: kept
    assert capture_for(rd, bench(), "base", NSYS) is None


def write_spec(tmp_path: Path, profile: dict) -> Path:
    spec = {
        "name": "t",
        "models": {"target": str(tmp_path / "missing-model")},
        "variants": [{"name": "base", "mode": "baseline"}],
        "loadtest": {"concurrency": [1, 2]},
        "profile": profile,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_run_without_nsys_stops_before_building(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(nsys_profile, "_NSYS_GLOBS", ())
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["run", str(write_spec(tmp_path, {"nsys": True})), "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "profile.nsys is true but nsys" in err[0] and "profile.nsys: false" in err[0]
    assert not (out / "engines").exists()


def test_run_with_a_tier_out_of_range_names_the_field(tmp_path, capsys):
    out = tmp_path / "out"
    spec = write_spec(tmp_path, {"nsys": True, "nsys_tier": 2})
    with pytest.raises(SystemExit) as exc:
        main(["run", str(spec), "--out", str(out)])
    assert exc.value.code == 2
    assert "profile.nsys_tier 2 is not a tier" in capsys.readouterr().err
    assert not (out / "engines").exists()
