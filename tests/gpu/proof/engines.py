"""GPU proof, measuring side: the tiny models per dtype, one reference engine per mode, timed
decode steps, a profiled run of exactly N decode steps, and the top-2 logit gap.

Everything runs in this process and this thread: requests are submitted with ``start=False``
and the in-flight batcher is driven with ``InflightBatcher.iterate`` (one iteration = admit
waiting requests, one batched decode step, deliver), so each decode step can be timed on its
own and profiled (torch's profiler records the thread that enabled it only).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from trtbench.builders.reference.eagle3 import load_eagle3
from trtbench.builders.reference.engine import ReferenceEngine
from trtbench.builders.reference.loading import load_causal_lm, make_engine
from trtbench.builders.reference.medusa_heads import load_medusa_heads
from trtbench.builders.tiny.tiny_models import ensure_tiny_models, model_paths
from trtbench.core.errors import ConfigError
from trtbench.core.paths import tiny_models_dir

MEDUSA_TREE = [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]  # examples/tiny-cpu.yaml
DRAFT_LEN = 4
DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
# Most tokens one decode step of a mode can emit: baseline 1; draft_target, ngram (prompt
# lookup, no extra model) and eagle3 (a chain of K) K accepted + 1; medusa the tree's depth
# accepted + 1.
MAX_TOKENS_PER_STEP = {
    "baseline": 1,
    "draft_target": DRAFT_LEN + 1,
    "ngram": DRAFT_LEN + 1,
    "medusa": max(len(c) for c in MEDUSA_TREE) + 1,
    "eagle3": DRAFT_LEN + 1,
}
MODES = tuple(MAX_TOKENS_PER_STEP)
_STEP_RANGE = re.compile(r"^decode_step#\d+$")


def model_dirs(root: Path | None) -> dict[str, Path]:
    """The target / draft / medusa / eagle3 directories (``tiny_models.PARTS``): carried ones
    under ``root``, else the tiny models of this machine's cache (made on first use, 2–4 min
    of CPU).

    Raises:
        ConfigError: a part under ``root`` has no ``config.json``.
        BuildError: the cache cannot be written (making the models).
    """
    if root is None:
        return ensure_tiny_models(tiny_models_dir())
    dirs = model_paths(Path(root))
    parts = ", ".join(f"{part}/" for part in dirs)
    for part, path in dirs.items():
        if not (path / "config.json").is_file():
            raise ConfigError(
                f"--models {root}: {part}/config.json is missing; carry the whole folder "
                f"scripts/make_tiny_models.py makes ({parts})"
            )
    return dirs


@dataclass(frozen=True)
class ProofModels:
    """The tiny models loaded once per dtype on one device, shared by every engine."""

    dtype_name: str
    target: torch.nn.Module
    draft: torch.nn.Module
    heads: torch.nn.Module
    eagle3: torch.nn.Module
    tokenizer: object
    dirs: dict[str, Path]

    def engine(
        self,
        mode: str,
        *,
        max_batch_size: int,
        max_seq_len: int,
        max_input_len: int,
        cuda_graphs: bool,
    ) -> ReferenceEngine:
        """A reference engine of ``mode`` (draft K = :data:`DRAFT_LEN`, the example tree).

        Raises:
            BuildError: an unknown mode (``make_engine``).
        """
        extra: dict[str, object] = {}
        if mode == "draft_target":
            extra = {"draft": self.draft, "draft_len": DRAFT_LEN}
        elif mode == "ngram":
            extra = {"draft_len": DRAFT_LEN}
        elif mode == "medusa":
            extra = {"heads": self.heads, "choices": MEDUSA_TREE}
        elif mode == "eagle3":
            extra = {"eagle3": self.eagle3, "draft_len": DRAFT_LEN}
        return make_engine(
            mode,
            self.target,
            self.tokenizer,
            max_seq_len=max_seq_len,
            max_input_len=max_input_len,
            max_batch_size=max_batch_size,
            cuda_graphs=cuda_graphs,
            **extra,
        )

    def param_bytes(self, mode: str) -> int:
        """Bytes of the parameters an engine of ``mode`` holds, in the loaded dtype (the
        EAGLE-3 draft's own: it shares the target's embedding, which it does not hold)."""
        parts = [self.target]
        parts += [self.draft] if mode == "draft_target" else []
        parts += [self.heads] if mode == "medusa" else []
        parts += [self.eagle3] if mode == "eagle3" else []
        return sum(p.numel() * p.element_size() for m in parts for p in m.parameters())


def load_models(
    dirs: dict[str, Path], dtype_name: str, device: torch.device
) -> ProofModels:
    """Load target, draft, Medusa heads and the EAGLE-3 draft in ``dtype_name`` on ``device``.

    Raises:
        BuildError: weights that do not match their config (``load_causal_lm``).
        ConfigError: an EAGLE-3 checkpoint that does not fit the target (``load_eagle3``).
    """
    from transformers import AutoTokenizer

    dtype = DTYPES[dtype_name]
    target = load_causal_lm(dirs["target"], dtype, device)
    return ProofModels(
        dtype_name,
        target,
        load_causal_lm(dirs["draft"], dtype, device),
        load_medusa_heads(dirs["medusa"], dtype, device),
        load_eagle3(dirs["eagle3"], target, dtype, device),
        AutoTokenizer.from_pretrained(dirs["target"]),
        dict(dirs),
    )


def proof_prompts(tokenizer, count: int, length: int) -> list[list[int]]:
    """``count`` distinct prompts of ``length`` tokens: windows of held-out standard-library
    source (files the tiny models never trained on), every ``4 × length`` tokens, then every
    ``length`` tokens if the first pass is short.

    Raises:
        ConfigError: the held-out text is too short for ``count`` prompts.
    """
    from trtbench.builders.tiny.tiny_corpus import select_corpus
    from trtbench.builders.tiny.tiny_recipe import Recipe

    _, held_out = select_corpus(Recipe())
    texts = [tokenizer(t, verbose=False)["input_ids"] for t in held_out]
    prompts: list[list[int]] = []
    for stride in (4 * length, length):
        for ids in texts:
            for start in range(0, len(ids) - length, stride):
                window = ids[start : start + length]
                if window not in prompts:
                    prompts.append(window)
                if len(prompts) == count:
                    return prompts
    raise ConfigError(
        f"only {len(prompts)} prompts of {length} tokens in the held-out text; lower "
        "--batch-sizes or --prompt-len"
    )


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class DecodeTiming:
    """One run of ``len(prompts)`` requests submitted together (all admitted at once).

    Attributes:
        rows: rows stepped in each decode step after the first iteration, in order.
        step_ns: time of each of those iterations (one batched decode step each), ns.
        step_tokens: tokens the step emitted over all rows.
        first_iteration_ns: the first iteration (every prefill + the first decode step).
        outputs: per request, every generated token (the prefill's first one included).
        clock: ``cuda_events`` (a CUDA event pair around each iteration, on the device's
            stream) or ``host_perf_counter`` (``perf_counter_ns`` on the host: on CPU).
    """

    rows: list[int] = field(default_factory=list)
    step_ns: list[int] = field(default_factory=list)
    step_tokens: list[int] = field(default_factory=list)
    first_iteration_ns: int = 0
    outputs: list[list[int]] = field(default_factory=list)
    clock: str = "host_perf_counter"


class _StepClock:
    """Times batcher iterations: CUDA events on a CUDA device (read once at the end, no
    synchronize between steps), else the host's ``perf_counter_ns``."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        self.marks: list = []

    def start(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter_ns()

    def stop(self, started) -> None:
        self.marks.append((started, self.start()))

    def durations_ns(self) -> list[int]:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            return [round(a.elapsed_time(b) * 1e6) for a, b in self.marks]
        return [b - a for a, b in self.marks]


def time_decode(
    engine: ReferenceEngine, prompts: Sequence[Sequence[int]], max_tokens: int
) -> DecodeTiming:
    """Submit every prompt (no early end), then time each batcher iteration.

    On CUDA each iteration is timed by CUDA events recorded before and after it (a decode
    step ends with the greedy picks copied to the host, so the end event follows all of its
    GPU work); on CPU by ``perf_counter_ns``. ``step_ns`` is the step's full cost.

    Raises:
        ConfigError: a prompt the engine refuses. Exception: a failed decode step.
    """
    engine.close()
    timing = DecodeTiming(outputs=[[] for _ in prompts])
    emitted, errors = [0], []

    def deliver_to(index: int) -> Callable:
        def deliver(step, final, error) -> None:
            if error is not None:
                errors.append(error)
            if step is not None:
                timing.outputs[index].extend(step.token_ids)
                emitted[0] += len(step.token_ids)

        return deliver

    for i, prompt in enumerate(prompts):
        engine.submit(prompt, max_tokens, end_id=-1, deliver=deliver_to(i), start=False)
    batcher, device = engine.batcher, engine.device
    clock = _StepClock(device)
    timing.clock = "cuda_events" if clock.cuda else "host_perf_counter"
    synchronize(device)
    started = clock.start()
    busy = batcher.iterate()
    clock.stop(started)
    while busy:
        rows, before = len(engine.decoder.rows), emitted[0]
        started = clock.start()
        busy = batcher.iterate()
        clock.stop(started)
        timing.rows.append(rows)
        timing.step_tokens.append(emitted[0] - before)
    first, *steps = clock.durations_ns()
    timing.first_iteration_ns, timing.step_ns = first, steps
    if errors:
        raise errors[0]
    return timing


def trace_decode(
    engine: ReferenceEngine,
    prompts: Sequence[Sequence[int]],
    steps: int,
    max_tokens: int,
    path: Path,
) -> int:
    """Profile exactly ``steps`` batched decode steps; write the Chrome trace to ``path``.

    The requests are admitted (prefilled) and take one decode step before the profiler
    starts, so the trace holds ``steps`` ranges ``decode_step#N`` and no prefill; then they
    are cancelled. ``max_tokens`` must outlast ``steps + 1`` steps of every request.

    Returns:
        Decode steps the batcher ran under the profiler (``steps`` unless a request ended).
    """
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if engine.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    engine.close()
    handles = [engine.submit(p, max_tokens, end_id=-1, start=False) for p in prompts]
    batcher = engine.batcher
    batcher.iterate()
    synchronize(engine.device)
    before = batcher.steps_run
    with profile(activities=activities) as prof:
        for _ in range(steps):
            batcher.iterate()
        synchronize(engine.device)
    ran = batcher.steps_run - before
    for handle in handles:
        handle.cancel()
    batcher.run_until_idle()
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(path))
    return ran


def count_step_ranges(path: Path) -> int:
    """``decode_step#N`` annotations (``user_annotation`` events) in a Chrome trace."""
    events = json.loads(Path(path).read_text())["traceEvents"]
    return sum(
        1
        for e in events
        if isinstance(e, dict)
        and e.get("cat") == "user_annotation"
        and _STEP_RANGE.match(str(e.get("name", "")))
    )


def kv_cache_bytes(engine: ReferenceEngine) -> int:
    """Bytes of every KV-cache buffer the engine's model runners allocated."""
    return sum(
        t.numel() * t.element_size()
        for runner in engine.decoder.runners()
        for t in (*runner.cache.keys, *runner.cache.values)
    )


def top2_gap(
    model: torch.nn.Module, prompt: Sequence[int], prefix: Sequence[int]
) -> tuple[float, float]:
    """The next-token top-2 logit gap after ``prompt + prefix`` and the top logit.

    One forward of the whole sequence without a cache (the model's own causal mask, in its
    dtype and device), as ``tests/support/random_llama.greedy_oracle`` measures it.

    Returns:
        ``(top1 - top2, top1)``.
    """
    ids = torch.tensor([[*prompt, *prefix]], device=model.device)
    with torch.inference_mode():
        logits = model(ids, use_cache=False).logits[0, -1].float()
    top = logits.topk(2).values
    return float(top[0] - top[1]), float(top[0])


def torch_memory(device: torch.device) -> dict[str, int] | None:
    """``torch.cuda`` allocator peaks since the last reset (None on a CPU device)."""
    if device.type != "cuda":
        return None
    return {
        "torch_max_allocated_bytes": int(torch.cuda.max_memory_allocated(device)),
        "torch_max_reserved_bytes": int(torch.cuda.max_memory_reserved(device)),
        "torch_allocated_bytes": int(torch.cuda.memory_allocated(device)),
    }


def reset_memory(device: torch.device) -> None:
    """Free cached blocks and reset the allocator's peaks (CUDA only)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
