"""The serving stack as a planner input (``trtbench plan --engine``): its launch mode and the
terms fitted on its own published rows.

Each stack runs the same roofline with its own:

* launch mode (not fitted; stated per stack below): CUDA graphs for TensorRT-LLM, vLLM,
  SGLang and gpt-fast's ``torch.compile(mode="reduce-overhead")``; eager launches of
  Hugging Face transformers' unfused ops for the research loops (Medusa's, EAGLE's);
* compute efficiency (share of the dense peak a compute-bound pass achieves) and speculation
  machinery (``overheads.Machinery``: per pass, per verified token per sequence, per
  sequence per step), fitted by ``anchors.fit_engine_terms`` on the stack's ``fit`` rows of
  ``trtbench/plan/data/anchors.csv`` and shipped in ``trtbench/plan/data/engines.csv``
  (``python scripts/score_planner.py --fit`` writes it; its ``fitted_on`` column names the
  rows each stack's terms came from).

A stack without fit rows has no line of its own there: it uses the ``default`` line, fitted
on every stack's fit rows together, and the plan says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from trtbench.core.data_files import read_csv_checked
from trtbench.core.errors import ConfigError
from trtbench.core.export import Column, write_csv
from trtbench.plan.overheads import DEFAULT_KERNELS_PER_LAYER, Machinery

ENGINES_CSV = Path(__file__).with_name("data") / "engines.csv"
DEFAULT_ENGINE = "default"
HF_EAGER_KERNELS_PER_LAYER = 40.0


@dataclass(frozen=True)
class Engine:
    """A serving stack's launch mode (what is not fitted).

    Attributes:
        name: ``--engine`` value.
        label: what it is.
        cuda_graphs: decode passes replayed as CUDA graphs by default.
        kernels_per_layer: kernels one decoder layer launches.
        launch_note: where the launch mode comes from.
    """

    name: str
    label: str
    cuda_graphs: bool = True
    kernels_per_layer: float = DEFAULT_KERNELS_PER_LAYER
    launch_note: str = "CUDA graphs for decode by default"


ENGINES: dict[str, Engine] = {
    e.name: e
    for e in (
        Engine(
            DEFAULT_ENGINE,
            "no stack named: every stack's fit rows together",
        ),
        Engine(
            "trtllm-pytorch",
            "TensorRT-LLM, PyTorch backend (trtllm-serve / LLM API, one-model spec. decoding)",
            launch_note="cuda_graph_config in the TensorRT-LLM docs",
        ),
        Engine(
            "trtllm-engine",
            "TensorRT-LLM, TensorRT engines (trtllm-build; Triton tensorrtllm / BLS)",
        ),
        Engine(
            "vllm",
            "vLLM V1 engine (0.8 and later)",
            launch_note="vLLM V1 captures decode in CUDA graphs (piecewise) by default",
        ),
        Engine(
            "vllm-v0",
            "vLLM V0 engine (2024; spec. decoding by batch expansion)",
        ),
        Engine(
            "sglang",
            "SGLang (EAGLE / MTP workers with CUDA graphs)",
            launch_note="SGLang captures decode and the draft loop in CUDA graphs",
        ),
        Engine(
            "hf-eager",
            "Hugging Face transformers loops of the research papers (Medusa, EAGLE)",
            cuda_graphs=False,
            kernels_per_layer=HF_EAGER_KERNELS_PER_LAYER,
            launch_note=(
                "eager: every op of transformers' Llama layer is its own launch "
                f"({HF_EAGER_KERNELS_PER_LAYER:g} per layer assumed: norms, projections, "
                "rotary, attention, residuals, MLP)"
            ),
        ),
        Engine(
            "gpt-fast",
            "pytorch-labs/gpt-fast (torch.compile, reduce-overhead: CUDA graphs)",
        ),
    )
}


@dataclass(frozen=True)
class EngineTerms:
    """The fitted terms of one stack (``engines.csv``).

    Attributes:
        engine: the stack (or ``default``).
        compute_efficiency: share of the dense peak a compute-bound pass achieves.
        machinery: per pass, per verified token, per sequence (µs).
        kernel_us: the shortest GPU time of one kernel (µs; ``overheads.LaunchCost``).
        serial_share: the share of the shorter of a pass's memory and FLOP times that does
            not overlap the longer (0: the roofline's max, 1: their sum).
        fitted_on: ids of the anchors.csv rows they were fitted to.
    """

    engine: str
    compute_efficiency: float
    machinery: Machinery
    kernel_us: float = 0.0
    fitted_on: tuple[str, ...] = ()
    serial_share: float = 0.0

    def describe(self) -> str:
        """One line: the values and the rows they come from."""
        m = self.machinery
        rows = (
            f"fitted on {len(self.fitted_on)} published row(s) of this stack "
            f"({', '.join(self.fitted_on)})"
            if self.engine != DEFAULT_ENGINE
            else f"fitted on every stack's {len(self.fitted_on)} fit rows together"
        )
        return (
            f"compute efficiency {self.compute_efficiency:.0%} ({self.serial_share:.0%} of "
            "the shorter of memory and FLOP time not overlapped), kernels of at least "
            f"{self.kernel_us:g} µs; speculation machinery {m.pass_us:g} µs per pass + "
            f"{m.token_us:g} µs per verified token per sequence; {m.sequence_us:g} µs per "
            f"sequence per step — {rows}"
        )


ENGINE_TERMS_SCHEMA: tuple[Column, ...] = (
    Column("engine", "serving stack (--engine) or default", kind="str"),
    Column("compute_efficiency", "share of the dense peak (0-1]", kind="float"),
    Column(
        "pass_us", "machinery per forward pass of a speculative step, µs", kind="float"
    ),
    Column("token_us", "machinery per verified token per sequence, µs", kind="float"),
    Column("sequence_us", "cost per sequence per step (any mode), µs", kind="float"),
    Column("kernel_us", "shortest GPU time of one kernel, µs", kind="float"),
    Column(
        "serial_share", "share of min(memory, FLOP time) not overlapped", kind="float"
    ),
    Column("fitted_on", "anchors.csv ids of the fit rows, space-separated", kind="str"),
)
"""Columns of ``trtbench/plan/data/engines.csv``."""


def read_engine_terms(path: Path = ENGINES_CSV) -> dict[str, EngineTerms]:
    """Every stack's fitted terms by name.

    Raises:
        DataFileError: the file's columns or values are wrong.
    """
    fix = "rewrite it with python scripts/score_planner.py --fit"
    table = read_csv_checked(path, ENGINE_TERMS_SCHEMA, fix=fix, keys=("engine",))
    return {
        str(r["engine"]): EngineTerms(
            str(r["engine"]),
            float(r["compute_efficiency"]),
            Machinery(
                float(r["pass_us"]), float(r["token_us"]), float(r["sequence_us"])
            ),
            float(r["kernel_us"]),
            tuple(str(r["fitted_on"]).split()) if pd.notna(r["fitted_on"]) else (),
            float(r["serial_share"]),
        )
        for _, r in table.iterrows()
    }


def write_engine_terms(terms: dict[str, EngineTerms], path: Path = ENGINES_CSV) -> Path:
    """Write ``terms`` as ``engines.csv`` (values rounded as shipped)."""
    rows = [
        {
            "engine": t.engine,
            "compute_efficiency": round(t.compute_efficiency, 3),
            "pass_us": round(t.machinery.pass_us, 1),
            "token_us": round(t.machinery.token_us, 2),
            "sequence_us": round(t.machinery.sequence_us, 2),
            "kernel_us": round(t.kernel_us, 2),
            "serial_share": round(t.serial_share, 3),
            "fitted_on": " ".join(t.fitted_on),
        }
        for t in terms.values()
    ]
    return write_csv(pd.DataFrame(rows), path, ENGINE_TERMS_SCHEMA)


def get_engine(name: str) -> Engine:
    """The stack named ``name``.

    Raises:
        ConfigError: an unknown name (the message lists the known ones).
    """
    key = name.strip().lower()
    if key not in ENGINES:
        raise ConfigError(f"unknown --engine {name!r}; use one of {', '.join(ENGINES)}")
    return ENGINES[key]


def engine_terms(
    name: str, table: dict[str, EngineTerms] | None = None
) -> tuple[EngineTerms, str]:
    """The terms a plan on stack ``name`` uses, and a line saying where they come from.

    Raises:
        ConfigError: an unknown stack.
    """
    engine = get_engine(name)
    table = read_engine_terms() if table is None else table
    if engine.name in table:
        terms = table[engine.name]
        return terms, f"engine {engine.name} ({engine.label}): {terms.describe()}"
    terms = table[DEFAULT_ENGINE]
    return terms, (
        f"engine {engine.name} ({engine.label}) has no published fit rows: it uses the "
        f"default terms, {terms.describe()}"
    )
