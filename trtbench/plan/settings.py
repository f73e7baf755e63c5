"""``trtbench plan``'s options → :class:`PlanInputs`.

:class:`PlanSettings` holds the raw options (validated by pydantic at the CLI boundary);
:func:`plan_inputs` resolves models, GPU, tree and accuracies, parallelism and the terms
beyond the roofline (``overheads``). ``plan_run.run_plan`` predicts and fits to a run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, create_model

from trtbench.builders.medusa_tree import per_rank_accuracies, resolve_choices
from trtbench.core.errors import ConfigError
from trtbench.plan.chain_kinds import chain_fields, chain_methods, given_options
from trtbench.plan.chain_modes import (
    ChainSetup,
    option_flag,
    parse_rates,
    with_published_length,
)
from trtbench.plan.engines import (
    DEFAULT_ENGINE,
    EngineTerms,
    engine_terms,
    get_engine,
)
from trtbench.plan.gpus import GpuSpec, get_gpu
from trtbench.plan.model_shapes import ModelShape, resolve_model
from trtbench.plan.overheads import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_GRAPH_LAUNCH_US,
    DEFAULT_LAUNCH_US,
    DEFAULT_NODE_US,
    PURE_ROOFLINE,
    LaunchCost,
    Machinery,
    launch_from_steps,
)
from trtbench.plan.parallel import Parallelism
from trtbench.plan.planner import (
    DraftSetup,
    MedusaSetup,
    PlanInputs,
    check_medusa,
)
from trtbench.plan.speculation import greedy_medusa_tree

GREEDY = "greedy"
T = TypeVar("T")

# Cumulative top-1..top-5 training accuracies of Medusa-1 heads 1..5 (FasterDecoding/Medusa
# assets/medusa_acc.csv, rows 7b/13b/33b), 4 decimals.
MEDUSA_ACCURACY_PRESETS: dict[str, tuple[tuple[float, ...], ...]] = {
    "vicuna-7b": (
        (0.5604, 0.6717, 0.7271, 0.7599, 0.7799),
        (0.3164, 0.4236, 0.4851, 0.5282, 0.5625),
        (0.2010, 0.2879, 0.3475, 0.3834, 0.4169),
        (0.1474, 0.2250, 0.2737, 0.3109, 0.3397),
        (0.1175, 0.1866, 0.2346, 0.2721, 0.2998),
    ),
    "vicuna-13b": (
        (0.5939, 0.7053, 0.7578, 0.7925, 0.8161),
        (0.3397, 0.4400, 0.5068, 0.5465, 0.5803),
        (0.2161, 0.3085, 0.3612, 0.4030, 0.4364),
        (0.1500, 0.2317, 0.2878, 0.3234, 0.3541),
        (0.1223, 0.1957, 0.2434, 0.2791, 0.3070),
    ),
    "vicuna-33b": (
        (0.6046, 0.7162, 0.7649, 0.7983, 0.8223),
        (0.3558, 0.4690, 0.5287, 0.5692, 0.5961),
        (0.2246, 0.3197, 0.3785, 0.4210, 0.4462),
        (0.1596, 0.2488, 0.3073, 0.3480, 0.3755),
        (0.1370, 0.2067, 0.2621, 0.2984, 0.3258),
    ),
}

DType = Literal["float16", "bfloat16", "fp8", "fp4", "int4"]
KvDType = Literal["auto", "float16", "bfloat16", "fp8"]


class _PlanOptions(BaseModel):
    """The options of ``trtbench plan`` before the chain methods' (:class:`PlanSettings`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    gpu: str = "h100-sxm"
    dtype: DType = "bfloat16"
    kv_dtype: KvDType = "auto"
    draft: str | None = None
    draft_len: int = Field(default=4, ge=1, le=64)
    alpha: float = Field(default=0.8, ge=0.0, le=1.0)
    medusa_accuracies: str | None = None
    medusa_cumulative: bool = False
    medusa_tree: str = GREEDY
    medusa_nodes: int = Field(default=63, ge=1, le=1024)
    medusa_heads: int | None = Field(default=None, ge=1)
    medusa_layers: int = Field(default=1, ge=1)
    concurrency: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    input_len: int = Field(default=1024, ge=1)
    output_len: int = Field(default=256, ge=1)
    memory_fraction: float = Field(default=0.9, gt=0.0, le=1.0)
    step_overhead_ms: float = Field(default=0.0, ge=0.0)
    tp: int | None = Field(default=None, ge=1)
    pp: int = Field(default=1, ge=1)
    gpus: int | None = Field(default=None, ge=1)
    link_gbs: float | None = Field(default=None, gt=0.0)
    allreduce_latency_us: float = Field(default=10.0, ge=0.0)
    overhead_gib: float = Field(default=0.0, ge=0.0)


_WithChains = create_model("_WithChains", __base__=_PlanOptions, **chain_fields())


class PlanSettings(_WithChains):
    """Options of ``trtbench plan`` (see the command's help for each).

    After ``overhead_gib`` come each chain method's, in the methods' order
    (``chain_kinds.chain_fields``): ``MODE``, its rates (None: not planned), and its kind's
    ``MODE_NAME`` options (``eagle3``, ``eagle3_layers``, …, ``ngram_lookup_us``,
    ``suffix``, ``suffix_lookup_us``); then ``engine`` and the rest.
    """

    engine: str = DEFAULT_ENGINE
    cuda_graphs: bool | None = None
    kernels_per_layer: float | None = Field(default=None, ge=0.0)
    launch_us: float = Field(default=DEFAULT_LAUNCH_US, ge=0.0)
    graph_launch_us: float = Field(default=DEFAULT_GRAPH_LAUNCH_US, ge=0.0)
    graph_node_us: float = Field(default=DEFAULT_NODE_US, ge=0.0)
    machinery_pass_us: float | None = Field(default=None, ge=0.0)
    machinery_token_us: float | None = Field(default=None, ge=0.0)
    sequence_us: float | None = Field(default=None, ge=0.0)
    compute_efficiency: float | None = Field(default=None, gt=0.0, le=1.0)
    kernel_us: float | None = Field(default=None, ge=0.0)
    bandwidth_efficiency: float = Field(
        default=DEFAULT_BANDWIDTH_EFFICIENCY, gt=0.0, le=1.0
    )
    qps: tuple[float, ...] = ()
    no_overheads: bool = False
    draft_tp: int | None = Field(default=None, ge=1)
    from_trace: Path | None = None
    calibration: Path | None = None
    from_run: Path | None = None
    out: Path | None = None


def parse_accuracies(text: str, cumulative: bool) -> tuple[tuple[float, ...], ...]:
    """Per-head per-rank accuracies from a preset name or ``"a,b;c,d"`` (heads split by ``;``).

    Presets (:data:`MEDUSA_ACCURACY_PRESETS`) and ``cumulative=True`` tables hold top-k
    values and are converted per rank (``medusa_tree.per_rank_accuracies``).

    Raises:
        ConfigError: an unknown preset or a value that is not a number.
    """
    key = text.strip().lower()
    if key in MEDUSA_ACCURACY_PRESETS:
        table, cumulative = MEDUSA_ACCURACY_PRESETS[key], True
    else:
        try:
            table = tuple(
                tuple(float(v) for v in head.split(",") if v.strip())
                for head in text.split(";")
                if head.strip()
            )
        except ValueError:
            raise ConfigError(
                f"--medusa-accuracies {text!r} is neither a preset "
                f"({', '.join(MEDUSA_ACCURACY_PRESETS)}) nor numbers like "
                "'0.56,0.11;0.32,0.11' (heads split by ';', ranks by ',')"
            ) from None
    rows = per_rank_accuracies(table) if cumulative else table
    return tuple(tuple(float(a) for a in row) for row in rows)


def resolve_option(flag: str, resolve: Callable[[], T]) -> T:
    """Run a resolver; a ConfigError it raises is prefixed with the option's flag."""
    try:
        return resolve()
    except ConfigError as exc:
        raise ConfigError(f"{flag}: {exc}") from None


def medusa_setup(settings: PlanSettings) -> MedusaSetup | None:
    """The Medusa part of a plan (None without accuracies).

    Raises:
        ConfigError: bad accuracies or tree, prefixed with the option at fault.
    """
    if settings.medusa_accuracies is None:
        return None
    acc = resolve_option(
        "--medusa-accuracies",
        lambda: parse_accuracies(
            settings.medusa_accuracies or "", settings.medusa_cumulative
        ),
    )
    if settings.medusa_heads is not None:
        acc = acc[: settings.medusa_heads]  # heads beyond the given count do not exist
    if settings.medusa_tree.strip().lower() == GREEDY:
        choices = greedy_medusa_tree(acc, settings.medusa_nodes)
    else:
        choices = resolve_option(
            "--medusa-tree", lambda: resolve_choices(settings.medusa_tree)
        )
    depth = max(len(c) for c in choices)
    heads = settings.medusa_heads or max(depth, len(acc))
    setup = MedusaSetup(heads, settings.medusa_layers, choices, acc)
    resolve_option("--medusa-tree", lambda: check_medusa(setup))
    return setup


def parallelism(settings: PlanSettings, gpu: GpuSpec) -> Parallelism:
    """``--tp`` / ``--pp`` / ``--gpus`` and the link figures (default: the GPU's link).

    ``--gpus N`` alone means ``tp = N / pp``.

    Raises:
        ConfigError: ``--gpus`` not equal to tp x pp, or not a multiple of ``--pp``.
    """
    tp, pp, gpus = settings.tp, settings.pp, settings.gpus
    if gpus is not None and tp is None:
        if gpus % pp:
            raise ConfigError(f"--gpus {gpus} is not a multiple of --pp {pp}")
        tp = gpus // pp
    tp = tp or 1
    if gpus is not None and tp * pp != gpus:
        raise ConfigError(
            f"--gpus {gpus} is not --tp {tp} x --pp {pp}; give one of them"
        )
    link = settings.link_gbs * 1e9 if settings.link_gbs else gpu.link_bytes_per_s
    return Parallelism(tp, pp, link, settings.allreduce_latency_us * 1e-6)


def chain_setups(settings: PlanSettings, target: ModelShape) -> tuple[ChainSetup, ...]:
    """The setups of the chain methods given rates (``--MODE``), in the methods' order, each
    built by its kind (``chain_kinds``).

    Raises:
        ConfigError: rates that do not parse, prefixed with the option, or a kind's option
            its kind refuses (an EAGLE tree shape without the method's rates).
    """
    out = []
    for method, kind in chain_methods():
        text: str | None = getattr(settings, method.name)
        given = given_options(method, kind, settings)
        if kind.check is not None:
            kind.check(method, given, text is not None)
        if text is None:
            continue
        rates = resolve_option(
            option_flag(method.name), partial(parse_rates, text, method.name)
        )
        chain = kind.build(method, target, rates, given)
        out.append(with_published_length(chain, text))
    return tuple(out)


def overheads(
    settings: PlanSettings,
    target: ModelShape,
    table: dict[str, EngineTerms] | None = None,
) -> dict[str, object]:
    """``launch``, ``machinery``, ``bandwidth_efficiency``, ``compute_efficiency`` and
    ``engine`` of :class:`PlanInputs`: none (full bandwidth and peak) with
    ``--no-overheads``; else the stack's (``--engine``: its launch mode and fitted terms,
    ``engines``; ``table``: the stacks' terms in place of ``engines.csv``), each overridden
    by its option when given, the launch cost by ``--from-trace``.

    Raises:
        ConfigError: an unknown ``--engine``.
    """
    engine = resolve_option("--engine", lambda: get_engine(settings.engine))
    if settings.no_overheads:
        return dict(PURE_ROOFLINE) | {"engine": engine.name}
    terms, _ = engine_terms(engine.name, table)
    graphs = (
        engine.cuda_graphs if settings.cuda_graphs is None else settings.cuda_graphs
    )
    per_layer = settings.kernels_per_layer
    launch = LaunchCost(
        cuda_graphs=graphs,
        kernels_per_layer=engine.kernels_per_layer if per_layer is None else per_layer,
        launch_us=settings.launch_us,
        graph_launch_us=settings.graph_launch_us,
        node_us=settings.graph_node_us,
    )
    if settings.from_trace is not None:
        launch = launch_from_steps(settings.from_trace, target.layers)
    floor = terms.kernel_us if settings.kernel_us is None else settings.kernel_us
    launch = replace(launch, kernel_us=floor)
    m = terms.machinery
    machinery = Machinery(
        m.pass_us if settings.machinery_pass_us is None else settings.machinery_pass_us,
        m.token_us
        if settings.machinery_token_us is None
        else settings.machinery_token_us,
        m.sequence_us if settings.sequence_us is None else settings.sequence_us,
    )
    mfu = settings.compute_efficiency
    return {
        "launch": launch,
        "machinery": machinery,
        "bandwidth_efficiency": settings.bandwidth_efficiency,
        "compute_efficiency": terms.compute_efficiency if mfu is None else mfu,
        "serial_share": terms.serial_share,
        "engine": engine.name,
    }


def plan_inputs(
    settings: PlanSettings, table: dict[str, EngineTerms] | None = None
) -> PlanInputs:
    """Resolve model, GPU, draft and Medusa options into :class:`PlanInputs` (``table``:
    the stacks' fitted terms, read from ``engines.csv`` when None).

    Raises:
        ConfigError: no ``--model``, or an option the resolvers reject (named in the
            message).
    """
    if settings.model is None:
        raise ConfigError(
            "--model is required to plan (a preset, a HF config.json or sizes); with "
            "--from-run alone only the fit to the run is shown"
        )
    draft = None
    if settings.draft is not None:
        shape = resolve_option("--draft", lambda: resolve_model(settings.draft or ""))
        draft = DraftSetup(shape, settings.draft_len, settings.alpha)
    target = resolve_option("--model", lambda: resolve_model(settings.model or ""))
    gpu = resolve_option("--gpu", lambda: get_gpu(settings.gpu))
    inputs = PlanInputs(
        target=target,
        gpu=gpu,
        input_len=settings.input_len,
        output_len=settings.output_len,
        concurrencies=tuple(settings.concurrency),
        dtype=settings.dtype,
        kv_dtype=settings.kv_dtype,
        draft=draft,
        medusa=medusa_setup(settings),
        memory_fraction=settings.memory_fraction,
        step_overhead_ms=settings.step_overhead_ms,
        chains=chain_setups(settings, target),
        parallel=parallelism(settings, gpu),
        overhead_bytes=settings.overhead_gib * 2**30,
        draft_tp=settings.draft_tp,
        **overheads(settings, target, table),
    )
    resolve_option("--dtype", lambda: inputs.peak_flops_per_s)
    return inputs
