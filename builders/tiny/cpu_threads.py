"""Torch CPU thread counts for training and decoding on machines whose cores may be shared."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

import numpy as np
import torch


@contextlib.contextmanager
def all_cores_threads(max_threads: int = 8) -> Iterator[int]:
    """Use the cores this process may run on (at most ``max_threads``); restore on exit.

    Yields:
        The thread count set.
    """
    before = torch.get_num_threads()
    threads = max(1, min(len(os.sched_getaffinity(0)), max_threads))
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


class ThreadChooser:
    """Re-pick torch's intra-op thread count during a loop on shared CPUs (a context manager).

    Every ``period`` steps, ``probe`` steps run with each candidate (the thread count set on
    entry, then 1) and the rest of the period uses the faster. On 2 busy cores, 2 OpenMP threads
    were measured 4-7x slower per training step than 1 (threads wait on each other); on 2 idle
    cores 2 threads are ~1.7x faster. Thread counts change only float rounding. The entry
    thread count is restored on exit.
    """

    def __init__(self, probe: int = 4, period: int = 100) -> None:
        self.top = torch.get_num_threads()
        self.candidates = (self.top, 1) if self.top > 1 else (self.top,)
        self.probe, self.period = probe, period
        self.seconds: dict[int, list[float]] = {}
        self.current, self.count = self.top, 0

    def __enter__(self) -> ThreadChooser:
        return self

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.top)

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """Run one step of the loop under the chosen thread count, timing probe steps."""
        phase, slot = self.count % self.period, (self.count % self.period) // self.probe
        if slot < len(self.candidates):
            self.current = self.candidates[slot]
        elif phase == self.probe * len(self.candidates):
            median = {n: float(np.median(t[1:])) for n, t in self.seconds.items()}
            self.current = min(median, key=median.__getitem__)
            self.seconds = {}
        torch.set_num_threads(self.current)
        start = time.perf_counter()
        yield
        if slot < len(self.candidates):
            self.seconds.setdefault(self.current, []).append(
                time.perf_counter() - start
            )
        self.count += 1
