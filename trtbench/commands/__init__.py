"""Click commands, one module per command family; each parses its options and calls one library function.

Lives here: one module per `trtbench` sub-command, and options.py (flags several commands share).
May import: core, pipeline, plan, builders, triton_repo, profiling.
"""
