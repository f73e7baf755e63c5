"""The bench spec: one YAML file's variants, tiers and settings, checked into typed records.

Lives here: bench (BenchSpec, load_spec), speculation (the speculative block of a variant), llmapi (an LLM-API variant's fields), serving (server kinds and their options), kv (KV-cache settings), design (how variants are measured in time), report (report settings), paths (the spec's files).
May import: core.
"""
