"""Click commands, one module per command family; each parses its options and calls one library function.

Lives here: one module per `trtbench` sub-command (build, deploy, run, loadtest, profile, analyze, report, compare, plan, calibrate, inspect, followup, collect); cluster (the --executor slurm options, a cluster run on the terminal); options (shared flags), logs, claim (run-dir lock + log), stage_lines (one progress line per stage), terminal (tables, what was written).
May import: core, spec, pipeline, cluster, plan, builders, triton_repo, vllm_server, trtllm_server, profiling.
"""
