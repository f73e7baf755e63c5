"""The side-by-side analysis of a run and its renderings (pure frames in, text or PNG out).

Lives here: comparison, markdown, plots.
May import: core, profiling.loadtest.
"""
