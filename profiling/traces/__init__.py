"""Profiler traces -> kernel launches and launch overhead per decode step (CUDA-graph aware).

Lives here: nsys (the reader; + nsys_sqlite, nsys_profile, nsys_session), nsys_stream (one export in bounded memory; + nsys_calls, spill, launch_summary_stream, bucket_tables), ranks (several ranks' traces, combined; + rank_workers: one process per rank, stop signals), kineto (the whole-file reader), kineto_stream (one trace in bounded memory; + json_stream, kineto_events, kineto_chunks: decoded in worker processes, kineto_join), launches, launch_steps, schemas, table_io (fast CSV / Parquet, piece by piece).
May import: core.
"""
