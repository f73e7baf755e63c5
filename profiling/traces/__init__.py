"""Profiler traces -> kernel launches and launch overhead per decode step (CUDA-graph aware).

Lives here: nsys (the reader; + nsys_sqlite, nsys_profile, nsys_session), kineto, launches, launch_steps, schemas, table_io (fast CSV / Parquet).
May import: core.
"""
