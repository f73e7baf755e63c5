"""Running a tier: one pass against one server, passes interleaved over many, N client processes.

Lives here: runner (one tier against one server), tier_pass (one pass over one tier), interleave (many servers, one cell at a time), round_plans (the cells of a fixed design at once, or a race's round by round), workers + worker_child (N client processes).
May import: core, profiling.loadtest.records, profiling.loadtest.workload, profiling.loadtest.stats, profiling.loadtest.clients, profiling.loadtest.files.
"""
