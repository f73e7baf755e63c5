"""The PyTorch reference engine: baseline, draft-target, Medusa, n-gram and EAGLE-3 greedy decoding on CPU or GPU.

Lives here: methods (one module per speculative method: its decoder factory, found through the method), build (`trtbench build --backend reference`: model dirs checked, build.json), engine, its decoders (decoding; + tree_accept: Medusa acceptance of all rows at once, ngram: prompt lookup, eagle_decoding: EAGLE-3 chains, adaptive: draft length by batch size), batcher (+ kv_blocks: the paged KV block budget it obeys, handicap: a known slowdown, tracing: profiler ranges and a Kineto recorder) and runner (the model runner), loading (+ hf_load: strict checkpoint loading, llm_args: from an LLM-API model.yaml), medusa_heads (+ medusa_config: the keys vLLM needs), the EAGLE-3 draft (eagle3: vLLM's checkpoint layout).
May import: core, spec, builders.manifest, builders.medusa_tree, builders.checkpoint.
"""
