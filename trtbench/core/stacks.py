"""The serving stacks and build backends trtbench runs, each named once.

A variant's ``server`` is one of :data:`SERVERS` and its ``backend`` one of :data:`BACKENDS`
(the spec's ``Server`` and ``Backend`` literals hold the same names). Modules name them by
these constants, never by a string of their own (``tests/unit/core/test_methods.py`` reads
every module's syntax tree for a comparison with a literal), so a typo is an import error.
"""

from __future__ import annotations

TRITON, VLLM, TRTLLM_SERVE = "triton", "vllm", "trtllm-serve"
"""Servers: trtbench's Triton model repository in tritonserver, ``vllm serve``, and
TensorRT-LLM's own OpenAI server."""
SERVERS = (TRITON, VLLM, TRTLLM_SERVE)

REFERENCE, TRTLLM, TRTLLM_PYTORCH = "reference", "trtllm", "trtllm-pytorch"
"""Build backends: trtbench's PyTorch engine, TensorRT engines (``trtllm-build``), and
TensorRT-LLM's LLM API (its PyTorch backend)."""
BACKENDS = (REFERENCE, TRTLLM, TRTLLM_PYTORCH)
