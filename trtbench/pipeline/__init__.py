"""The stages of a benchmark, joining the subsystems: deploy, load test, `trtbench run`, report.

Lives here: run (build -> deploy -> tiers -> CSVs -> report), stages (how a run reports its stages: a total, one item at a time), serving (one variant served and measured: Triton, vLLM or trtllm-serve), measuring (every variant in the run's design), preflight (inputs checked before work), dry_run (`trtbench run --dry-run`: those checks, then the plan), deploy, vllm_deploy (server: vllm variants), trtllm_deploy (server: trtllm-serve variants), loadtest (+ loadtest_files: the merged CSVs), tier_capture, report, peers (an AIPerf artifact directory read as a run), recommend (the Recommendation joined with the LLM-API contracts), followup (+ followup_spec: `trtbench follow-up`, the recommended config measured again and checked).
May import: core, spec, builders, triton_repo, vllm_server, trtllm_server, profiling, plan.
"""
