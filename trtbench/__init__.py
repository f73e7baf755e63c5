"""trtbench: which speculative-decoding method, up to which concurrency, at what memory cost.

Lives here: the core every room uses (errors, paths, json_files, data_files, units, spec (+ spec_design, spec_llmapi, spec_speculation, spec_kv, spec_report, spec_paths, validation_errors), run_dir, run_lock, run_data, records, export, stop_signals, tcp_ports, managed_process, proctree) and cli.py.
May import: nothing else of trtbench (cli.py, the entry point above everything, imports trtbench.commands).
"""

__version__ = "0.1.0"
