"""What a server holds while it serves: device memory (NVML), RSS, Triton /metrics, the breakdown.

Lives here: nvml, sampling (periodic sampler), sampler, server_metrics (+ server_metrics_views), kv_pressure (capacity per tier under a KV budget), breakdown (+ breakdown_schema: its CSV columns).
May import: core.
"""
