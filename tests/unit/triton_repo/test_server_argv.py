"""tritonserver command lines (single process and mpirun MPMD, every service bound to the
bind address), binary search, log reading (header per start, the part since the latest start).

The mpirun form follows ``launch_triton_server.py`` (NVIDIA/TensorRT-LLM
``triton_backend/scripts/``); the expected argv below is written out by hand from what it
builds. Log excerpts are real tritonserver 2.51 output (``tests/data/server_logs``).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.support.data import get_test_data_dir
from trtbench import __version__
from trtbench.core.errors import ServerStartError
from trtbench.pipeline.deploy import server_config
from trtbench.spec.bench import DeploySpec
from trtbench.triton_repo.binary import (
    find_tritonserver,
    mpirun_argv,
    prepare_backend_dir,
    pytriton_root,
    server_argv,
    server_env,
)
from trtbench.triton_repo.interface import RepoMetadata
from trtbench.triton_repo.ports import Ports
from trtbench.triton_repo.server import ServerConfig, TritonServer
from trtbench.triton_repo.server_log import log_errors, read_since, start_header

BIN = Path("/opt/tritonserver/bin/tritonserver")
PORTS = Ports(grpc=8001, http=8000, metrics=8002)
RANK = [
    str(BIN),
    "--model-repository=/r",
    "--grpc-port=8001",
    "--http-port=8000",
    "--metrics-port=8002",
    "--grpc-address=127.0.0.1",
    "--http-address=127.0.0.1",
    "--metrics-address=127.0.0.1",
    "--allow-metrics=true",
    "--disable-auto-complete-config",
]
ADDRESS_FLAGS = ("--grpc-address=", "--http-address=", "--metrics-address=")


def address_flags(argv: list[str]) -> list[str]:
    return [a for a in argv if a.startswith(ADDRESS_FLAGS)]


def test_single_server_argv_binds_loopback_by_default():
    assert server_argv(BIN, Path("/r"), PORTS, None) == RANK
    argv = server_argv(BIN, Path("/r"), PORTS, Path("/b"), ["--log-verbose=1"])
    assert argv == [*RANK, "--backend-directory=/b", "--log-verbose=1"]


@pytest.mark.parametrize(
    ("address", "flags"),
    [
        ("0.0.0.0", ["0.0.0.0", "0.0.0.0", "0.0.0.0"]),
        ("10.1.2.3", ["10.1.2.3", "10.1.2.3", "10.1.2.3"]),
        # gRPC takes IPv6 in brackets, libevhtp (HTTP, metrics) with an ipv6: prefix; checked
        # against tritonserver 2.5x: a bare ::1 fails, [::1] for HTTP binds 255.255.255.255.
        ("::1", ["[::1]", "ipv6:::1", "ipv6:::1"]),
        ("::", ["[::]", "ipv6:::", "ipv6:::"]),
    ],
)
def test_every_service_binds_the_bind_address(address, flags):
    argv = server_argv(BIN, Path("/r"), PORTS, None, bind_address=address)
    assert address_flags(argv) == [
        f + v for f, v in zip(ADDRESS_FLAGS, flags, strict=True)
    ]


def test_bind_address_must_be_an_ip_literal():
    with pytest.raises(ServerStartError, match="'localhost' is not an IP address"):
        server_argv(BIN, Path("/r"), PORTS, None, bind_address="localhost")


def test_mpirun_mpmd_two_ranks_rank1_loads_only_trtllm_models():
    argv = mpirun_argv("mpirun", RANK, 2, ["tensorrt_llm", "tensorrt_llm_draft"])
    assert argv == [
        "mpirun",
        "--allow-run-as-root",
        "-n",
        "1",
        *RANK,
        "--backend-config=python,shm-region-prefix-name=prefix0_",
        ":",
        "-n",
        "1",
        *RANK,
        "--backend-config=python,shm-region-prefix-name=prefix1_",
        "--model-control-mode=explicit",
        "--load-model=tensorrt_llm",
        "--load-model=tensorrt_llm_draft",
    ]


def test_mpirun_four_ranks_have_four_segments_and_prefixes():
    argv = mpirun_argv("/usr/bin/mpirun", RANK, 4, ["tensorrt_llm"])
    assert argv.count(":") == 3
    assert argv.count(str(BIN)) == 4
    prefixes = [a for a in argv if a.startswith("--backend-config=python,shm")]
    assert [p[-8:] for p in prefixes] == [
        "prefix0_",
        "prefix1_",
        "prefix2_",
        "prefix3_",
    ]
    assert argv.count("--model-control-mode=explicit") == 3  # ranks 1..3 only
    assert argv.count("--load-model=tensorrt_llm") == 3


def test_mpirun_needs_two_ranks_and_trtllm_models():
    with pytest.raises(ServerStartError, match="world_size >= 2"):
        mpirun_argv("mpirun", RANK, 1, ["tensorrt_llm"])
    with pytest.raises(ServerStartError, match="TensorRT-LLM model names"):
        mpirun_argv("mpirun", RANK, 2, [])


def fake_executable(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_server_builds_mpirun_argv_when_world_size_is_above_one(tmp_path):
    mpirun = fake_executable(tmp_path / "bin", "mpirun")
    triton = fake_executable(tmp_path / "bin", "tritonserver")
    cfg = ServerConfig(
        tmp_path / "repo",
        tmp_path / "log" / "s.log",
        world_size=2,
        tensorrt_llm_models=("tensorrt_llm",),
    )
    server = TritonServer(cfg, environ={"PATH": str(tmp_path / "bin")})
    binary = find_tritonserver(None, {"PATH": str(tmp_path / "bin")})
    assert binary.path == triton and binary.source == "PATH"
    argv = server.build_argv(binary, PORTS)
    assert argv[:4] == ["mpirun", "--allow-run-as-root", "-n", "1"]
    assert argv[-2:] == ["--model-control-mode=explicit", "--load-model=tensorrt_llm"]
    assert mpirun.exists()
    # every MPMD segment (rank) binds loopback
    assert address_flags(argv) == address_flags(RANK) * 2


def test_mpirun_ranks_bind_the_configured_address(tmp_path):
    fake_executable(tmp_path / "bin", "mpirun")
    fake_executable(tmp_path / "bin", "tritonserver")
    env = {"PATH": str(tmp_path / "bin")}
    cfg = ServerConfig(
        tmp_path / "repo",
        tmp_path / "s.log",
        bind_address="0.0.0.0",
        world_size=4,
        tensorrt_llm_models=("tensorrt_llm",),
    )
    argv = TritonServer(cfg, environ=env).build_argv(
        find_tritonserver(None, env), PORTS
    )
    assert argv.count(":") == 3
    assert address_flags(argv) == [f + "0.0.0.0" for f in ADDRESS_FLAGS] * 4


def test_wrapper_argv_goes_in_front_of_the_server_and_of_mpirun(tmp_path):
    fake_executable(tmp_path / "bin", "mpirun")
    triton = fake_executable(tmp_path / "bin", "tritonserver")
    env = {"PATH": str(tmp_path / "bin")}
    binary = find_tritonserver(None, env)
    wrapper = ("/usr/bin/nsys", "launch", "--session-new=s1")
    single = ServerConfig(tmp_path / "repo", tmp_path / "s.log", wrapper_argv=wrapper)
    argv = TritonServer(single, environ=env).build_argv(binary, PORTS)
    assert argv[:4] == [*wrapper, str(triton)]
    assert argv[4] == f"--model-repository={tmp_path / 'repo'}"
    ranks = ServerConfig(
        tmp_path / "repo",
        tmp_path / "s.log",
        world_size=2,
        tensorrt_llm_models=("tensorrt_llm",),
        wrapper_argv=wrapper,
    )
    argv = TritonServer(ranks, environ=env).build_argv(binary, PORTS)
    assert argv[:5] == [*wrapper, "mpirun", "--allow-run-as-root"]


def test_missing_mpirun_is_named(tmp_path):
    cfg = ServerConfig(tmp_path, tmp_path / "s.log", world_size=2, mpirun="mpirun-x")
    server = TritonServer(cfg, environ={"PATH": str(tmp_path)})
    with pytest.raises(ServerStartError, match="mpirun-x not found.*= 2 needs MPI"):
        server.build_argv(find_tritonserver(fake_executable(tmp_path, "ts")), PORTS)


def test_binary_not_found_says_where_it_looked_and_which_extra(tmp_path):
    with pytest.raises(ServerStartError) as err:
        find_tritonserver(
            None,
            {"PATH": str(tmp_path)},
            ngc_path=tmp_path / "none",
            search_pytriton=False,
        )
    text = str(err.value)
    assert "$PATH" in text and str(tmp_path / "none") in text
    assert "nvidia-pytriton" in text and "trtbench[cpu-server]" in text


def test_explicit_binary_must_be_executable(tmp_path):
    with pytest.raises(ServerStartError, match="is not an executable file"):
        find_tritonserver(tmp_path / "tritonserver")


def test_pytriton_binary_gets_its_stub_and_libpython_first(tmp_path):
    root = pytriton_root()
    assert root is not None, "nvidia-pytriton (the cpu-server extra) must be installed"
    binary = find_tritonserver(None, {"PATH": ""}, ngc_path=tmp_path / "none")
    assert binary.source == "pytriton"
    backend = prepare_backend_dir(binary, tmp_path / "backends")
    prepare_backend_dir(binary, tmp_path / "backends")  # idempotent (shared per run)
    stub = backend / "python" / "triton_python_backend_stub"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert os.readlink(stub).endswith(
        f"python_backend_stubs/{version}/triton_python_backend_stub"
    )
    env = server_env(binary, {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/x"})
    assert env["LD_LIBRARY_PATH"].split(":")[0] == sysconfig.get_config_var("LIBDIR")
    assert env["LD_LIBRARY_PATH"].endswith(":/x")
    assert env["PATH"] == f"{Path(sys.executable).parent}:/usr/bin"


def test_servers_started_in_threads_prepare_one_backend_dir_at_once(tmp_path):
    # A block's servers start in threads of one process: each thread's temporary link must
    # be its own (they were named by the PID only, and a thread's rename took another's).
    binary = find_tritonserver(None, {"PATH": ""}, ngc_path=tmp_path / "none")
    for attempt in range(10):
        dest = tmp_path / f"backends{attempt}"
        with ThreadPoolExecutor(max_workers=8) as pool:
            done = [pool.submit(prepare_backend_dir, binary, dest) for _ in range(8)]
            assert [f.result() for f in done] == [dest] * 8
        stub = dest / "python" / "triton_python_backend_stub"
        assert stub.resolve().is_file()
        assert not list((dest / "python").glob(".*.tmp"))  # none left behind


def test_log_errors_from_a_model_that_raises_on_init():
    text = (get_test_data_dir("server_logs") / "model_init_raises.log").read_text()
    assert log_errors(text) == [
        "failed to load 'bad' version 1: Internal: ValueError: engine dir /x/y has no build.json",
        "error: creating server: Internal - failed to load all models",
    ]


def test_log_errors_from_a_taken_grpc_port():
    text = (get_test_data_dir("server_logs") / "grpc_port_taken.log").read_text()
    assert log_errors(text) == [
        "failed to start GRPC service: Unavailable - Socket '0.0.0.0:49441' already in use"
    ]


def test_log_errors_without_key_lines_keeps_the_last_errors():
    text = 'I1 x\nE1129 08:00:00.000001 1 a.cc:1] "first"\nE1129 08:00:00.000002 1 b.cc:2] "second"\n'
    assert log_errors(text, limit=1) == ["second"]
    assert log_errors("all fine\n") == []


def test_server_config_from_metadata(tmp_path):
    meta = RepoMetadata(
        variant="v",
        backend="trtllm",
        mode="draft_target",
        model_name="tensorrt_llm_bls",
        models=["ensemble", "tensorrt_llm", "tensorrt_llm_draft", "tensorrt_llm_bls"],
        tensorrt_llm_models=["tensorrt_llm", "tensorrt_llm_draft"],
        world_size=2,
        streaming=False,
        inputs={},
        outputs={},
        speculative_counts="per_response",
        max_batch_size=4,
        max_input_len=8,
        max_seq_len=16,
        tokenizer_dir="/t",
    )
    deploy = DeploySpec(grpc_port=9001, ready_timeout_s=12, mpirun="/usr/bin/mpirun")
    cfg = server_config(tmp_path, "v", meta, deploy)
    assert cfg.model_repo == (tmp_path / "model_repo" / "v").resolve()
    assert cfg.log_path == tmp_path / "server" / "v.log"
    assert cfg.models == (
        "ensemble",
        "tensorrt_llm",
        "tensorrt_llm_draft",
        "tensorrt_llm_bls",
    )
    assert (cfg.world_size, cfg.tensorrt_llm_models) == (
        2,
        ("tensorrt_llm", "tensorrt_llm_draft"),
    )
    assert (cfg.grpc_port, cfg.http_port, cfg.ready_timeout_s) == (9001, None, 12)
    assert cfg.mpirun == "/usr/bin/mpirun"
    assert cfg.bind_address == "127.0.0.1"
    wide = server_config(tmp_path, "v", meta, DeploySpec(bind_address="0.0.0.0"))
    assert wide.bind_address == "0.0.0.0"


def test_urls_dial_loopback_literals_never_localhost(tmp_path):
    def urls(address: str) -> tuple[str, str, str]:
        server = TritonServer(
            ServerConfig(tmp_path, tmp_path / "s.log", bind_address=address)
        )
        server.ports = PORTS
        return server.grpc_url, server.http_url, server.metrics_url

    assert (
        urls("127.0.0.1")
        == urls("0.0.0.0")
        == ("127.0.0.1:8001", "http://127.0.0.1:8000", "http://127.0.0.1:8002/metrics")
    )
    assert (
        urls("::1")
        == urls("::")
        == ("[::1]:8001", "http://[::1]:8000", "http://[::1]:8002/metrics")
    )
    assert urls("10.1.2.3")[0] == "10.1.2.3:8001"
    assert urls("fd00::2")[1] == "http://[fd00::2]:8000"


def test_health_before_start_says_so_and_never_raises(tmp_path):
    server = TritonServer(ServerConfig(tmp_path, tmp_path / "s.log"))
    assert server.health() == "tritonserver has not been started"


def test_start_header_names_version_time_attempt_and_argv():
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    line = start_header(2, ["/bin/tritonserver", "--model-repository=/a b"], when)
    assert line == (
        f"==== trtbench {__version__}: tritonserver start 2026-01-02T03:04:05Z "
        "(attempt 2): /bin/tritonserver '--model-repository=/a b' ====\n"
    )


def test_read_since_reads_from_the_offset_and_survives_truncation(tmp_path):
    log = tmp_path / "s.log"
    assert read_since(log, 0) == ""  # absent
    log.write_bytes(b"old run\nnew run\n")
    assert read_since(log, 8) == "new run\n"
    assert read_since(log, 1000) == "old run\nnew run\n"  # shorter than the offset
