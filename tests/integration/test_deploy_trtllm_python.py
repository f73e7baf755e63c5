"""Our own Python models of the TensorRT-LLM repository, served for real on a CPU machine.

The TensorRT-LLM backend itself needs a GPU and the NGC image, but the models trtbench writes
around it — preprocessing (tokenize), postprocessing (detokenize) and the draft-target BLS —
are plain Python-backend models. They are loaded here from a rendered ``trtllm`` repository
(``--model-control-mode=explicit``, everything except the TensorRT-LLM models) with the tiny
models' tokenizer, and checked against the tokenizer used directly.
"""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from transformers import AutoTokenizer
from tritonclient.utils import InferenceServerException

from tests.support.serving import infer_inputs, stream_infer
from trtbench.builders.manifest import BuildManifest, write_manifest
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.deploy import deploy_variant
from trtbench.spec.bench import DeploySpec
from trtbench.triton_repo.server import ServerConfig, TritonServer
from trtbench.triton_repo.validate import validate_repository

pytestmark = pytest.mark.integration

PROMPT = "def f(x):\n    return 'naïve → ok'"
LOADED = ("preprocessing", "postprocessing", "tensorrt_llm_bls")


@pytest.fixture(scope="module")
def tokenizer_dir(tiny_models):
    return tiny_models["target"]


@pytest.fixture(scope="module")
def server(tokenizer_dir, tmp_path_factory):
    rd = RunDir(tmp_path_factory.mktemp("trtllm") / "run")
    manifest = BuildManifest(
        backend="trtllm",
        mode="draft_target",
        variant={"name": "dt", "mode": "draft_target", "max_batch_size": 1},
        max_draft_len=3,
        models={},
        tokenizer_dir=str(tokenizer_dir),
        engines={"target": "target", "draft": "draft"},
        cuda_graphs={"requested": False, "available": False},
    )
    rd.engine_dir("dt").mkdir(parents=True)
    write_manifest(rd.engine_dir("dt"), manifest)
    repo = deploy_variant(rd, "dt", DeploySpec())
    assert validate_repository(repo) == []
    loads = tuple(f"--load-model={m}" for m in LOADED)
    config = ServerConfig(
        model_repo=repo,
        log_path=rd.server_log("dt"),
        models=LOADED,
        ready_timeout_s=120,
        extra_args=("--model-control-mode=explicit", *loads),
    )
    with TritonServer(config) as srv:
        yield srv


def test_preprocessing_tokenizes_like_the_tokenizer(server, tokenizer_dir):
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    inputs = infer_inputs({"text_input": PROMPT, "max_tokens": 7, "end_id": 5})
    result = client.infer("preprocessing", inputs)
    expected = tok.encode(PROMPT, add_special_tokens=True)
    assert result.as_numpy("input_ids").tolist() == [expected]
    assert result.as_numpy("input_lengths").tolist() == [[len(expected)]]
    assert result.as_numpy("request_output_len").tolist() == [[7]]
    assert result.as_numpy("resolved_end_id").tolist() == [[5]]  # the request's
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    assert result.as_numpy("resolved_pad_id").tolist() == [[pad]]  # the tokenizer's


def test_postprocessing_detokenizes_the_valid_ids(server, tokenizer_dir):
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids = tok.encode(PROMPT, add_special_tokens=False)
    padded = np.array([[ids + [0, 0]]], dtype=np.int32)  # [batch, beam, len]
    client = grpcclient.InferenceServerClient(server.grpc_url)
    result = client.infer(
        "postprocessing",
        infer_inputs({"output_ids": padded, "sequence_length": len(ids)}),
    )
    assert result.as_numpy("token_ids").tolist() == [ids]
    text = result.as_numpy("text_output").reshape(-1)[0].decode()
    assert text == tok.decode(ids, skip_special_tokens=True)


def bls_error(url: str, stream: bool) -> str:
    """Send one request to the BLS over a stream; return the error it answers with."""
    values = {"text_input": b"hello", "max_tokens": 4, "stream": stream}
    with pytest.raises(InferenceServerException) as refused:
        stream_infer(url, "tensorrt_llm_bls", values)
    return str(refused.value)


def test_bls_refuses_streaming_and_reports_a_missing_model(server):
    assert "streaming is not supported with draft-target" in bls_error(
        server.grpc_url, stream=True
    )
    # the TensorRT-LLM models are not loaded here: the error comes back, no hang
    assert "tensorrt_llm_draft" in bls_error(server.grpc_url, stream=False)
