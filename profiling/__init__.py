"""What is measured while variants serve, and what is made of it: load tests, traces, memory, the report.

Lives here: loadtest/, traces/, memory/, report/, peers/ (no modules of its own).
May import: core.
"""
