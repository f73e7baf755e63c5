"""trtbench preprocessing: tokenize ``text_input`` for the ``tensorrt_llm`` model.

Inputs (per row of the request batch): ``text_input`` BYTES, ``max_tokens`` INT32 and the
optional ``end_id`` / ``pad_id`` INT32. Outputs: ``input_ids`` INT32 ``[B, L]`` (rows padded
with the pad id; ``input_lengths`` gives each row's length), ``input_lengths``,
``request_output_len``, ``resolved_end_id`` and ``resolved_pad_id`` INT32 ``[B, 1]`` (the
request's ids, else the tokenizer's eos / pad token).

Config parameters: ``tokenizer_dir`` (Hugging Face tokenizer), ``add_special_tokens``.
"""

from __future__ import annotations

import json

import numpy as np
import triton_python_backend_utils as pb_utils
from transformers import AutoTokenizer
from trtbench_model_utils import as_bool, model_parameters, respond_each, special_ids


def _column(request, name: str, rows: int, default: int) -> np.ndarray:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return np.full((rows, 1), default, dtype=np.int32)
    return tensor.as_numpy().reshape(rows, 1).astype(np.int32)


class TritonPythonModel:
    """Tokenizer in front of the TensorRT-LLM model."""

    def initialize(self, args):
        params = model_parameters(json.loads(args["model_config"]))
        self.tokenizer = AutoTokenizer.from_pretrained(params["tokenizer_dir"])
        self.add_special_tokens = as_bool(params.get("add_special_tokens", "true"))
        self.end_id, self.pad_id = special_ids(self.tokenizer)

    def execute(self, requests):
        return respond_each(requests, self._tokenize, "preprocessing")

    def _tokenize(self, request):
        texts = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()
        texts = texts.reshape(-1)
        rows = len(texts)
        max_tokens = pb_utils.get_input_tensor_by_name(request, "max_tokens").as_numpy()
        end_ids = _column(request, "end_id", rows, self.end_id)
        pad_ids = _column(request, "pad_id", rows, self.pad_id)
        encoded = [
            self.tokenizer.encode(
                t.decode("utf-8") if isinstance(t, bytes) else str(t),
                add_special_tokens=self.add_special_tokens,
            )
            for t in texts
        ]
        width = max(1, max(len(ids) for ids in encoded))
        input_ids = np.empty((rows, width), dtype=np.int32)
        for row, ids in enumerate(encoded):
            input_ids[row, :] = pad_ids[row, 0]
            input_ids[row, : len(ids)] = ids
        lengths = np.array([[len(ids)] for ids in encoded], dtype=np.int32)
        return pb_utils.InferenceResponse(
            output_tensors=[
                pb_utils.Tensor("input_ids", input_ids),
                pb_utils.Tensor("input_lengths", lengths),
                pb_utils.Tensor(
                    "request_output_len", max_tokens.reshape(rows, 1).astype(np.int32)
                ),
                pb_utils.Tensor("resolved_end_id", end_ids),
                pb_utils.Tensor("resolved_pad_id", pad_ids),
            ]
        )
