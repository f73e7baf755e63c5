"""TensorRT-LLM: the engine path (<= 1.3.0rc20) and the LLM-API path, plans checked against contracts.

Lives here: backend, plan, calls, facts, contract (+ data/), rules, render, run, worker, inspection; llmapi_contract, llmapi_values, llmapi_files, llmapi_plan, llmapi_build.
May import: core, spec, builders.manifest, builders.medusa_tree.
"""
