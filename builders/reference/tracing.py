"""Profiler ranges of the reference engine and a Kineto (PyTorch profiler) trace recorder.

The batcher wraps each prefill in a range ``prefill`` and its i-th batched decode step in
``decode_step#{i}`` (:func:`step_range`): a ``torch.profiler.record_function`` range (a
``user_annotation`` event in a Kineto trace) and, when CUDA is available, an NVTX range
(seen by Nsight Systems). ``trtbench analyze kineto`` / ``analyze nsys`` take
``decode_step#N`` as their default step pattern (``profiling/traces/launch_steps.py``).

:func:`record_kineto_trace` runs generation inside ``torch.profiler.profile`` and exports a
Chrome trace. The profiler records the thread that enabled it only, so the batcher's
iterations run in the calling thread for the trace (``InflightBatcher.run_until_idle``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from trtbench.builders.reference.engine import ReferenceEngine

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def step_range(name: str) -> Iterator[None]:
    """A ``record_function`` range named ``name`` plus, on CUDA machines, an NVTX range.

    Cost when no profiler runs: a few microseconds (the record_function guard; NVTX
    push/pop are no-ops without a tool attached).
    """
    nvtx = (
        torch.cuda.nvtx.range(name)
        if torch.cuda.is_available()
        else contextlib.nullcontext()
    )
    with torch.profiler.record_function(name), nvtx:
        yield


def record_kineto_trace(
    engine: ReferenceEngine,
    prompts: Sequence[Sequence[int]],
    path: Path,
    max_tokens: int,
) -> list[list[int]]:
    """Generate for ``prompts`` (batched together) under the PyTorch profiler; write a trace.

    All prompts are submitted at once (up to the engine's max_batch_size run together, the
    rest join as slots free up) and the batcher runs in this thread until all are done. An
    engine whose loop thread runs is closed first (that ends requests in flight).

    Args:
        engine: a reference engine.
        prompts: prompt token ids.
        path: the Chrome trace JSON to write (``prof.export_chrome_trace``).
        max_tokens: tokens generated per prompt (no early end).

    Returns:
        The generated token ids per prompt.

    Raises:
        ConfigError: a prompt the engine refuses (``ReferenceEngine.submit``).
    """
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available() and engine.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    engine.close()
    with profile(activities=activities) as prof:
        handles = [
            engine.submit(p, max_tokens, end_id=-1, start=False) for p in prompts
        ]
        engine.batcher.run_until_idle()
    outputs = [[t for step in handle for t in step.token_ids] for handle in handles]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(path))
    logger.debug("wrote a Kineto trace of %d prompts to %s", len(prompts), path)
    return outputs
