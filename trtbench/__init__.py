"""trtbench: which speculative-decoding method, up to which concurrency, at what memory cost.

Lives here: cli.py (the entry point) and the floors: core/ and spec/ (ground), the subsystems builders/, triton_repo/, vllm_server/, trtllm_server/, profiling/ (top-level folders of the repository), plan/, then pipeline/ and cluster/ (the stages; cluster/: the matrix over Slurm) and commands/ (the roof).
May import: core (cli.py, the entry point above everything, also imports trtbench.commands).
"""

__version__ = "0.1.0"
