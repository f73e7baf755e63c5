"""trtbench: draft-target speculative decoding vs Medusa on TensorRT-LLM / Triton, measured side by side.

Subsystems live in top-level folders installed under this namespace:
``trtbench.builders`` (engines), ``trtbench.triton_repo`` (model repositories and the server),
``trtbench.profiling`` (load generation, metrics, traces, memory, report).
"""

__version__ = "0.1.0"
