"""The tiny-model workshop: small real target, draft, Medusa heads and EAGLE-3 models trained on CPU for tests, examples and the GPU proof.

Lives here: tiny_models (the cached set; + tiny_recipe: every knob and the cache key, tiny_corpus: corpus and tokenizer, tiny_training: the training steps, tiny_eagle: the EAGLE-3 part's training, tiny_cache: lock and files, cpu_threads: torch thread counts on shared cores).
May import: core, builders.reference.
"""
