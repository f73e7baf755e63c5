"""The TensorRT-LLM engine path (<= 1.2.1): plans as data, checked against a contract, then run.

Lives here: backend, plan, calls, facts, contract (+ data/), rules, render, run, worker, inspection.
May import: core, builders.manifest, builders.medusa_tree.
"""
