"""What a server holds while it serves: device memory (NVML), RSS, Triton /metrics, the breakdown.

Lives here: nvml, proctree, sampling (periodic sampler), sampler, server_metrics (+ views), kv_pressure (capacity per tier under a KV budget), breakdown.
May import: core.
"""
