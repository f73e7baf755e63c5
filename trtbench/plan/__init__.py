"""The analytic planner: predicted step time, tokens per step, speedup and memory, and its fit to a run.

Lives here: planner, inputs, memory, parallel, chain_modes, speculation, model_shapes, gpus, settings, plan_run, text, fit_text, fit, tier_fit, tier_batch, tier_stall, tier_tokens, overheads, anchors.
May import: core, builders.medusa_tree, profiling.loadtest, profiling.report, profiling.traces.
"""
