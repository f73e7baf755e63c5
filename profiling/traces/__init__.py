"""Profiler traces -> kernel launches and launch overhead per decode step (CUDA-graph aware).

Lives here: nsys (reader, sqlite, profile, session), kineto, launches, launch_steps, schemas.
May import: core.
"""
