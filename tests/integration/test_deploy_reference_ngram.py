"""An ngram variant with adaptive speculation, served by a real tritonserver, streams
exactly what the reference engine emits in this process (tokens and draft counts), and
prompt lookup drafts from a prompt that repeats itself."""

from __future__ import annotations

import os
import queue

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from trtbench.builders.build import build_variants
from trtbench.builders.reference.loading import load_engine
from trtbench.pipeline.deploy import deploy_run, serve
from trtbench.run_dir import RunDir
from trtbench.spec import BenchSpec, DeploySpec, ModelsSpec, VariantSpec
from trtbench.spec_llmapi import SpeculationSpec

pytestmark = pytest.mark.integration

PROMPT = "def greet(name):\n    return name\n\n\ndef greet(name):\n    return "
MAX_TOKENS = 20


def stream(url: str) -> list[tuple[list[int], int, int, bool]]:
    """One streamed request over ModelStreamInfer: (ids, proposed, accepted, final) per
    response until the final flag (the tensors of ``triton_repo.interface``)."""
    inputs = []
    for name, value, dtype in (
        ("text_input", np.array([[PROMPT.encode()]], dtype=object), "BYTES"),
        ("max_tokens", np.array([[MAX_TOKENS]], dtype=np.int32), "INT32"),
        ("stream", np.array([[True]]), "BOOL"),
    ):
        tensor = grpcclient.InferInput(name, list(value.shape), dtype)
        tensor.set_data_from_numpy(value)
        inputs.append(tensor)
    client = grpcclient.InferenceServerClient(url)
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    client.async_stream_infer("ensemble", inputs, enable_empty_final_response=True)
    out: list[tuple[list[int], int, int, bool]] = []
    try:
        while not (out and out[-1][3]):
            result, error = results.get(timeout=60)
            assert error is None, error
            response = result.get_response()
            final = response.parameters["triton_final_response"].bool_param
            ids = result.as_numpy("output_ids")
            if ids is None:  # the empty final response
                out.append(([], 0, 0, final))
                continue
            counts = [
                int(result.as_numpy(n).reshape(-1)[0])
                for n in ("draft_tokens_proposed", "draft_tokens_accepted")
            ]
            out.append((ids.reshape(-1).tolist(), *counts, final))
    finally:
        client.stop_stream()
        client.close()
    return out


def test_ngram_variant_streams_what_the_engine_emits(tiny_models, tmp_path):
    spec = BenchSpec(
        name="ngram-it",
        backend="reference",
        models=ModelsSpec(target=tiny_models["target"]),
        variants=[
            VariantSpec(
                name="ngram",
                mode="ngram",
                max_draft_len=4,
                prompt_lookup_min=1,
                prompt_lookup_max=3,
                speculation=SpeculationSpec(max_concurrency=4),
            )
        ],
        deploy=DeploySpec(ready_timeout_s=120, reference_device="cpu"),
    )
    run_dir = RunDir(tmp_path / "run")
    build_variants(spec, (), None, run_dir)
    deploy_run(run_dir, (), spec.deploy)
    engine = load_engine(run_dir.engine_dir("ngram"), device="cpu")
    assert engine.mode == "ngram" and engine.decoder.settings.max_n == 3
    prompt_ids = engine.tokenizer.encode(PROMPT, add_special_tokens=True)
    steps = list(engine.generate(prompt_ids, MAX_TOKENS))
    engine.close()
    with serve(run_dir, "ngram") as server:
        pgid = server.process.pid
        streamed = stream(server.grpc_url)
    with pytest.raises(ProcessLookupError):  # the server's whole group is gone
        os.killpg(pgid, 0)
    data = [r for r in streamed if r[0]]
    assert [(tuple(ids), p, a) for ids, p, a, _ in data] == [
        (s.token_ids, s.draft_proposed, s.draft_accepted) for s in steps
    ]
    assert streamed[-1][3] and not any(r[3] for r in streamed[:-1])
    assert sum(s.draft_proposed for s in steps) > 0
