"""Load-test metrics on hand-built streams: every expected value is worked out in the comments.

Streams are real ``ModelInferResponse`` protobufs (as the gRPC client receives them) turned
into records by ``exchange_to_records``, then into metrics — the whole path after the wire.
"""

from __future__ import annotations

import struct

import numpy as np
import pandas as pd
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from tritonclient.grpc import service_pb2

from trtbench.core.export import records_to_frame
from trtbench.profiling.loadtest.clients.grpc_client import Exchange
from trtbench.profiling.loadtest.files.responses import RequestSlot, exchange_to_records
from trtbench.profiling.loadtest.stats.metrics import (
    describe,
    good_requests,
    osl_mismatch,
    osl_warnings,
    request_metrics,
    response_gaps,
    strip_prompt_echo,
    summarize,
)
from trtbench.profiling.loadtest.workload.prompts import Prompt, TextTokenizer
from trtbench.profiling.loadtest.workload.schedule import Tier

MS = 1_000_000


def response(
    ids: list[int] | None = None, text: str | None = None, final: bool = False
) -> service_pb2.ModelInferResponse:
    """A response as Triton sends it: output_ids INT32 and/or text_output BYTES."""
    msg = service_pb2.ModelInferResponse(model_name="m", id="r")
    if ids is not None:
        msg.outputs.add(name="output_ids", datatype="INT32", shape=[1, len(ids)])
        msg.raw_output_contents.append(np.asarray(ids, dtype="<i4").tobytes())
    if text is not None:
        raw = text.encode()
        msg.outputs.add(name="text_output", datatype="BYTES", shape=[1])
        msg.raw_output_contents.append(struct.pack("<I", len(raw)) + raw)
    msg.parameters["triton_final_response"].bool_param = final
    return msg


def records(
    stream: list[tuple[float, service_pb2.ModelInferResponse]],
    prompt: Prompt | None = None,
    request_id_index: int = 0,
    sent_ms: float = 0.0,
    tokenizer: TextTokenizer | None = None,
    variant: str = "v",
    requested: int = 16,
    echo_possible: bool = False,
):
    """Records of one request sent at ``sent_ms`` whose responses arrive at the given ms."""
    prompt = prompt or Prompt("t", "hello", 1, requested, "words")
    base = 10_000 * MS  # an arbitrary perf_counter origin
    sent = base + int(sent_ms * MS)
    exchange = Exchange(
        sent_ns=sent,
        end_ns=base + int(stream[-1][0] * MS),
        responses=[(base + int(t * MS), r) for t, r in stream],
    )
    slot = RequestSlot(variant, Tier(concurrency=1), request_id_index, sent)
    return exchange_to_records(exchange, prompt, slot, tokenizer, echo_possible)


def frames(*recs) -> tuple[pd.DataFrame, pd.DataFrame]:
    req = records_to_frame([r for r, _ in recs])
    resp = records_to_frame([x for _, rs in recs for x in rs])
    return req, resp


# 1 token at 50 ms, then five responses of 3 tokens every 9 ms (59, 68, 77, 86, 95 ms),
# then an empty final response at 97 ms. OSL = 1 + 5·3 = 16.
SPEC_STREAM = [(50.0, response([1]))]
SPEC_STREAM += [(50.0 + 9 * k, response([2, 3, 4])) for k in range(1, 6)]
SPEC_STREAM += [(97.0, response(final=True))]


def test_multi_token_responses_hand_computed():
    req, resp = frames(records(SPEC_STREAM))
    m = request_metrics(req).iloc[0]
    assert m["time_to_first_token_ms"] == pytest.approx(50.0)
    # E2E ends at the last token (95 ms), not at the empty final response (97 ms).
    assert m["request_latency_ms"] == pytest.approx(95.0)
    # TPOT = (95 − 50) / (16 − 1) = 3 ms.
    assert m["time_per_output_token_ms"] == pytest.approx(3.0)
    # Tokens per response after the first: (16 − 1) / (6 − 1) = 3.
    assert m["tokens_per_response_tokens"] == pytest.approx(3.0)
    assert m["output_sequence_length_tokens"] == 16
    assert m["output_token_throughput_per_user_tokens_per_s"] == pytest.approx(1000 / 3)
    s = summarize(req, resp).iloc[0]
    # ITL: 5 gaps of 9 ms before 3-token responses → 15 samples of 3 ms.
    assert s["inter_token_latency_mean_ms"] == pytest.approx(3.0)
    assert s["inter_token_latency_max_ms"] == pytest.approx(3.0)
    assert s["inter_token_latency_count"] == 15
    # ICL: 5 samples of 9 ms.
    assert s["inter_chunk_latency_p50_ms"] == pytest.approx(9.0)
    assert s["inter_chunk_latency_count"] == 5
    assert s["tokens_per_response_mean_tokens"] == pytest.approx(3.0)


def test_tokens_received_all_at_once_give_no_rate_not_inf():
    """A client that reads every token line in one go stamps them alike: TPOT is 0 ms as
    observed, and the per-user rate 1/TPOT is missing, never inf (nor a NaN statistic)."""
    stream = [
        (40.0, response([1])),
        (40.0, response([2, 3])),
        (40.0, response([4])),
        (41.0, response(final=True)),
    ]
    req, resp = frames(records(stream))
    m = request_metrics(req).iloc[0]
    assert m["time_per_output_token_ms"] == 0.0
    assert np.isnan(m["output_token_throughput_per_user_tokens_per_s"])
    s = summarize(req, resp).iloc[0]
    rates = [c for c in s.index if c.startswith("output_token_throughput_per_user")]
    assert rates and not any(np.isinf(float(s[c])) for c in rates if c.endswith("_s"))


def test_itl_never_includes_ttft():
    # TTFT 500 ms, then 1-token responses at 510 and 530 ms.
    stream = [(500.0, response([1])), (510.0, response([2])), (530.0, response([3]))]
    req, resp = frames(records(stream))
    gaps = response_gaps(resp, req)
    # Only the two decode gaps (10 and 20 ms); their sum is E2E − TTFT = 30 ms.
    assert sorted(gaps["gap_ms"]) == pytest.approx([10.0, 20.0])
    assert summarize(req, resp).iloc[0]["inter_token_latency_max_ms"] == pytest.approx(
        20.0
    )


def test_empty_responses_are_not_tokens_and_do_not_extend_e2e():
    # 2 tokens at 10 ms, an empty response at 20 ms, 2 tokens at 30 ms, empty final at 45.
    stream = [
        (10.0, response([5, 6])),
        (20.0, response([])),
        (30.0, response([7, 8])),
        (45.0, response(final=True)),
    ]
    req_rec, resp_recs = records(stream)
    assert (req_rec.output_tokens, req_rec.token_responses) == (4, 2)
    assert req_rec.empty_responses == 2
    req, resp = frames((req_rec, resp_recs))
    m = request_metrics(req).iloc[0]
    assert m["time_to_first_token_ms"] == pytest.approx(10.0)
    assert m["request_latency_ms"] == pytest.approx(30.0)  # not 45
    # One ICL gap from 10 to 30 ms (the empty response is skipped): 20 ms;
    # it precedes 2 tokens → ITL samples 10, 10. TPOT = (30 − 10) / (4 − 2) = 10.
    gaps = response_gaps(resp, req)
    assert gaps["gap_ms"].tolist() == pytest.approx([20.0])
    assert m["time_per_output_token_ms"] == pytest.approx(10.0)
    s = summarize(req, resp).iloc[0]
    assert s["inter_token_latency_count"] == 2
    assert s["inter_token_latency_mean_ms"] == pytest.approx(10.0)


def test_prompt_echo_is_not_output():
    # The prompt [11, 12, 13] comes back first, then 2 generated tokens.
    prompt = Prompt("t", "a b c", 3, 2, "tokenizer", (11, 12, 13))
    stream = [(20.0, response([11, 12, 13, 40])), (30.0, response([41], final=True))]
    rec, resp = records(stream, prompt=prompt, echo_possible=True)
    assert rec.output_tokens == 2
    assert rec.echoed_tokens == 3
    assert rec.first_response_tokens == 1
    assert [r.tokens for r in resp] == [1, 1]
    assert strip_prompt_echo("Hello world, more", "Hello world") == len("Hello world")
    assert strip_prompt_echo("Goodbye", "Hello") == 0


def word_tokenizer(words: list[str]) -> TextTokenizer:
    tok = Tokenizer(
        models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="?")
    )
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return TextTokenizer(tok, "words")


def test_text_only_is_retokenized_and_marked():
    tok = word_tokenizer(["?", "hello", "world", "foo", "bar", "p"])
    # Chunks "hello wor" | "ld foo" | " bar": "world" is completed by the second chunk.
    stream = [
        (10.0, response(text="hello wor")),
        (20.0, response(text="ld foo")),
        (30.0, response(text=" bar", final=True)),
    ]
    rec, resp = records(stream, tokenizer=tok)
    assert [r.tokens for r in resp] == [1, 2, 1]
    assert rec.output_tokens == 4
    assert rec.output_token_source == "retokenized"
    # A model that cannot be asked to exclude the prompt echoes "p "; stripped first.
    prompt = Prompt("t", "p ", 1, 4, "tokenizer", (5,))
    echo = [(10.0, response(text="p hello")), (20.0, response(text=" foo"))]
    rec2, resp2 = records(echo, prompt=prompt, tokenizer=tok, echo_possible=True)
    assert [r.tokens for r in resp2] == [1, 1]
    assert rec2.echoed_tokens == 1


def test_output_ids_source_and_failed_request_rows():
    rec, _ = records(SPEC_STREAM)
    assert rec.output_token_source == "output_ids"
    empty, _ = records([(5.0, response(final=True))])
    assert empty.error == "no output tokens in 1 responses"
    req, resp = frames(records(SPEC_STREAM), (empty, []))
    s = summarize(req, resp).iloc[0]
    assert (s["request_count"], s["error_count"]) == (2, 1)
    assert s["time_to_first_token_count"] == 1


def test_describe_linear_percentiles_and_population_std():
    d = describe(np.array([1.0, 2.0, 3.0, 4.0, np.nan]))
    # mean 2.5; std ddof 0 = sqrt(((1.5²+0.5²)·2)/4) = sqrt(1.25); linear p90 = 1 + 0.9·3.
    assert d["mean"] == pytest.approx(2.5)
    assert d["std"] == pytest.approx(1.25**0.5)
    assert d["p50"] == pytest.approx(2.5)
    assert d["p90"] == pytest.approx(3.7)
    assert d["p99"] == pytest.approx(3.97)
    assert (d["min"], d["max"], d["n"]) == (1.0, 4.0, 4)
    assert describe([])["n"] == 0


@pytest.mark.parametrize(
    ("requested", "got", "warn"),
    [
        (100, 94, True),  # |6| > min(5, 50) = 5
        (100, 96, False),  # |4| ≤ 5
        (2000, 1940, True),  # |60| > min(100, 50) = 50
        (2000, 1960, False),  # |40| ≤ 50
    ],
)
def test_osl_mismatch_threshold(requested, got, warn):
    stream = [(10.0, response(list(range(got))))]
    req, _ = frames(records(stream, requested=requested))
    assert bool(osl_mismatch(req).iloc[0]) is warn
    assert len(osl_warnings(req)) == int(warn)


def test_throughput_goodput_and_speedup():
    # Per variant, two requests of 16 tokens; "fast" has TPOT 3 ms, "slow" TPOT 6 ms.
    fast = [records(SPEC_STREAM, request_id_index=i, variant="fast") for i in (0, 1)]
    slow_stream = [(50.0, response([1]))]
    slow_stream += [(50.0 + 18 * k, response([2, 3, 4])) for k in range(1, 6)]
    slow = [records(slow_stream, request_id_index=i, variant="slow") for i in (0, 1)]
    req, resp = frames(*fast, *slow)
    s = summarize(req, resp, slos={"tpot_ms": 4.0}, baseline="slow")
    s = s.set_index("variant")
    # fast: duration = 97 ms (end of the empty final) → 32 tokens / 0.097 s.
    assert s.loc["fast", "output_token_throughput_tokens_per_s"] == pytest.approx(
        32 / 0.097
    )
    assert s.loc["fast", "request_throughput_per_s"] == pytest.approx(2 / 0.097)
    # slow: last token at 50 + 90 = 140 ms; TPOT = 90 / 15 = 6 ms > 4 ms SLO.
    assert s.loc["slow", "request_goodput_per_s"] == 0.0
    assert s.loc["fast", "good_request_fraction_ratio"] == 1.0
    assert s.loc["fast", "tpot_speedup_ratio"] == pytest.approx(6.0 / 3.0)
    assert s.loc["fast", "output_token_throughput_speedup_ratio"] == pytest.approx(
        (32 / 0.097) / (32 / 0.140)
    )
    assert s.loc["slow", "tpot_speedup_ratio"] == pytest.approx(1.0)


def test_acceptance_from_server_counts():
    # 10 tokens in 2 responses, each a verify step (4 and 8 drafts proposed, 3 and 3
    # accepted): acceptance length 1 + 6 / 2 = 4.0, draft acceptance rate 6 / 12 = 0.5.
    msg_a = response([1, 2, 3, 4])
    msg_b = response([5, 6, 7, 8, 9, 10], final=True)
    for msg, drafted, accepted in ((msg_a, 4, 3), (msg_b, 8, 3)):
        for name, value in (
            ("draft_tokens_proposed", drafted),
            ("draft_tokens_accepted", accepted),
        ):
            msg.outputs.add(name=name, datatype="INT32", shape=[1, 1])
            msg.raw_output_contents.append(np.asarray([value], "<i4").tobytes())
    # The final response also carries running totals (as trtbench's reference model does
    # with return_perf_metrics); they must not be counted again.
    for name, value in (("total_draft_tokens", 12), ("total_accepted_draft_tokens", 6)):
        msg_b.outputs.add(name=name, datatype="INT32", shape=[1, 1])
        msg_b.raw_output_contents.append(np.asarray([value], "<i4").tobytes())
    rec, resp = records([(10.0, msg_a), (20.0, msg_b)])
    assert (rec.draft_tokens, rec.accepted_draft_tokens) == (12, 6)
    m = request_metrics(records_to_frame([rec]), records_to_frame(resp)).iloc[0]
    assert m["acceptance_length_per_request_tokens"] == pytest.approx(4.0)
    assert m["draft_acceptance_rate_per_request_ratio"] == pytest.approx(0.5)


def test_unknown_slo_is_rejected():
    req, _ = frames(records(SPEC_STREAM))
    with pytest.raises(ValueError, match="ttft_ms"):
        good_requests(request_metrics(req), {"latency": 1.0})


def test_acceptance_from_running_totals_on_the_final_response():
    # TensorRT-LLM style: totals only on the final response (12 proposed, 6 accepted).
    final = response([5, 6, 7, 8, 9, 10], final=True)
    for name, value in (("total_draft_tokens", 12), ("total_accepted_draft_tokens", 6)):
        final.outputs.add(name=name, datatype="INT32", shape=[1, 1])
        final.raw_output_contents.append(np.asarray([value], "<i4").tobytes())
    rec, resp = records([(10.0, response([1, 2, 3, 4])), (20.0, final)])
    assert (rec.draft_tokens, rec.accepted_draft_tokens) == (12, 6)
    assert [r.draft_tokens for r in resp] == [None, 12]
