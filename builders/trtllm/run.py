"""Run a TensorRT-LLM build plan on a GPU (NGC image) and check the engines it produced.

Each engine step runs in a child Python (:mod:`trtbench.builders.trtllm.worker`), so the GPU
memory of one ``LLM`` is freed before the next and the child's output (TensorRT-LLM's Python and
C++ logs) can be streamed line by line into ``engines/<variant>/build.log``. While it runs, an
NVML sampler records the peak of device memory used (nvidia-ml-py; skipped when NVML is absent).
Afterwards the engine's ``config.json`` is read back and compared with what the plan asked for
(:func:`engine_mismatches`); any difference fails the build.

Only the pure parts (:func:`engine_mismatches`, :class:`GpuMemoryPeak` with a fake NVML,
:func:`gpu_capabilities`) run on CPU machines.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from trtbench.builders.trtllm.contract import Contract, check_trtllm_version
from trtbench.builders.trtllm.inspection import EngineSummary, summarize_engine
from trtbench.builders.trtllm.plan import EngineExpectation, EngineStep, VariantPlan
from trtbench.core.errors import BuildError, NotAvailableError
from trtbench.core.run_dir import write_json_atomic

logger = logging.getLogger(__name__)

PLAN_NAME = "plan.json"
LOG_NAME = "build.log"


def _load_nvml() -> Any | None:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # the library or the driver is missing: no GPU here
        logger.debug("NVML unavailable: %s", exc)
        return None
    return pynvml


def gpu_capabilities(nvml: Any | None = None) -> list[tuple[str, tuple[int, int]]]:
    """``[(name, (major, minor))]`` of the visible GPUs; ``[]`` when NVML cannot be used.

    Args:
        nvml: a ``pynvml``-like module already initialised (default: import and init pynvml).
    """
    owned = nvml is None
    nvml = nvml or _load_nvml()
    if nvml is None:
        return []
    out = []
    try:
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            out.append((str(nvml.nvmlDeviceGetName(handle)), (int(major), int(minor))))
    except nvml.NVMLError as exc:
        logger.warning("NVML could not list GPUs (%s); assuming none", exc)
        return []
    finally:
        if owned:
            nvml.nvmlShutdown()
    return out


class GpuMemoryPeak:
    """Context manager: samples the memory used on every GPU (bytes) while a build runs.

    ``peak_used_bytes`` is the largest sum over devices of NVML ``used`` seen (v1 memory info:
    used includes the driver's reserved memory); ``baseline_used_bytes`` the first sample;
    ``available`` is False when NVML cannot be used (nothing is sampled).

    Args:
        nvml: a ``pynvml``-like module already initialised (default: import and init pynvml).
        interval_s: sampling period (a monotonic deadline, not a sleep per sample).
    """

    def __init__(self, nvml: Any | None = None, interval_s: float = 0.2) -> None:
        self._nvml = nvml
        self._owned = nvml is None
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.available = False
        self.baseline_used_bytes: int | None = None
        self.peak_used_bytes: int | None = None
        self.samples = 0
        self.error: str | None = None

    def _used(self) -> int:
        nvml = self._nvml
        return sum(
            int(nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(i)).used)
            for i in range(nvml.nvmlDeviceGetCount())
        )

    def sample(self) -> None:
        """Take one sample (also called by the thread)."""
        used = self._used()
        self.samples += 1
        if self.baseline_used_bytes is None:
            self.baseline_used_bytes = used
        self.peak_used_bytes = max(self.peak_used_bytes or 0, used)

    def _run(self) -> None:
        deadline = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as exc:  # record and stop sampling; the build goes on
                self.error = f"{type(exc).__name__}: {exc}"
                return
            deadline += self._interval_s
            self._stop.wait(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> GpuMemoryPeak:
        self._nvml = self._nvml or _load_nvml()
        if self._nvml is None:
            self._owned = False
            return self
        self.available = True
        self.sample()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if self.error is None:
                self.sample()
        if self._owned and self.available:
            self._nvml.nvmlShutdown()

    @property
    def peak_delta_bytes(self) -> int | None:
        """Peak minus baseline (what the build added), or None without NVML."""
        if self.peak_used_bytes is None or self.baseline_used_bytes is None:
            return None
        return self.peak_used_bytes - self.baseline_used_bytes


def require_trtllm(contract: Contract) -> str:
    """Import tensorrt_llm and check its version; return the version.

    Raises:
        NotAvailableError: not importable (names the NGC image) or an unsupported version.
    """
    try:
        import tensorrt_llm
    except Exception as exc:  # ImportError, or a CUDA/TensorRT library failing to load
        raise NotAvailableError(
            f"tensorrt_llm is not importable ({type(exc).__name__}: {exc}); run "
            f"`trtbench build --backend trtllm` inside {contract.image} (TensorRT-LLM "
            f"{contract.version}) or use --backend reference"
        ) from None
    version = str(getattr(tensorrt_llm, "__version__", "unknown"))
    check_trtllm_version(version, contract)
    return version


def _plugin_ok(want: Any, got: Any) -> bool:
    if isinstance(want, bool):
        return bool(got) == want
    if want is None:
        return got in (None, False, "disable")
    return got not in (None, False, "disable")


def engine_mismatches(summary: EngineSummary, expect: EngineExpectation) -> list[str]:
    """What differs between an engine's config.json and the plan (empty list = as asked).

    Shapes must match except ``max_seq_len``, which TensorRT-LLM may raise by
    ``max_draft_len`` for speculative engines. Plugin values: booleans exactly; a dtype or
    ``auto`` means "enabled"; None means "disabled".
    """
    s, e = summary, expect
    pairs = [
        (
            "speculative_decoding_mode",
            s.speculative_decoding_mode,
            e.speculative_decoding_mode,
        ),
        ("max_draft_len", s.max_draft_len, e.max_draft_len),
        ("mapping.tp_size", s.tp_size, e.tp_size),
        ("mapping.pp_size", s.pp_size, e.pp_size),
        ("max_batch_size", s.max_batch_size, e.max_batch_size),
        ("max_input_len", s.max_input_len, e.max_input_len),
        ("max_beam_width", s.max_beam_width, e.max_beam_width),
        (
            "gather_generation_logits",
            s.gather_generation_logits,
            e.gather_generation_logits,
        ),
        ("quantization.quant_algo", s.quant_algo, e.quant_algo),
        (
            "quantization.kv_cache_quant_algo",
            s.kv_cache_quant_algo,
            e.kv_cache_quant_algo,
        ),
    ]
    if e.num_medusa_heads is not None:
        pairs += [
            ("num_medusa_heads", s.num_medusa_heads, e.num_medusa_heads),
            ("num_medusa_layers", s.num_medusa_layers, e.num_medusa_layers),
            (
                "pretrained_config.max_draft_len",
                s.medusa_max_draft_len,
                e.max_draft_len,
            ),
        ]
    out = [
        f"{k}: engine has {got!r}, asked {want!r}"
        for k, got, want in pairs
        if got != want
    ]
    if s.max_seq_len is None or s.max_seq_len < e.max_seq_len:
        out.append(
            f"max_seq_len: engine has {s.max_seq_len!r}, asked >= {e.max_seq_len}"
        )
    for key, want in e.plugins.items():
        got = s.plugins.get(key)
        if not _plugin_ok(want, got):
            out.append(f"plugin_config.{key}: engine has {got!r}, asked {want!r}")
    return out


@dataclass(frozen=True)
class StepResult:
    """One engine built: wall time (ns), GPU memory (bytes, None without NVML), summary."""

    role: str
    build_ns: int
    peak_gpu_used_bytes: int | None
    peak_gpu_delta_bytes: int | None
    summary: EngineSummary


def _stream(proc: subprocess.Popen[str], log: TextIO, role: str) -> str:
    """Copy the child's output to the log as it comes; return the last non-empty line."""
    last = ""
    for line in proc.stdout or ():
        log.write(line)
        log.flush()
        if line.strip():
            last = line.strip()
            logger.debug("[%s] %s", role, last)
    return last


def run_step(
    plan_path: Path,
    step: EngineStep,
    log_path: Path,
    python: str = sys.executable,
    nvml: Any | None = None,
) -> StepResult:
    """Build one engine in a child process, stream its log, then check its config.json.

    Raises:
        BuildError: the child failed (names build.log and its last line), or the engine
            differs from the plan (names every field).
    """
    cmd = [python, "-m", "trtbench.builders.trtllm.worker", str(plan_path), step.role]
    logger.info("building %s engine: %s", step.role, " ".join(cmd))
    start = time.perf_counter_ns()
    with log_path.open("a") as log, GpuMemoryPeak(nvml) as peak:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        last = _stream(proc, log, step.role)
        code = proc.wait()
    elapsed = time.perf_counter_ns() - start
    if code != 0:
        raise BuildError(
            f"building the {step.role} engine failed (exit {code}): {last or 'no output'}; "
            f"see {log_path}"
        )
    summary = summarize_engine(Path(step.engine_dir), step.role)
    problems = engine_mismatches(summary, step.expect)
    if problems:
        raise BuildError(
            f"the {step.role} engine in {step.engine_dir} is not what was asked: "
            f"{'; '.join(problems)}; fix the spec or report the TensorRT-LLM version"
        )
    if step.checkpoint_dir:
        shutil.rmtree(step.checkpoint_dir, ignore_errors=True)
    return StepResult(
        step.role, elapsed, peak.peak_used_bytes, peak.peak_delta_bytes, summary
    )


def _clear_engine(engine_dir: Path) -> None:
    """Remove a previous build's config.json and rank files (never read back stale ones)."""
    if engine_dir.is_dir():
        for path in [engine_dir / "config.json", *engine_dir.glob("rank*.engine")]:
            path.unlink(missing_ok=True)


def run_plan(
    plan: VariantPlan,
    python: str = sys.executable,
    nvml: Any | None = None,
    on_step: Callable[[StepResult], None] | None = None,
) -> list[StepResult]:
    """Write ``plan.json`` and build every engine of the plan in order (draft after target).

    Returns:
        One :class:`StepResult` per engine.

    Raises:
        BuildError: a step failed or produced the wrong engine.
    """
    root = Path(plan.engine_root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "build.json").unlink(missing_ok=True)
    plan_path = root / PLAN_NAME
    write_json_atomic(plan_path, plan.to_json())
    log_path = root / LOG_NAME
    log_path.write_text(f"# trtbench build of variant {plan.name} ({plan.mode})\n")
    results = []
    for step in plan.engines:
        _clear_engine(Path(step.engine_dir))
        result = run_step(plan_path, step, log_path, python, nvml)
        results.append(result)
        if on_step is not None:
            on_step(result)
    return results
