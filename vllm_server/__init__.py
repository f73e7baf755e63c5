"""vLLM as a second serving stack: a ``server: vllm`` variant as a ``vllm serve`` process.

Lives here: args (variant → vllm serve argv, --speculative-config), server (the managed vLLM process).
May import: core, spec.
"""
