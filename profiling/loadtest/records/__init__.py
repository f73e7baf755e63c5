"""What one request and its tier leave behind, before any figure is made of them.

Lives here: outcome (a request's outcome and a tier's), client_timing (the client's own stamps -> TTFT, ITL), spec_counters (a server's speculative counters), trtllm_counters (trtllm-serve's, from its two counter endpoints), trtllm_perf_metrics (trtllm-serve's per-request /perf_metrics entries, summed), counter_versions (which revision of each server writes which counter meaning: the table the readers and docs/metrics.md share), loop_lag (the client's event-loop lag sampler), host_load (what else used the host), response_rows (a request's response records as columns), record_sink (records streamed to disk), cell_tally (a sink that passes records on and keeps each pass's output tok/s).
May import: core.
"""
