"""``trtbench loadtest`` with the peer spellings (``--num-prompts``, ``--isl``, ``--osl``,
``--goodput`` in vLLM's form, ``--result-dir``) measures what its own spellings measure,
against a real local OpenAI server (the trtllm-serve stand-in,
``tests/support/trtllm_serve_standin.py``, which streams exactly ``max_tokens`` tokens).

Asked for: 3 requests per tier at concurrency 1, prompts of 20 tokens (no spread, counted with
the target's tokenizer), 6 output tokens each, SLOs TTFT 60 s and TPOT 60 s, which every
request of a local server meets: 3 requests of 20 input and 6 output tokens, goodput = the
request throughput.
"""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.cli import run_cli
from tests.support.trtllm_serve_standin import StandIn, standin_thread

pytestmark = pytest.mark.integration

OWN = [
    "--requests-per-tier",
    "3",
    "--input-len-mean",
    "20",
    "--output-len-mean",
    "6",
    "--slo",
    "ttft_ms=60000,tpot_ms=60000",
    "--out",
]
PEERS = [
    "--num-prompts",
    "3",
    "--isl",
    "20",
    "--osl",
    "6",
    "--goodput",
    "ttft:60000 tpot:60000",
    "--result-dir",
]


@pytest.mark.parametrize("spelling", [OWN, PEERS], ids=["own", "peers"])
def test_the_peer_spellings_measure_the_same_request(
    spelling, tiny_models, tmp_path, capsys
):
    out = tmp_path / "run"
    target = str(tiny_models["target"])
    with standin_thread(StandIn(model=target)) as url:
        code, stdout, err = run_cli(
            [
                "loadtest",
                "--api",
                "openai-completions",
                "--url",
                url,
                "--model",
                target,
                "--tokenizer",
                target,
                "--concurrency",
                "1",
                "--warmup-requests",
                "0",
                *spelling,
                out,
            ],
            capsys,
        )
    assert code == 0, stdout + err
    requests = pd.read_csv(out / "loadtest" / "requests.csv")
    assert len(requests) == 3
    assert set(requests["input_tokens"]) == {20}
    assert set(requests["requested_output_tokens"]) == {6}
    assert set(requests["output_tokens"]) == {6}
    summary = pd.read_csv(out / "loadtest" / "summary.csv").iloc[0]
    assert summary["request_goodput_per_s"] == pytest.approx(
        summary["request_throughput_per_s"]
    )
