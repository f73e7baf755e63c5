"""What a server holds while it serves: device memory (NVML), RSS, Triton /metrics, the breakdown.

Lives here: nvml, proctree, sampling (periodic sampler), sampler, server_metrics (+ views), breakdown.
May import: core.
"""
