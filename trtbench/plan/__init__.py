"""The analytic planner: predicted step time, tokens per step, speedup and memory, and its fit to a run.

Lives here: planner, inputs, memory, parallel, chain_modes, chain_kinds, speculation, model_shapes, moe_shapes, gpus, engines, settings, plan_run, qps, text, fit_text, fit, tier_fit, tier_batch, tier_stall, tier_tokens, overheads, anchors, anchor_fit, bands, calibration, calibrate_run, calibrate_torch.
May import: core, builders.medusa_tree, profiling.loadtest, profiling.report, profiling.traces.
"""
