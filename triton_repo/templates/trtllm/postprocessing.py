"""trtbench postprocessing: detokenize the ``tensorrt_llm`` model's ``output_ids``.

Inputs: ``output_ids`` INT32 ``[B, beams, L]`` and ``sequence_length`` INT32 ``[B, beams]``
(the valid length of each beam). Outputs, for beam 0 of each row: ``text_output`` BYTES
``[B, 1]`` and ``token_ids`` INT32 ``[B, L']`` (the valid ids; rows padded with -1 when the
request batch has rows of different lengths). A streamed chunk is detokenized on its own, so
a character split across two chunks comes out as U+FFFD in both (count tokens from
``token_ids``, never from the text).

Config parameters: ``tokenizer_dir``, ``skip_special_tokens``.
"""

from __future__ import annotations

import json

import numpy as np
import triton_python_backend_utils as pb_utils
from transformers import AutoTokenizer
from trtbench_model_utils import as_bool, model_parameters, respond_each


class TritonPythonModel:
    """Detokenizer behind the TensorRT-LLM model."""

    def initialize(self, args):
        params = model_parameters(json.loads(args["model_config"]))
        self.tokenizer = AutoTokenizer.from_pretrained(params["tokenizer_dir"])
        self.skip_special = as_bool(params.get("skip_special_tokens", "true"))

    def execute(self, requests):
        return respond_each(requests, self._detokenize, "postprocessing")

    def _detokenize(self, request):
        ids = pb_utils.get_input_tensor_by_name(request, "output_ids").as_numpy()
        lengths = pb_utils.get_input_tensor_by_name(request, "sequence_length")
        lengths = lengths.as_numpy()
        rows = [ids[b, 0, : int(lengths[b, 0])].tolist() for b in range(ids.shape[0])]
        texts = [
            self.tokenizer.decode(
                row,
                skip_special_tokens=self.skip_special,
                clean_up_tokenization_spaces=False,
            ).encode("utf-8")
            for row in rows
        ]
        width = max((len(r) for r in rows), default=0)
        token_ids = np.full((len(rows), width), -1, dtype=np.int32)
        for b, row in enumerate(rows):
            token_ids[b, : len(row)] = row
        return pb_utils.InferenceResponse(
            output_tensors=[
                pb_utils.Tensor(
                    "text_output", np.array(texts, dtype=np.object_).reshape(-1, 1)
                ),
                pb_utils.Tensor("token_ids", token_ids),
            ]
        )
