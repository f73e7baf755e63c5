"""One client per serving API, behind the transport the driver calls.

Lives here: grpc_client (Triton gRPC streaming; + response_parse, response_columns: a request's responses at once, lean_stream: streamed outputs left serialized, llmapi_tensors), openai_client (HTTP + SSE; + sse_http, the aiohttp stream reader, openai_spec, sglang_spec: SGLang found by probing and its per-request counts), server_counts (a server's counters -> per-tier deltas), counter_reader (which counters a server keeps, read as it needs), health, target, transport (one per API, the driver's seam).
May import: core, profiling.loadtest.records, profiling.loadtest.workload, profiling.loadtest.stats.
"""
