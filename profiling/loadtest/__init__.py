"""Load tests: tiers of streamed requests against one served model, recorded and summarized.

Lives here: schedule, prompts, grpc_client (one client per API), runner (+ target, health, record_sink, outcome), responses, metrics, speedups, schemas.
May import: core.
"""
