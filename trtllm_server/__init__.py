"""TensorRT-LLM's own OpenAI server: a ``server: trtllm-serve`` variant as a ``trtllm-serve`` process.

Lives here: server (the managed trtllm-serve process: command line, readiness, its log's last error).
May import: core, spec, builders.trtllm.llmapi_plan (the trtllm-serve command line).
"""
