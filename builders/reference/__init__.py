"""The PyTorch reference engine: baseline, draft-target, Medusa and n-gram greedy decoding on CPU or GPU.

Lives here: the engine, its decoders (+ ngram: prompt lookup, adaptive: draft length by batch size), batcher (+ kv_blocks: the paged KV block budget it obeys) and model runner, loading (+ llm_args: from an LLM-API model.yaml), Medusa heads (+ medusa_config: the keys vLLM needs), the tiny models.
May import: core, builders.manifest, builders.medusa_tree.
"""
