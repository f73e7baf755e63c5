"""Load tests: tiers of streamed requests against one served model, recorded and summarized.

Lives here: schedule, prompts, grpc_client (one client per API), runner, responses, metrics, schemas.
May import: core.
"""
