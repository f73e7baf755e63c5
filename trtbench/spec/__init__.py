"""The bench spec: one YAML file's variants, tiers and settings, checked into typed records.

Lives here: bench (BenchSpec, load_spec; paths in a spec expanded and made absolute), speculation (the speculative block of a variant), llmapi (an LLM-API variant's fields), serving (server kinds and their options), kv (KV-cache settings), datasets (loadtest.datasets: dataset files, formats, weights), design (how variants are measured in time), report (report settings), cluster (cluster: where the matrix runs, local or Slurm shards).
May import: core.
"""
