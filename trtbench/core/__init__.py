"""The ground floor every room stands on: errors, files, units, the run directory, processes.

Lives here: errors (+ validation_errors), methods (one module per speculative method, found at import), stacks (the servers and build backends: each named once, a record callers ask), paths, units, json_files, data_files, records, export, run_dir, run_lock, stop_signals, tcp_ports, managed_process (+ openai_process: an OpenAI-compatible server process, vLLM or trtllm-serve), proctree.
May import: nothing else of trtbench.
"""
