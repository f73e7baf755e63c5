"""trtbench draft-target BLS: speculative decoding over two ``tensorrt_llm`` models.

Per request (batch 1, no streaming — TensorRT-LLM's documented limits for draft-target
through BLS, triton-inference-server/tensorrtllm_backend ``docs/model_config.md``): tokenize
``text_input``, then repeat until ``max_tokens`` tokens, the end id, or a target call that
returns fewer tokens than asked:

1. the draft model generates ``k = min(num_draft_tokens, room - 1)`` tokens (non-streaming,
   ``min_tokens = k``);
2. the target model is called with those as ``draft_input_ids`` and
   ``request_output_len = k + 1``; it returns the accepted draft prefix plus one token of
   its own;
3. accepted = the length of the common prefix of the draft and the target's tokens.

One final response carries ``text_output``, ``output_ids`` (generated ids), and the totals
over all iterations: ``draft_tokens_proposed`` / ``draft_tokens_accepted`` and, with
``return_perf_metrics``, ``total_draft_tokens``, ``total_accepted_draft_tokens``,
``acceptance_rate`` (= accepted / proposed) and the timing outputs (ns since the epoch).
Unlike NVIDIA's BLS, the totals cover the whole request, not only the last iteration.

Config parameters: ``tokenizer_dir``, ``tensorrt_llm_model_name`` (target),
``tensorrt_llm_draft_model_name``, ``num_draft_tokens`` (default K; a request input of the
same name overrides it), ``add_special_tokens``.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils
from transformers import AutoTokenizer
from trtbench_model_utils import (
    as_bool,
    error_response,
    ids_tensor,
    model_parameters,
    perf_tensors,
    request_batch_size,
    scalar_input,
    scalar_tensor,
    special_ids,
    token_tensors,
)

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    """Draft-target speculative decoding orchestrated from Python (BLS)."""

    def initialize(self, args):
        params = model_parameters(json.loads(args["model_config"]))
        self.tokenizer = AutoTokenizer.from_pretrained(params["tokenizer_dir"])
        self.target = params["tensorrt_llm_model_name"]
        self.draft = params["tensorrt_llm_draft_model_name"]
        self.default_k = int(params.get("num_draft_tokens", "4"))
        self.add_special_tokens = as_bool(params.get("add_special_tokens", "true"))
        self.end_id, self.pad_id = special_ids(self.tokenizer)

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                sender.send(self._serve(request), flags=FINAL)
            except Exception as exc:  # noqa: BLE001 - every failure goes to the client
                sender.send(error_response(f"tensorrt_llm_bls: {exc}"), flags=FINAL)
        return None

    def _generate(
        self, model, ids, count, end_id, pad_id, draft_ids=None, min_tokens=0
    ):
        inputs = [
            ids_tensor("input_ids", ids),
            scalar_tensor("input_lengths", len(ids), np.int32),
            scalar_tensor("request_output_len", count, np.int32),
            scalar_tensor("end_id", end_id, np.int32),
            scalar_tensor("pad_id", pad_id, np.int32),
            scalar_tensor("streaming", False, np.bool_),
            scalar_tensor("exclude_input_in_output", True, np.bool_),
        ]
        if min_tokens:
            inputs.append(scalar_tensor("min_tokens", min_tokens, np.int32))
        if draft_ids:
            inputs.append(ids_tensor("draft_input_ids", draft_ids))
        response = pb_utils.InferenceRequest(
            model_name=model,
            requested_output_names=["output_ids", "sequence_length"],
            inputs=inputs,
        ).exec()
        if response.has_error():
            raise RuntimeError(f"{model}: {response.error().message()}")
        out = pb_utils.get_output_tensor_by_name(response, "output_ids").as_numpy()
        length = pb_utils.get_output_tensor_by_name(response, "sequence_length")
        valid = int(length.as_numpy().reshape(-1)[0])
        return [int(t) for t in out.reshape(-1)[:valid]]

    def _serve(self, request):
        arrival_ns = time.time_ns()
        if request_batch_size(request) != 1:
            raise ValueError(
                "request batch size must be 1; send one prompt per request"
            )
        if scalar_input(request, "stream", False):
            raise ValueError(
                "streaming is not supported with draft-target speculative decoding; "
                "send stream=false"
            )
        prompt = self.tokenizer.encode(
            scalar_input(request, "text_input", ""),
            add_special_tokens=self.add_special_tokens,
        )
        max_tokens = int(scalar_input(request, "max_tokens", 0))
        end_id = int(scalar_input(request, "end_id", self.end_id))
        pad_id = int(scalar_input(request, "pad_id", self.pad_id))
        k = int(scalar_input(request, "num_draft_tokens", self.default_k))
        out: list[int] = []
        proposed = accepted = 0
        first_token_ns = 0
        while len(out) < max_tokens:
            room = max_tokens - len(out)
            k_now = max(0, min(k, room - 1))
            ids = prompt + out
            draft = (
                self._generate(self.draft, ids, k_now, end_id, pad_id, min_tokens=k_now)
                if k_now
                else []
            )
            new = self._generate(
                self.target, ids, len(draft) + 1, end_id, pad_id, draft
            )
            first_token_ns = first_token_ns or time.time_ns()
            proposed += len(draft)
            accepted += len(os.path.commonprefix([draft, new]))
            if end_id in new:
                new = new[: new.index(end_id) + 1]
            out += new[:room]
            if not new or end_id in new or len(new) < len(draft) + 1:
                break
        text = self.tokenizer.decode(
            out, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        tensors = token_tensors(text, out, proposed, accepted)
        if scalar_input(request, "return_perf_metrics", False):
            tensors += perf_tensors(
                arrival_ns,
                arrival_ns,
                first_token_ns,
                time.time_ns(),
                proposed,
                accepted,
            )
        return pb_utils.InferenceResponse(output_tensors=tensors)
