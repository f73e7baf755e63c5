"""Serve the llmapi interface with the reference runtime on a real tritonserver.

A DraftTarget (K=4) ``llm_api.yaml`` of the tiny models is rendered as TensorRT-LLM's
``llmapi`` repository (``render_repository``, reference runtime), served, and one streamed
request goes over gRPC ``ModelStreamInfer`` with the llmapi tensors (no batch dimension).
Checked: the cumulative text of the last response equals what a *baseline* engine made
from the same LLM arguments generates (speculation is lossless), every response's text
extends the previous one (TensorRT-LLM streams cumulative text), the speculative totals are
consistent, and the server's timestamps are ordered.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from tests.support.serving import Streamed, stream_infer
from trtbench.builders.manifest import BuildManifest, CudaGraphs, ModelFiles
from trtbench.builders.reference.llm_args import engine_from_llm_args
from trtbench.spec.bench import DeploySpec
from trtbench.triton_repo.render import render_repository
from trtbench.triton_repo.server import ServerConfig, TritonServer
from trtbench.triton_repo.validate import validate_files
from trtbench.triton_repo.write import write_repository

pytestmark = pytest.mark.integration

PROMPT = "def greet(name):\n    return f'héllo, {name} → ünïcode'\n\ndef "
MAX_TOKENS = 24


def llm_args(models, speculative: bool) -> dict:
    args = {
        "backend": "pytorch",
        "max_batch_size": 4,
        "max_seq_len": 256,
        "cuda_graph_config": None,
    }
    if speculative:
        args["speculative_config"] = {
            "decoding_type": "DraftTarget",
            "max_draft_len": 4,
            "speculative_model": str(models["draft"]),
        }
    return args


def build_manifest(models) -> BuildManifest:
    """build.json of a trtllm-pytorch draft_target variant (labelled after validation, so
    the test does not depend on BuildManifest's backend list)."""
    m = BuildManifest(
        backend="reference",
        variant={"name": "dt", "mode": "draft_target", "max_batch_size": 4},
        mode="draft_target",
        max_draft_len=4,
        models={"target": ModelFiles(path=str(models["target"]))},
        tokenizer_dir=str(models["target"]),
        cuda_graphs=CudaGraphs(requested=False, available=False, reason="off"),
    )
    return m.model_copy(update={"backend": "trtllm-pytorch"})


def reference_deploy() -> DeploySpec:
    return DeploySpec(llmapi_runtime="reference", reference_device="cpu")


def stream(url: str) -> list[Streamed]:
    """One streamed request with the llmapi tensors (shape ``[1]``: no batch dimension)."""
    values = {
        "text_input": PROMPT,
        "streaming": True,
        "sampling_param_max_tokens": MAX_TOKENS,
        "sampling_param_exclude_input_from_output": True,
        "sampling_param_return_perf_metrics": True,
        "return_finish_reason": True,
        "sampling_param_top_k": 1,  # accepted and ignored
    }
    return stream_infer(url, "tensorrt_llm", values, shape=(1,))


def test_draft_target_llmapi_stream_is_lossless(tiny_models, tmp_path):
    engine_dir = tmp_path / "engines" / "dt"
    engine_dir.mkdir(parents=True)
    (engine_dir / "llm_api.yaml").write_text(
        yaml.safe_dump(llm_args(tiny_models, speculative=True))
    )
    files = render_repository(
        build_manifest(tiny_models), engine_dir, reference_deploy()
    )
    assert validate_files(files) == []
    repo = write_repository(files, tmp_path / "model_repo" / "dt")

    baseline = engine_from_llm_args(
        {"model": str(tiny_models["target"]), **llm_args(tiny_models, False)}, "cpu"
    )
    ids = baseline.generate_ids(
        baseline.tokenizer.encode(PROMPT, add_special_tokens=True), MAX_TOKENS
    )
    want = baseline.tokenizer.decode(
        ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
    )
    baseline.close()

    config = ServerConfig(
        model_repo=repo,
        log_path=tmp_path / "server.log",
        models=("tensorrt_llm",),
        ready_timeout_s=120,
    )
    with TritonServer(config) as server:
        responses = stream(server.grpc_url)
        with pytest.raises(RuntimeError, match="already running"):
            server.start()  # a second launch would orphan the first server
    data = [r for r in responses if "text_output" in r.outputs]
    texts = [r.text for r in data]
    assert len(data) >= 2 and data[-1].final
    assert [r.final for r in responses] == [False] * (len(responses) - 1) + [True]
    # cumulative text: each response extends the one before; the last is the whole output
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False))
    assert texts[-1] == want
    # fewer responses than tokens: draft-target steps emit several tokens each
    assert len(data) < len(ids)
    last = data[-1].outputs
    assert last["finish_reason"].reshape(-1)[0].decode() in ("length", "stop")

    def value(name: str, item=last):
        array = item[name]
        assert array.shape == (1,), (name, array.shape)
        return array[0].item()

    draft, accepted = value("total_draft_tokens"), value("total_accepted_draft_tokens")
    assert last["total_draft_tokens"].dtype == np.int32
    assert draft > 0 and 0 <= accepted <= draft
    assert draft % 4 == 0  # K=4 proposed per step
    assert value("acceptance_rate") == pytest.approx(accepted / draft, rel=1e-6)
    times = [
        value(n)
        for n in (
            "arrival_time_ns",
            "first_scheduled_time_ns",
            "first_token_time_ns",
            "last_token_time_ns",
        )
    ]
    assert times == sorted(times) and times[0] > 0
    # perf metrics ride on every response (running totals), as TensorRT-LLM's model
    totals = [value("total_draft_tokens", r.outputs) for r in data]
    # (the first response is the prefill's token: nothing drafted yet)
    assert totals == sorted(totals) and totals[0] == 0 and totals[-1] == draft
