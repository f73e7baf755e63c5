"""The analytic planner: predicted step time, tokens per step, speedup and memory, and its fit to a run.

Lives here: planner, speculation (acceptance arithmetic), model_shapes, gpus, settings, text, fit.
May import: core, builders.medusa_tree, profiling.loadtest, profiling.report.
"""
