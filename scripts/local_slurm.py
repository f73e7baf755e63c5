#!/usr/bin/env python3
"""A single-node Slurm cluster on this machine, to try `trtbench run --executor slurm`.

Usage (as root; installs Debian's slurmctld, slurmd, slurm-client and munge when absent):

    python scripts/local_slurm.py [DIR]        # runs until Ctrl-C, then stops the daemons

It starts slurmctld and slurmd on DIR/slurm.conf (default: a temporary directory), waits
until the node is idle and prints the line to paste into another shell:

    export SLURM_CONF=DIR/slurm.conf
    trtbench run examples/tiny-cpu.yaml --executor slurm

The cluster is the one the integration tests start (tests/support/slurm_cluster.py: the
settings and why each is there). Exit status: 0 after Ctrl-C; 2 when it cannot start (the
reason on one line: not root, no apt-get, a daemon that exited).
"""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))

from tests.support.slurm_cluster import local_slurm  # noqa: E402


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="trtbench-slurm-"))
    root.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    with local_slurm(root) as cluster:
        if isinstance(cluster, str):
            print(f"local_slurm: {cluster}", file=sys.stderr)
            return 2
        print(
            f"Slurm is up: node {cluster.node}, {cluster.cpus} CPUs. In another shell:"
        )
        print(f"    export SLURM_CONF={cluster.conf}")
        print("    trtbench run examples/tiny-cpu.yaml --executor slurm")
        print("Ctrl-C stops the daemons.", flush=True)
        stop.wait()
    print("stopped slurmctld and slurmd")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
