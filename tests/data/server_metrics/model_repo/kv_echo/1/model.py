"""kv_echo: returns INPUT_IDS; publishes KV-cache block and request gauges per request.

Values after a request of n input ids (block pool fixed at MAX_BLOCKS blocks of
TOKENS_PER_BLOCK tokens):
  kv_cache_block_type: max=64, tokens_per=32, used=ceil(n/32), free=64-used,
                       fraction=used/64, reused=0
  request_type:        max=8, active=1, scheduled=1, context=1, waiting=0
"""

import math

import numpy as np
import triton_python_backend_utils as pb_utils

MAX_BLOCKS = 64
TOKENS_PER_BLOCK = 32


class TritonPythonModel:
    def initialize(self, args):
        labels = {"model": args["model_name"], "version": args["model_version"]}
        kv = pb_utils.MetricFamily(
            name="nv_trt_llm_kv_cache_block_metrics",
            description="TRT LLM KV cache block metrics",
            kind=pb_utils.MetricFamily.GAUGE,
        )
        req = pb_utils.MetricFamily(
            name="nv_trt_llm_request_metrics",
            description="TRT LLM request metrics",
            kind=pb_utils.MetricFamily.GAUGE,
        )
        self.families = (kv, req)
        self.kv = {
            t: kv.Metric(labels={**labels, "kv_cache_block_type": t})
            for t in ("max", "free", "used", "tokens_per", "reused", "fraction")
        }
        self.req = {
            t: req.Metric(labels={**labels, "request_type": t})
            for t in ("max", "active", "scheduled", "context", "waiting")
        }
        self._publish(0)

    def _publish(self, n_ids):
        used = math.ceil(n_ids / TOKENS_PER_BLOCK)
        values = {
            "max": MAX_BLOCKS,
            "free": MAX_BLOCKS - used,
            "used": used,
            "tokens_per": TOKENS_PER_BLOCK,
            "reused": 0,
            "fraction": used / MAX_BLOCKS,
        }
        for name, value in values.items():
            self.kv[name].set(value)
        active = 1 if n_ids else 0
        for name, value in {
            "max": 8,
            "active": active,
            "scheduled": active,
            "context": active,
            "waiting": 0,
        }.items():
            self.req[name].set(value)

    def execute(self, requests):
        responses = []
        for request in requests:
            ids = pb_utils.get_input_tensor_by_name(request, "INPUT_IDS").as_numpy()
            self._publish(int(ids.size))
            out = pb_utils.Tensor("OUTPUT_IDS", ids.astype(np.int32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
