"""Multi-token prediction: the target's own MTP layers draft (DeepSeek-V3; TensorRT-LLM
``MTPDecodingConfig``, LLM API only). vLLM serving is not mapped; the reference engine has
none. Planner rate 0.85 (DeepSeek-V3 §5.4.3: the second token is accepted 85-90 % of the
time)."""

from __future__ import annotations

from typing import Any

from trtbench.core.methods.method import Method
from trtbench.core.stacks import TRTLLM_PYTORCH


def _check(v: Any) -> None:
    if v.max_draft_len is not None:
        raise ValueError(
            "max_draft_len is not for mode mtp: its draft length is num_nextn_predict_layers"
        )


METHOD = Method(
    name="mtp",
    order=40,
    draft_length="num_nextn_predict_layers",
    backends=(TRTLLM_PYTORCH,),
    llmapi_decoding_type="MTP",
    engine_mode=None,
    vllm_method=None,
    planner="chain",
    drafter="mtp_layers",
    label="MTP",
    fields=("num_nextn_predict_layers",),
    default_rates=(0.85,),
    check=_check,
)
