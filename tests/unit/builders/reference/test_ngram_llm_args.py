"""The reference runtime of Triton's llmapi model serves TensorRT-LLM's NGram config: the
engine it builds from the LLM arguments (on the tiny models) is the ngram mode with
max_matching_ngram_size as its window and max_concurrency as its cut-off, and emits
baseline's tokens."""

from __future__ import annotations

import pytest

from trtbench.builders.reference.llm_args import engine_from_llm_args

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PROMPT = "def add(a, b):\n    return a + b\n\n\ndef add(a, b):\n    return"


def test_ngram_llm_args_make_a_lossless_ngram_engine(tiny_models):
    common = {
        "model": str(tiny_models["target"]),
        "max_batch_size": 2,
        "max_seq_len": 160,
        "cuda_graph_config": None,
    }
    ngram = engine_from_llm_args(
        {
            **common,
            "speculative_config": {
                "decoding_type": "NGram",
                "max_draft_len": 3,
                "max_matching_ngram_size": 4,
                "max_concurrency": 1,
            },
        },
        device="cpu",
    )
    base = engine_from_llm_args(common, device="cpu")
    try:
        assert ngram.mode == "ngram" and ngram.draft_len == 3
        assert (ngram.decoder.settings.min_n, ngram.decoder.settings.max_n) == (1, 4)
        ids = ngram.tokenizer.encode(PROMPT)
        steps = list(ngram.generate(ids, 24, end_id=-1))
        want = base.generate_ids(ids, 24, end_id=-1)
        assert [t for s in steps for t in s.token_ids] == want
        assert sum(s.draft_proposed for s in steps) > 0
        # two requests at once: above max_concurrency 1, nothing is drafted
        ngram.close()  # the loop thread of generate(); the next loop runs here
        a = ngram.submit(ids, 6, end_id=-1, start=False)
        b = ngram.submit(ids[:-3], 6, end_id=-1, start=False)
        ngram.batcher.run_until_idle()
        assert [s.draft_proposed for s in list(a) + list(b)] == [0] * 12
    finally:
        ngram.close()
        base.close()
