"""The side-by-side analysis of a run and its renderings (pure frames in, text or PNG out).

Lives here: comparison, recommendation (+ recommendation_config: the serving snippets, recommendation_text: its Markdown and JSON, margins: one variant over another by the objective), paired (ratios paired by round), design_section (how a run was measured in time), markdown, acceptance_section, lossless_section, kv_section (KV capacity per variant), uncertainty (intervals, thin percentiles), followup_check (the recommended config against the best fixed variant per tier: `trtbench follow-up`), plots, inputs (the schemas of the CSVs a report reads), category_section (method × category per tier), run_data (a run directory's files read back, for report, compare and plan --from-run), rounds_check (rounds.csv held to summary.csv's round counts and run.json's design.order).
May import: core, spec, profiling.loadtest, profiling.memory, profiling.traces.
"""
