"""Re-capture ``metrics_kv_echo.txt``: a real tritonserver's /metrics after known requests.

Run from the repository root: ``.venv/bin/python tests/data/server_metrics/capture_metrics.py``.
It serves ``model_repo/`` (model ``kv_echo``) with CPU metrics on, sends REQUEST_LENGTHS
(INPUT_IDS lengths) one after another over gRPC, waits for the CPU-metrics interval, and
saves the /metrics text. Expected values in the file follow from model.py's docstring:
nv_inference_request_success = nv_inference_count = 3, KV used = ceil(100/32) = 4 blocks.
"""

from __future__ import annotations

import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient

from trtbench.triton_repo.server import ServerConfig, TritonServer

HERE = Path(__file__).resolve().parent
REQUEST_LENGTHS = (100, 10, 100)
METRICS_INTERVAL_MS = 200


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        config = ServerConfig(
            model_repo=HERE / "model_repo",
            log_path=Path(tmp) / "server.log",
            models=("kv_echo",),
            ready_timeout_s=120,
            extra_args=(
                "--allow-cpu-metrics=true",
                f"--metrics-interval-ms={METRICS_INTERVAL_MS}",
            ),
        )
        with TritonServer(config) as server:
            client = grpcclient.InferenceServerClient(server.grpc_url)
            for n in REQUEST_LENGTHS:
                tensor = grpcclient.InferInput("INPUT_IDS", [n], "INT32")
                tensor.set_data_from_numpy(np.arange(n, dtype=np.int32))
                client.infer("kv_echo", [tensor])
            time.sleep(3 * METRICS_INTERVAL_MS / 1000)
            with urllib.request.urlopen(server.metrics_url, timeout=5) as resp:  # noqa: S310
                text = resp.read().decode()
    (HERE / "metrics_kv_echo.txt").write_text(text)
    print(f"wrote {len(text)} characters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
