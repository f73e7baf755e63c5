"""vLLM servers shared by the integration tests: each distinct configuration is started
once per session (30–110 s each on 2 cores) and stopped with its process group when the
session ends. A test reads counters as deltas over its own requests, never as totals,
since earlier tests used the same server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.slurm_cluster import LocalSlurm, local_slurm
from tests.support.vllm_serve import DETAILED, DRAFT_K, serve_target

CHAT_TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "chat_template.jinja"
"""The tiny models have no chat template of their own (the chat API needs one)."""


@pytest.fixture(scope="session")
def vllm_target_url(tiny_models, tmp_path_factory) -> Iterator[str]:
    """``http://127.0.0.1:PORT/v1`` of vLLM serving the tiny target alone (no speculation),
    with :data:`CHAT_TEMPLATE`."""
    yield from serve_target(
        tiny_models, tmp_path_factory, "target", ["--chat-template", str(CHAT_TEMPLATE)]
    )


def _draft_config(tiny_models) -> list[str]:
    config = {
        "method": "draft_model",
        "model": str(tiny_models["draft"]),
        "num_speculative_tokens": DRAFT_K,
    }
    return ["--speculative-config", json.dumps(config)]


@pytest.fixture(scope="session")
def vllm_draft_url(tiny_models, tmp_path_factory) -> Iterator[str]:
    """``http://127.0.0.1:PORT/v1`` of vLLM serving the tiny target with the tiny draft
    model, ``DRAFT_K`` tokens per step; counts only in its Prometheus ``/metrics``."""
    yield from serve_target(
        tiny_models, tmp_path_factory, "draft", _draft_config(tiny_models)
    )


@pytest.fixture(scope="session")
def vllm_draft_detailed_url(tiny_models, tmp_path_factory) -> Iterator[str]:
    """As :func:`vllm_draft_url`, with :data:`DETAILED` per-request counts."""
    extra = [*DETAILED, *_draft_config(tiny_models)]
    yield from serve_target(tiny_models, tmp_path_factory, "draft-detailed", extra)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory) -> Iterator[LocalSlurm]:
    """A single-node Slurm cluster on this machine (``tests/support/slurm_cluster.py``),
    started once per session with ``SLURM_CONF`` set for the Slurm commands, stopped
    here; skipped with the reason when it cannot start (not root, no apt-get, …)."""
    import os

    with local_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        if isinstance(cluster, str):
            pytest.skip(cluster)
        old = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(cluster.conf)
        try:
            yield cluster
        finally:
            if old is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = old
