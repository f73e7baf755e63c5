"""The GPU proof (``scripts/gpu_proof.py``): what CPU runs cannot measure, in one process.

For every dtype, graphs setting (eager, CUDA graphs), batch size and mode of the reference
engine: decode-step time, output tok/s and the speedup over baseline (in-flight batching,
``engines.time_decode``); the lossless rule (``tables``); for the traced
dtypes a Kineto trace of exactly ``trace_steps`` decode steps analysed by trtbench's own
``analyze kineto`` (launch calls, launch overhead, graph launches, GPU idle per step); NVML
through trtbench's memory sampler for the whole run, the memory breakdown, and the
``torch.cuda`` allocator peaks. On a CPU the CUDA-only figures are written as ``n/a`` with
the reason. Output files: ``decode_timing.csv``, ``lossless.csv``, ``kineto.csv`` (+
``kineto/<config>/launch_summary.csv`` and ``steps.csv``), ``memory.csv``,
``memory_breakdown.csv``, ``summary.json``, ``table.txt``.
"""

from __future__ import annotations

import gc
import gzip
import logging
import os
import platform
import re
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch

from tests.gpu.proof import engines as eng
from tests.gpu.proof import tables as tab
from tests.gpu.proof.summary import breakdown_frame, build_summary
from trtbench.core.errors import ConfigError, TraceParseError
from trtbench.core.export import write_csv
from trtbench.core.run_dir import write_json_atomic
from trtbench.profiling.memory.breakdown import write_memory_breakdown_csv
from trtbench.profiling.memory.sampler import (
    MemorySampler,
    memory_frame,
    write_memory_csv,
)
from trtbench.profiling.traces.kineto import analyze_kineto_trace
from trtbench.profiling.traces.table_io import write_trace_tables

logger = logging.getLogger(__name__)

SUMMARY_VERSION = 1
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")
GRAPH_SETTINGS = ("eager", "graphs")
WARMUP_TOKENS = 12  # > 2 steps of every mode at its most tokens per step (engines.py)


@dataclass(frozen=True)
class ProofSettings:
    """What to measure (checked by :func:`check_settings`)."""

    device: str
    out: Path
    models: Path | None = None
    modes: tuple[str, ...] = eng.MODES
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    batch_sizes: tuple[int, ...] = (1, 8, 32, 64)
    max_tokens: int = 96
    prompt_len: int = 32
    trace_steps: int = 32
    trace_dtypes: tuple[str, ...] = ("bfloat16",)
    keep_traces: bool = False
    memory_interval_ms: float = 100.0
    repeats: int = 3

    @property
    def max_seq_len(self) -> int:
        """Prompt plus the longest request (a timed run or a trace), same for every mode."""
        return self.prompt_len + max(self.max_tokens, self.trace_tokens)

    @property
    def trace_tokens(self) -> int:
        """Tokens per traced request: enough for ``trace_steps + 2`` steps of any mode."""
        return (self.trace_steps + 2) * max(eng.MAX_TOKENS_PER_STEP.values())


def check_settings(settings: ProofSettings) -> torch.device:
    """Refuse bad input before any work; create the output directory.

    Returns:
        The torch device.

    Raises:
        ConfigError: unknown device / mode / dtype, CUDA asked for without CUDA, a batch
            size or count below 1, or an output directory that cannot be written.
    """
    if not _DEVICE.match(settings.device):
        raise ConfigError(
            f"--device {settings.device!r} is unknown; use cpu, cuda or cuda:N"
        )
    device = torch.device(settings.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                f"--device {settings.device}: torch {torch.__version__} sees no CUDA GPU; "
                "run on a GPU machine with a CUDA build of torch, or use --device cpu"
            )
        if (device.index or 0) >= torch.cuda.device_count():
            raise ConfigError(
                f"--device {settings.device}: only {torch.cuda.device_count()} GPU(s)"
            )
    for name, values, known in (
        ("--modes", settings.modes, eng.MODES),
        ("--dtypes", settings.dtypes, tuple(eng.DTYPES)),
        ("--trace-dtypes", settings.trace_dtypes, tuple(eng.DTYPES)),
    ):
        bad = [v for v in values if v not in known]
        if bad or (not values and name != "--trace-dtypes"):
            raise ConfigError(
                f"{name}: {', '.join(bad) or 'empty'} unknown; choose from {', '.join(known)}"
            )
    counts = {"--max-tokens": settings.max_tokens, "--prompt-len": settings.prompt_len}
    counts["--trace-steps"] = settings.trace_steps
    counts["--repeats"] = settings.repeats
    counts |= {"--batch-sizes": min(settings.batch_sizes, default=0)}
    for name, value in counts.items():
        if value < 1:
            raise ConfigError(f"{name}: {value} is below 1; pass a positive integer")
    try:
        settings.out.mkdir(parents=True, exist_ok=True)
        probe = settings.out / ".gpu_proof_write_test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"--out {settings.out} cannot be written ({exc.strerror or exc}); "
            "pass a writable directory"
        ) from exc
    return device


def environment(device: torch.device) -> dict[str, object]:
    """Versions and the device, for summary.json."""
    import transformers

    env: dict[str, object] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "device": str(device),
        "host_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env |= {"gpu": props.name, "gpu_memory_bytes": int(props.total_memory)}
        env |= {"compute_capability": f"{props.major}.{props.minor}"}
    return env


@dataclass
class _Tables:
    timing: list[dict]
    lossless: list[dict]
    kineto: list[dict]


def _label(mode: str, dtype: str, batch: int, graphs: str) -> str:
    return f"{mode}-{dtype}-b{batch}-{graphs}"


def _trace(settings, engine, prompts, key, tmp: Path) -> dict[str, object]:
    """Profile ``trace_steps`` decode steps, analyse the trace, write its launch tables."""
    label = _label(*key.values())
    raw = tmp / f"{label}.json"
    ran = eng.trace_decode(
        engine, prompts, settings.trace_steps, settings.trace_tokens, raw
    )
    row = {**key, "steps_requested": settings.trace_steps, "steps_run": ran}
    row["decode_step_ranges"] = eng.count_step_ranges(raw)
    try:
        analysis = analyze_kineto_trace(raw)
    except TraceParseError as exc:
        why = str(exc).splitlines()[0].replace(str(raw), "the trace")
        row |= tab.kineto_row(None, f"trtbench analyze kineto: {why}")
    else:
        row |= tab.kineto_row(analysis.summary)
        tables = [t for t in analysis.tables() if t[0] != "kernel_launches.csv"]
        write_trace_tables(tables, settings.out / "kineto" / label)
    if settings.keep_traces:
        target = settings.out / "kineto" / label / "trace.json.gz"
        target.parent.mkdir(parents=True, exist_ok=True)
        with raw.open("rb") as src, gzip.open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
    raw.unlink()
    return row


def _run_config(settings, models, prompts, key, device, sampler, tmp) -> tuple:
    """Build one engine, time it, trace it if asked; (timing row, outputs, kineto row)."""
    mode, dtype, batch, graphs = key.values()
    sampler.mark(f"run:{mode}:{dtype}:b{batch}:{graphs}")
    eng.reset_memory(device)
    allocated_before = (
        torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    )
    t0 = time.perf_counter()
    engine = models.engine(
        mode,
        max_batch_size=batch,
        max_seq_len=settings.max_seq_len,
        max_input_len=settings.prompt_len,
        cuda_graphs=graphs == "graphs",
    )
    built_s = time.perf_counter() - t0
    status = engine.cuda_graphs
    row = {**key, "graphs_reason": status.reason, "engine_build_s": built_s}
    if graphs == "graphs" and not status.available:
        return {**row, "graphs_status": tab.NA}, None, None
    row["graphs_status"] = "captured" if graphs == "graphs" else "eager"
    # Warm-up at this configuration's shape: every row, enough steps for every step shape.
    eng.time_decode(engine, prompts[:batch], WARMUP_TOKENS)
    runs = [
        eng.time_decode(engine, prompts[:batch], settings.max_tokens)
        for _ in range(settings.repeats)
    ]
    run = runs[0]
    row |= tab.repeated_timing_row(
        [
            tab.timing_row(
                r.rows, r.step_ns, r.step_tokens, batch, r.first_iteration_ns
            )
            for r in runs
        ]
    )
    row["clock"] = run.clock
    row |= {
        "param_bytes": models.param_bytes(mode),
        "kv_cache_bytes": eng.kv_cache_bytes(engine),
    }
    memory = eng.torch_memory(device)
    if memory is not None:
        # Every dtype's models stay loaded across configurations: the peak over this
        # configuration alone is its increase over what was allocated at its reset, plus
        # the weights its mode uses (so modes differ by their own models, not all loaded).
        row |= memory
        row["mode_peak_bytes"] = (
            memory["torch_max_allocated_bytes"] - allocated_before + row["param_bytes"]
        )
    trace = None
    if dtype in settings.trace_dtypes:
        sampler.mark(f"trace:{mode}:{dtype}:b{batch}:{graphs}")
        try:
            trace = _trace(settings, engine, prompts[:batch], key, tmp)
        except Exception as exc:  # noqa: BLE001 - the timing stands; the trace says why
            logger.exception("tracing %s failed", _label(*key.values()))
            trace = {**key, "steps_requested": settings.trace_steps}
            trace |= {"analysis_status": "error", "analysis_reason": _why(exc)}
    engine.close()
    return row, run.outputs, trace


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"


def _lossless_rows(outputs, models, prompts, dtype, batch, graphs) -> list[dict]:
    """Each speculative mode against the baseline (same config); graphs baseline against
    the eager baseline."""
    rows = []
    base = outputs.get(("baseline", graphs))

    def gap_at(request: int, index: int) -> tuple[float, float]:
        return eng.top2_gap(models.target, prompts[request], base[request][:index])

    pairs = [
        (m, graphs, "baseline") for m, g in outputs if g == graphs and m != "baseline"
    ]
    both = ("baseline", "eager") in outputs and ("baseline", "graphs") in outputs
    if graphs == "graphs" and both:
        pairs.append(("baseline", "graphs", "baseline eager"))
    for mode, g, ref_name in pairs:
        ref = outputs[("baseline", "eager")] if ref_name == "baseline eager" else base
        if ref is None:
            continue
        found = tab.compare_outputs(ref, outputs[(mode, g)], dtype, gap_at)
        rows.append(
            {
                **tab.config_key(mode, dtype, batch, g),
                "compared_to": ref_name,
                **asdict(found),
                "lossless": found.lossless,
            }
        )
    return rows


def _write_tables(out: Path, tables: _Tables) -> tuple[pd.DataFrame, ...]:
    """Write the three measurement CSVs (again after each batch size); return them."""
    timing = tab.typed_frame(tables.timing, tab.TIMING_SCHEMA)
    timing = tab.with_graph_flags(tab.with_speedups(timing))
    lossless = tab.typed_frame(tables.lossless, tab.LOSSLESS_SCHEMA)
    kineto = tab.typed_frame(tables.kineto, tab.KINETO_SCHEMA)
    write_csv(timing, out / "decode_timing.csv", tab.TIMING_SCHEMA)
    write_csv(lossless, out / "lossless.csv", tab.LOSSLESS_SCHEMA)
    write_csv(kineto, out / "kineto.csv", tab.KINETO_SCHEMA)
    return timing, lossless, kineto


def _measure(settings, device, dirs, sampler, tables: _Tables) -> None:
    """Every configuration, dtype by dtype (models loaded once per dtype)."""
    with tempfile.TemporaryDirectory(prefix="gpu_proof_") as tmp:
        for dtype in settings.dtypes:
            models = eng.load_models(dirs, dtype, device)
            prompts = eng.proof_prompts(
                models.tokenizer, max(settings.batch_sizes), settings.prompt_len
            )
            for batch in settings.batch_sizes:
                outputs: dict[tuple[str, str], list[list[int]]] = {}
                for graphs in GRAPH_SETTINGS:
                    for mode in settings.modes:
                        key = tab.config_key(mode, dtype, batch, graphs)
                        logger.info("measuring %s", _label(*key.values()))
                        try:
                            row, out, trace = _run_config(
                                settings,
                                models,
                                prompts,
                                key,
                                device,
                                sampler,
                                Path(tmp),
                            )
                        except Exception as exc:  # noqa: BLE001 - recorded, next config
                            logger.exception(
                                "measuring %s failed", _label(*key.values())
                            )
                            row = {**key, "graphs_status": "error"}
                            row |= {"graphs_reason": _why(exc)}
                            out = trace = None
                        tables.timing.append(row)
                        if out is not None:
                            outputs[(mode, graphs)] = out
                        if trace is not None:
                            tables.kineto.append(trace)
                        gc.collect()
                    rows = _lossless_rows(
                        outputs, models, prompts, dtype, batch, graphs
                    )
                    tables.lossless.extend(rows)
                _write_tables(settings.out, tables)  # partial results survive a kill
            del models
            gc.collect()
            eng.reset_memory(device)


class _NoSampler:
    """Stands in for the in-process NVML sampler when ``memory_interval_ms`` is 0: NVML is
    then sampled by another process (``scripts/gpu_suite.sh`` runs ``nvidia-smi``), not by
    a thread of the measured one."""

    def __enter__(self) -> _NoSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def mark(self, phase: str) -> None:
        """No samples, no phases."""

    def frame(self) -> pd.DataFrame:
        return memory_frame([])

    def info(self) -> dict[str, object]:
        return {
            "source": "off",
            "unavailable_reason": "in-process sampler off (--memory-interval-ms 0): NVML "
            "sampled by another process (gpu_suite.sh: nvml-proof.csv)",
            "interval_ms": 0.0,
            "samples": 0,
        }


def _sampler(settings: ProofSettings):
    if settings.memory_interval_ms <= 0:
        return _NoSampler()
    return MemorySampler(
        os.getpid(),
        variant="gpu_proof",
        interval_ms=settings.memory_interval_ms,
        phase="load",
        warn_unavailable=False,
    )


def run_gpu_proof(settings: ProofSettings) -> dict[str, object]:
    """Measure everything (module docstring) and write it under ``settings.out``.

    Returns:
        The contents of ``summary.json`` (``table`` holds the printed table).

    Raises:
        ConfigError: bad settings (:func:`check_settings`), carried models incomplete.
        BuildError: the tiny models cannot be made or loaded.
    """
    started = time.perf_counter()
    device = check_settings(settings)
    dirs = eng.model_dirs(settings.models)
    tables = _Tables([], [], [])
    with _sampler(settings) as sampler:
        _measure(settings, device, dirs, sampler, tables)
        sampler.mark("done")
    out = settings.out
    timing, lossless, kineto = _write_tables(out, tables)
    memory = sampler.frame()
    breakdown = breakdown_frame(dirs, settings.modes, settings.dtypes, memory)
    write_memory_csv(memory, out / "memory.csv")
    write_memory_breakdown_csv(breakdown, out / "memory_breakdown.csv")
    table = tab.render_table(timing, lossless, kineto)
    (out / "table.txt").write_text(table + "\n")
    summary = build_summary(
        settings,
        device,
        environment(device),
        timing,
        lossless,
        kineto,
        sampler.info(),
        time.perf_counter() - started,
    )
    write_json_atomic(out / "summary.json", summary)
    return {**summary, "table": table}
