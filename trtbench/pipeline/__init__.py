"""The stages of a benchmark, joining the subsystems: deploy, load test, `trtbench run`, report.

Lives here: run (build -> deploy -> tiers -> CSVs -> report), preflight (inputs checked before work), deploy, loadtest, tier_capture, report.
May import: core, builders, triton_repo, vllm_server, profiling, plan.
"""
