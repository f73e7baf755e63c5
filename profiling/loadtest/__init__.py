"""Load tests: tiers of streamed requests against one served model, recorded and summarized.

Lives here: schedule, prompts, grpc_client (+ response_parse, llmapi_tensors), openai_client (HTTP + SSE; + sse_http, the aiohttp stream reader, + spec_counters, vLLM's Prometheus counters, and server_counts, their per-tier deltas → summary/acceptance rows), transport (one per API, the runner's seam), runner (+ target, health, record_sink, outcome, tier_pass: one pass over one tier), design (when each variant × tier cell is measured) + interleave (many servers, one cell at a time), host_load (what else used the host) + rounds_table (rounds.csv), workers + worker_child + partition (N client processes), responses, outputs + lossless (the lossless gate), metrics, speedups, repeats + window + sample_checks + trusted_summary (passes, steady-state window, intervals, thin percentiles), schemas.
May import: core.
"""
