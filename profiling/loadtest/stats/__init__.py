"""Figures made of records: latency metrics, acceptance, speedups, intervals, the lossless gate.

Lives here: metrics, acceptance, categories (acceptance and TPOT per prompt category), speedups, lossless (the lossless gate), window (steady-state window), sample_checks (thin percentiles), trusted_summary (intervals over passes), decisions (a paired comparison classed better / worse / equivalent / open, and the levels of its looks under stopping), racing (after each round, which variant is still measured at which tier).
May import: core, profiling.loadtest.records, profiling.loadtest.workload.
"""
