"""The PyTorch reference engine: baseline, draft-target, Medusa, n-gram and EAGLE-3 greedy decoding on CPU or GPU.

Lives here: the engine, its decoders (+ ngram: prompt lookup, eagle_decoding: EAGLE-3 chains, adaptive: draft length by batch size), batcher (+ kv_blocks: the paged KV block budget it obeys, handicap: a known slowdown) and model runner, loading (+ hf_load: strict checkpoint loading, llm_args: from an LLM-API model.yaml), Medusa heads (+ medusa_config: the keys vLLM needs), the EAGLE-3 draft (eagle3: vLLM's checkpoint layout), the tiny models (+ tiny_eagle: the EAGLE-3 part's training, tiny_cache: lock and files).
May import: core, spec, builders.manifest, builders.medusa_tree, builders.checkpoint.
"""
