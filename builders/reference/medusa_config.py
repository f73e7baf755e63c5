"""The keys a Medusa heads' config.json carries so that vLLM loads the heads too.

vLLM 0.32 (``vllm/transformers_utils/configs/medusa.py``, ``model_executor/models/medusa.py``)
recognises a heads directory by ``model_type: medusa`` and builds each head's residual
``Linear`` with a bias only when ``medusa_fc_bias`` is true; without it the FasterDecoding
biases (``{h}.{l}.linear.bias``) are silently dropped and the drafts change. The FasterDecoding
keys (``medusa_num_heads``, ``medusa_num_layers``) stay: trtbench's loader and TensorRT-LLM's
``examples/medusa/convert_checkpoint.py`` read those and ignore the rest. No torch import here
(the tiny-model cache check stays cheap).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from trtbench.core.run_dir import write_json_atomic

logger = logging.getLogger(__name__)

# FasterDecoding's ResBlock is Linear(H, H, bias=True), so the bias flag is always true here.
VLLM_KEYS = {"model_type": "medusa", "medusa_fc_bias": True}


def add_vllm_keys(paths: dict[str, Path]) -> dict[str, Path]:
    """Add :data:`VLLM_KEYS` to ``paths["medusa"]/config.json`` where missing; return ``paths``.

    For heads saved before the keys existed (a cached tiny-model build): the file is rewritten
    atomically, other keys kept. A missing, unreadable or read-only file is left as it is
    (logged); never raises.
    """
    config_path = Path(paths["medusa"]) / "config.json"
    try:
        config = json.loads(config_path.read_text())
        if not isinstance(config, dict) or VLLM_KEYS.items() <= config.items():
            return paths
        write_json_atomic(config_path, {**config, **VLLM_KEYS})
    except (OSError, ValueError) as exc:
        logger.warning("could not add vLLM's keys to %s: %s", config_path, exc)
    return paths
