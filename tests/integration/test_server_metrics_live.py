"""Scrape a live tritonserver's /metrics and sample its process tree during real requests."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
import tritonclient.grpc as grpcclient

from tests.support.data import get_test_data_dir
from tests.support.faults import wait_for
from trtbench.profiling.memory.breakdown import VariantMemoryInputs, memory_breakdown
from trtbench.profiling.memory.sampler import MemorySampler
from trtbench.profiling.memory.server_metrics import ServerMetricsScraper
from trtbench.profiling.memory.server_metrics_views import (
    counter_deltas,
    kv_cache_blocks,
    phase_summary,
)
from trtbench.triton_repo.server import ServerConfig, TritonServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("kv_echo") / "server.log"
    config = ServerConfig(
        model_repo=get_test_data_dir("server_metrics") / "model_repo",
        log_path=log,
        models=("kv_echo",),
        ready_timeout_s=120,
        extra_args=("--allow-cpu-metrics=true", "--metrics-interval-ms=200"),
    )
    with TritonServer(config) as srv:
        yield srv


def send(server: TritonServer, lengths: list[int]) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    for n in lengths:
        tensor = grpcclient.InferInput("INPUT_IDS", [n], "INT32")
        tensor.set_data_from_numpy(np.arange(n, dtype=np.int32))
        out = client.infer("kv_echo", [tensor]).as_numpy("OUTPUT_IDS")
        assert out.shape == (n,)


def counted_after(
    scraper: ServerMetricsScraper, phase: str, since_ns: int, requests: int
) -> bool:
    """Whether a scrape of ``phase`` taken after ``since_ns`` counts ``requests`` more
    kv_echo successes than the phase's first scrape (the one its mark took)."""
    frame = scraper.frame()
    success = frame[
        (frame["phase"] == phase)
        & (frame["sample"] == "nv_inference_request_success")
        & (frame["model"] == "kv_echo")
    ].sort_values("t_ns")
    if success.empty:
        return False
    later = success.loc[success["t_ns"] > since_ns, "value"]
    return bool((later >= success["value"].iloc[0] + requests).any())


def test_scraper_and_sampler_follow_the_tiers_of_a_live_server(server):
    assert server.process is not None
    pid = server.process.pid
    with (
        MemorySampler(pid, variant="kv", interval_ms=50, phase="warmup") as mem,
        ServerMetricsScraper(server.metrics_url, variant="kv", interval_ms=100) as sm,
    ):
        for phase, lengths in (("tier:a", [100] * 5), ("tier:b", [10] * 3)):
            mem.mark(phase)
            sm.mark(phase)
            send(server, lengths)
            sent_ns, n = time.perf_counter_ns(), len(lengths)
            time.sleep(0.25)  # a tier lasts: periodic scrapes land inside it
            # ... at least one after the requests, with them counted (a starved scraper
            # thread scrapes less often; a counter moves a moment after its response)
            wait_for(
                lambda p=phase, t=sent_ns, n=n: counted_after(sm, p, t, n),
                60,
                f"a scrape of {phase} counting its requests",
            )
    metrics = sm.frame()
    assert sm.error_count == 0 and sm.scrapes >= 3

    deltas = counter_deltas(metrics)
    success = deltas[deltas["sample"] == "nv_inference_request_success"]
    success = success.set_index("phase")["delta"]
    assert success["tier:a"] == 5 and success["tier:b"] == 3

    kv = kv_cache_blocks(metrics)
    last = kv.sort_values("t_ns").groupby("phase")["used_blocks"].last()
    # model.py: used = ceil(n / 32): 100 ids → 4 blocks, 10 ids → 1 block
    assert last["tier:a"] == 4 and last["tier:b"] == 1

    summary = phase_summary(metrics).set_index("phase")
    assert (
        summary.loc["tier:b", "max_kv_used_blocks"] == 4
    )  # tier:b began while 4 were used
    assert summary.loc["tier:a", "mean_request_us"] > 0

    memory = mem.frame()
    tiers = memory[memory["phase"].str.startswith("tier:")]
    # reader "auto": NVML on a GPU machine, RSS here; the tree's RSS is sampled in both
    assert set(memory["source"]) == {mem.source}
    # tritonserver + the Python backend stub of kv_echo's one instance
    assert (tiers["tree_pids"] >= 2).all()
    assert (tiers["rss_bytes"] > 50 * 2**20).all()

    row = memory_breakdown(
        [
            VariantMemoryInputs(
                "kv",
                "baseline",
                {"target": 1},
                kv_bytes_per_token={"target": 1024},
                server_metrics=metrics,
                memory=memory,
            )
        ]
    ).iloc[0]
    # 64 blocks × 32 tokens × 1024 B = 2 MiB
    assert row["target_kv_pool_bytes"] == 2 * 2**20
    assert row["peak_rss_bytes"] == pd.to_numeric(tiers["rss_bytes"]).max()
