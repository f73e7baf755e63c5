"""Soak benchmark: does a long load test keep memory bounded? (issue 12, item 5)

Builds the tiny reference baseline (max batch = the concurrency), serves it with
``trtbench deploy --serve`` and runs ``trtbench loadtest --duration-s`` against it as a
separate process, exactly as a user would. Every minute it prints the RSS of the load
generator (the ``trtbench loadtest`` process) and of the server's process tree
(tritonserver + Python stub), and the requests done and failed so far, counted from the
records the generator streams to ``loadtest/parts/`` while the tier runs.

Targets: after the first minute the client grows < 50 MB and the server tree < 5 %.

    .venv/bin/python scripts/soak.py --minutes 30 --concurrency 64
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from trtbench.builders.tiny.tiny_models import ensure_tiny_models
from trtbench.core.paths import tiny_models_dir
from trtbench.triton_repo.interface import read_repo_metadata

MIB = 1024 * 1024
CLIENT_TARGET_BYTES = 50 * 1000 * 1000
SERVER_TARGET = 0.05
VARIANT = "soak"


def trtbench(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "trtbench"), *args]


def write_spec(path: Path, models: dict[str, Path], concurrency: int) -> None:
    path.write_text(
        f"""name: soak
backend: reference
models:
  target: {models["target"]}
variants:
  - name: baseline
    mode: baseline
    dtype: float32
    max_batch_size: {concurrency}
    max_input_len: 64
    max_seq_len: 128
deploy:
  ready_timeout_s: 300
"""
    )


class PartCounter:
    """Counts the request rows (and failed ones) streamed to the parts file so far."""

    def __init__(self, path: Path):
        self.path, self.offset, self.done, self.failed = path, 0, 0, 0
        self.error_col: int | None = None

    def update(self) -> None:
        if not self.path.is_file():
            return
        with self.path.open("rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1  # only whole lines
        self.offset += end
        for row in csv.reader(io.StringIO(chunk[:end].decode())):
            if self.error_col is None:
                self.error_col = row.index("error")
                continue
            self.done += 1
            self.failed += bool(row[self.error_col])


def tree_rss(proc: psutil.Process, include_self: bool) -> int:
    procs = proc.children(recursive=True) + ([proc] if include_self else [])
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def serve(run: Path) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        trtbench("deploy", str(run), "--serve"),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()  # "baseline: grpc 127.0.0.1:PORT  http …"
    if " grpc " not in line:
        server.kill()
        raise SystemExit(f"deploy --serve did not start: {line!r}")
    return server, line.split(" grpc ")[1].split()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--out", type=Path, default=None, help="Run dir (default: temp)."
    )
    args = parser.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="trtbench-soak-")
    run = args.out or Path(tmp.name) / "run"
    spec = run.parent / "soak.yaml"
    run.parent.mkdir(parents=True, exist_ok=True)
    models = ensure_tiny_models(tiny_models_dir())
    write_spec(spec, models, args.concurrency)
    for step in (("build", str(spec), "--out", str(run)), ("deploy", str(run))):
        subprocess.run(trtbench(*step), check=True, stdout=subprocess.DEVNULL)
    model = read_repo_metadata(run / "model_repo" / "baseline").model_name
    server, url = serve(run)
    client = None
    try:
        client = subprocess.Popen(
            trtbench(
                "loadtest",
                "--url",
                url,
                "--model",
                model,
                "--variant",
                VARIANT,
                "--concurrency",
                str(args.concurrency),
                "--duration-s",
                str(args.minutes * 60),
                "--warmup-requests",
                "8",
                "--input-len-mean",
                "32",
                "--output-len-mean",
                "32",
                "--out",
                str(run),
                "--tokenizer",
                str(models["target"]),
            ),
            stdout=subprocess.DEVNULL,
        )
        counter = PartCounter(run / "loadtest" / "parts" / f"{VARIANT}.requests.csv")
        watch = psutil.Process(client.pid)
        server_proc = psutil.Process(server.pid)
        print(f"soak: {args.minutes:g} min at concurrency {args.concurrency}, {url}")
        print("minute  client_rss_MiB  server_tree_rss_MiB  requests  errors")
        rows = []
        start = time.monotonic()
        minute = 0
        while client.poll() is None:
            time.sleep(1.0)
            if time.monotonic() - start < (minute + 1) * 60:
                continue
            minute += 1
            counter.update()
            try:
                c = watch.memory_info().rss
            except psutil.Error:
                break
            s = tree_rss(server_proc, include_self=False)
            rows.append((minute, c, s))
            print(
                f"{minute:6d}  {c / MIB:14.1f}  {s / MIB:19.1f}  "
                f"{counter.done:8d}  {counter.failed:6d}",
                flush=True,
            )
        code = client.wait()
    finally:
        if client is not None and client.poll() is None:
            client.terminate()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    summary = run / "loadtest" / "summary.csv"
    print(
        f"loadtest exited with {code}; summary: {summary if summary.is_file() else 'none'}"
    )
    if len(rows) < 2:
        print("too short to measure growth (needs at least 2 minutes)")
        return 0 if code == 0 else 1
    _, c1, s1 = rows[0]
    client_growth = max(c for _, c, _ in rows[1:]) - c1
    server_growth = (max(s for _, _, s in rows[1:]) - s1) / s1
    ok_c, ok_s = client_growth < CLIENT_TARGET_BYTES, server_growth < SERVER_TARGET
    print(
        f"client growth after minute 1: {client_growth / 1e6:+.1f} MB "
        f"(target < 50 MB): {'OK' if ok_c else 'ABOVE TARGET'}"
    )
    print(
        f"server tree growth after minute 1: {server_growth * 100:+.2f} % "
        f"(target < 5 %): {'OK' if ok_s else 'ABOVE TARGET'}"
    )
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
