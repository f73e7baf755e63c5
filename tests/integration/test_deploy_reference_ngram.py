"""An ngram variant with adaptive speculation, served by a real tritonserver, streams
exactly what the reference engine emits in this process (tokens and draft counts), and
prompt lookup drafts from a prompt that repeats itself."""

from __future__ import annotations

import os

import pytest

from tests.support.run_specs import deployed_reference_run
from tests.support.serving import stream_infer
from trtbench.builders.reference.loading import load_engine
from trtbench.pipeline.deploy import serve
from trtbench.spec.bench import VariantSpec
from trtbench.spec.llmapi import SpeculationSpec

pytestmark = pytest.mark.integration

PROMPT = "def greet(name):\n    return name\n\n\ndef greet(name):\n    return "
MAX_TOKENS = 20


def test_ngram_variant_streams_what_the_engine_emits(tiny_models, tmp_path):
    run_dir = deployed_reference_run(
        tmp_path / "run",
        "ngram-it",
        {"target": tiny_models["target"]},
        [
            VariantSpec(
                name="ngram",
                mode="ngram",
                max_draft_len=4,
                prompt_lookup_min=1,
                prompt_lookup_max=3,
                speculation=SpeculationSpec(max_concurrency=4),
            )
        ],
    )
    engine = load_engine(run_dir.engine_dir("ngram"), device="cpu")
    assert engine.mode == "ngram" and engine.decoder.settings.max_n == 3
    prompt_ids = engine.tokenizer.encode(PROMPT, add_special_tokens=True)
    steps = list(engine.generate(prompt_ids, MAX_TOKENS))
    engine.close()
    with serve(run_dir, "ngram") as server:
        pgid = server.process.pid
        streamed = stream_infer(
            server.grpc_url,
            "ensemble",
            {"text_input": PROMPT, "max_tokens": MAX_TOKENS, "stream": True},
        )
    with pytest.raises(ProcessLookupError):  # the server's whole group is gone
        os.killpg(pgid, 0)
    data = [r for r in streamed if r.ids]
    assert [(tuple(r.ids), *r.draft_counts) for r in data] == [
        (s.token_ids, s.draft_proposed, s.draft_accepted) for s in steps
    ]
    assert streamed[-1].final and not any(r.final for r in streamed[:-1])
    assert sum(s.draft_proposed for s in steps) > 0
