"""Measurements made by other benchmarking tools, read into trtbench's own tables.

Lives here: aiperf_files (an AIPerf artifact directory: profile_export.jsonl + profile_export_aiperf.json, checked and typed), aiperf_summary (its records → summary.csv rows, trtbench's definitions).
May import: core, profiling.loadtest.
"""
