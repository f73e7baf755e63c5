"""A real tritonserver serving the scripted model of ``tests/data/scripted_model`` (no torch,
no engine: it answers on a fixed timetable) for the load-test cases that only need a server,
and the ``trtbench loadtest`` arguments that aim at it."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from tests.support.data import get_test_data_dir
from trtbench.triton_repo.server import ServerConfig, TritonServer

MODEL = "scripted"
SCRIPT = {"first_delay_ms": 2, "step_ms": 2, "tokens_per_step": 1}
"""Scripted model timing: one token every 2 ms, so a tier makes many records quickly."""


def scripted_repo_module() -> ModuleType:
    """``tests/data/scripted_model/repo.py`` loaded as a module (``write_scripted_repo``,
    ``DEFAULTS``): it lives beside the model it writes, outside any package."""
    path = get_test_data_dir("scripted_model") / "repo.py"
    spec = importlib.util.spec_from_file_location("scripted_repo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def scripted_server(root: Path) -> Iterator[TritonServer]:
    """A started :class:`TritonServer` of the scripted model :data:`MODEL` (timing
    :data:`SCRIPT`), repository and ``server.log`` under ``root``, stopped with its
    process group when the block ends."""
    repo = scripted_repo_module().write_scripted_repo(root / "repo", {MODEL: SCRIPT})
    config = ServerConfig(repo, root / "server.log", models=(MODEL,))
    with TritonServer(config) as server:
        yield server


def loadtest_args(
    server: TritonServer,
    out: Path,
    variant: str,
    *more: str,
    output_len: int = 32,
    warmup: int = 0,
) -> list:
    """``trtbench loadtest`` of :data:`MODEL` on ``server`` into ``out`` as ``variant``:
    ``output_len`` tokens per request, ``warmup`` warm-up requests, then ``more`` options."""
    return [
        "loadtest",
        "--url",
        server.grpc_url,
        "--model",
        MODEL,
        "--variant",
        variant,
        "--output-len-mean",
        str(output_len),
        "--warmup-requests",
        str(warmup),
        "--out",
        out,
        *more,
    ]
