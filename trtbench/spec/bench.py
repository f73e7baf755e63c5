"""The bench spec: a YAML file validated with pydantic.

Shape (see ``examples/tiny-cpu.yaml``)::

    name: tiny-cpu
    backend: reference            # or trtllm, trtllm-pytorch (spec_llmapi.py); per variant too
    models: {target: DIR, draft: DIR, medusa: DIR}
    variants:
      - {name: baseline, mode: baseline}
      - {name: draft-k4, mode: draft_target, max_draft_len: 4}
      - {name: medusa, mode: medusa, medusa_choices: [[0], [0, 0], [1]]}
    deploy:   {...}               # DeploySpec
    loadtest: {...}               # LoadtestSpec
    profile:  {...}               # ProfileSpec
    cluster:  {...}               # ClusterSpec (spec/cluster.py): local, or Slurm shards

Paths may use ``$VAR`` / ``${VAR:-default}``; relative paths resolve against the spec file.
Errors raise :class:`trtbench.core.errors.ConfigError` naming the field (``variants[1].max_draft_len``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from trtbench.core import methods, stacks
from trtbench.core.errors import ConfigError
from trtbench.core.paths import expand_vars
from trtbench.core.validation_errors import format_validation_error
from trtbench.spec.cluster import ClusterSpec
from trtbench.spec.datasets import DATASET_PATH_KEYS, DatasetsField
from trtbench.spec.design import AUTO_ROUNDS, CoResidentField, DesignFields
from trtbench.spec.kv import KvCacheVariantFields
from trtbench.spec.llmapi import (
    LLMAPI_PATH_KEYS,
    Backend,
    LlmApiVariantFields,
    Mode,
    check_llmapi_mode_fields,
    variant_backend_problem,
)
from trtbench.spec.report import ReportFields
from trtbench.spec.serving import (
    SERVING_PATH_KEYS,
    ServingVariantFields,
    TrtllmServeDeployFields,
    VllmDeployFields,
    trtllm_serve_problem,
)
from trtbench.spec.speculation import MethodVariantFields, NgramVariantFields

DType = Literal["auto", "float32", "float16", "bfloat16"]
Choices = list[list[Annotated[int, Field(ge=0)]]]

DEFAULT_DRAFT_LEN = 4
DEFAULT_MEDUSA_TREE = "mc_sim_7b_63"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ModelsSpec(_Strict):
    """Model directories (Hugging Face ``save_pretrained`` layout; Medusa: FasterDecoding layout)."""

    target: Path
    draft: Path | None = None
    medusa: Path | None = None


class VariantSpec(
    LlmApiVariantFields,
    ServingVariantFields,
    NgramVariantFields,
    KvCacheVariantFields,
    MethodVariantFields,  # type: ignore[misc, valid-type]
):
    """One engine to build and serve (LLM-API fields: :class:`LlmApiVariantFields`; n-gram
    window and ``speculation``: :mod:`trtbench.spec.speculation`; KV budget:
    :mod:`trtbench.spec.kv`).

    ``max_draft_len``: draft tokens per step K for draft_target, ngram and eagle3 (default 4);
    for medusa the number of tree nodes the engine accepts (default: the tree's node count).
    eagle3 takes its checkpoint from ``speculative_model`` on every backend.
    ``medusa_choices``: a named tree (``mc_sim_7b_63``…) or a list of root paths.
    ``draft_acceptance`` (draft_target): ``tokens`` accepts draft tokens by token equality;
    ``logits`` compares draft and target logits, so TensorRT-LLM builds both engines with
    generation logits (``gather_generation_logits``).
    """

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    mode: Mode
    backend: Backend | None = None
    max_draft_len: int | None = Field(default=None, ge=1, le=1024)
    medusa_choices: str | Choices | None = None
    cuda_graphs: bool = False
    dtype: DType = "auto"
    quantization: Literal["none", "fp8"] = "none"
    tp_size: int = Field(default=1, ge=1)
    pp_size: int = Field(default=1, ge=1)
    max_batch_size: int = Field(default=8, ge=1)
    max_beam_width: int = Field(default=1, ge=1)
    max_input_len: int = Field(default=1024, ge=1)
    max_seq_len: int = Field(default=2048, ge=2)
    max_num_tokens: int | None = Field(default=None, ge=1)
    draft_acceptance: Literal["tokens", "logits"] = "tokens"

    @model_validator(mode="after")
    def _check_mode_fields(self) -> VariantSpec:
        if self.max_seq_len <= self.max_input_len:
            raise ValueError("max_seq_len must be larger than max_input_len")
        check_llmapi_mode_fields(self)
        return self

    @property
    def draft_len(self) -> int:
        """K for draft_target, ngram and eagle3 (``max_draft_len`` or 4)."""
        return self.max_draft_len or DEFAULT_DRAFT_LEN

    @property
    def tree(self) -> str | Choices:
        """The Medusa tree as given (name or list), defaulting to mc_sim_7b_63."""
        return (
            self.medusa_choices
            if self.medusa_choices is not None
            else DEFAULT_MEDUSA_TREE
        )


class DeploySpec(VllmDeployFields, TrtllmServeDeployFields, CoResidentField, _Strict):
    """How each variant is served by Triton.

    ``instance_count``: instances of each Python-backend model (the reference model,
    pre/postprocessing). ``kv_cache_free_gpu_mem_fraction`` is split evenly between target and
    draft for draft_target. ``cuda_graph_cache_size``: graphs kept by TensorRT-LLM when the
    variant asks for CUDA graphs (default: the variant's max_batch_size). ``reference_device``:
    where the reference engine runs (``auto``: CUDA when available). ``mpirun``: the launcher
    for TP×PP > 1 (NGC image). ``bind_address``: the IP tritonserver listens on (127.0.0.1).
    vLLM's fields: :class:`~trtbench.spec.serving.VllmDeployFields`; trtllm-serve's
    (``trtllm_serve``): :class:`~trtbench.spec.serving.TrtllmServeDeployFields`.
    """

    instance_count: int = Field(default=1, ge=1)
    grpc_port: int | None = Field(default=None, ge=1, le=65535)
    http_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    ready_timeout_s: float = Field(default=300.0, gt=0)
    tritonserver: Path | None = None
    kv_cache_free_gpu_mem_fraction: float = Field(default=0.9, gt=0, le=1)
    enable_kv_cache_reuse: bool = True
    gpu_device_ids: list[int] | None = None
    cuda_graph_cache_size: int | None = Field(default=None, ge=0)
    reference_device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    mpirun: str = "mpirun"
    bind_address: str = "127.0.0.1"
    # Who runs Triton's llmapi model for trtllm-pytorch variants; its model.py dir (tensorrt_llm).
    llmapi_runtime: Literal["tensorrt_llm", "reference"] = "tensorrt_llm"
    llmapi_model_dir: Path | None = None

    @field_validator("bind_address")
    @classmethod
    def _ip_literal(cls, value: str) -> str:
        return str(ipaddress.ip_address(value))

    @model_validator(mode="after")
    def _distinct_ports(self) -> DeploySpec:
        ports = [p for p in (self.grpc_port, self.http_port, self.metrics_port) if p]
        if len(set(ports)) < len(ports):
            raise ValueError(
                f"grpc_port, http_port and metrics_port must differ, got {self.grpc_port}, {self.http_port}, {self.metrics_port}"
            )
        return self


INT32_MAX = 2**31 - 1


class LoadtestSpec(DesignFields, DatasetsField, _Strict):
    """The request stream sent to every variant, tier by tier.

    Tiers (each listed once): ``request_rate`` (open loop, requests/s, ``arrival`` process
    with ``burstiness``) when given, else ``concurrency`` (closed loop). Each tier sends
    ``requests_per_tier`` requests (default 32) or runs for ``duration_s`` — not both.
    ``max_concurrency`` caps the requests in flight of a request-rate tier (each waits
    for a slot at its scheduled time; the wait is the client queue time).
    ``ramp_up_s`` spreads the first requests of a closed-loop tier over that many seconds.
    ``workers`` client processes share each tier (at most the smallest concurrency).
    Warmup requests go once per server, before the first tier, and are not recorded.
    Prompts: ``dataset`` (trtllm-bench JSONL), ``datasets`` (sources in several formats
    mixed by weight, :mod:`trtbench.spec.datasets`) or synthetic lengths drawn with
    ``seed``.
    ``fixed_output_len`` sends min tokens = max tokens. SLOs (ms, upper bounds) give goodput.
    ``repeats`` (or ``rounds``) runs every tier that many times, in rounds of the run's
    ``design`` (:mod:`trtbench.spec.design`: every variant runs every tier once per round,
    in a shuffled order; the summary gets the mean and 95 % interval over rounds);
    ``warmup_s`` leaves the completions of each
    pass's first seconds out of the statistics (the start burst).
    """

    concurrency: list[Annotated[int, Field(ge=1)]] = Field([1, 4, 8], min_length=1)
    request_rate: list[Annotated[float, Field(gt=0)]] | None = None
    max_concurrency: int | None = Field(default=None, ge=1)
    arrival: Literal["constant", "poisson", "gamma"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0)
    requests_per_tier: int | None = Field(default=None, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    ramp_up_s: float = Field(default=0.0, ge=0)
    workers: int = Field(default=1, ge=1)
    warmup_requests: int = Field(default=2, ge=0)
    input_len_mean: int = Field(default=64, ge=1, le=INT32_MAX)
    input_len_std: float = Field(default=0.0, ge=0)
    output_len_mean: int = Field(default=64, ge=1, le=INT32_MAX)  # sent as INT32
    output_len_std: float = Field(default=0.0, ge=0)
    fixed_output_len: bool = True
    dataset: Path | None = None
    seed: int = 0
    request_timeout_s: float = Field(default=120.0, gt=0)
    slo_ttft_ms: float | None = Field(default=None, gt=0)
    slo_tpot_ms: float | None = Field(default=None, gt=0)
    slo_e2e_ms: float | None = Field(default=None, gt=0)
    repeats: int = Field(
        default=1, ge=1, validation_alias=AliasChoices("repeats", "rounds")
    )
    warmup_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _count_or_duration(self) -> LoadtestSpec:
        if self.requests_per_tier is not None and self.duration_s is not None:
            raise ValueError("give requests_per_tier or duration_s, not both")
        return self

    @model_validator(mode="after")
    def _open_loop_cap(self) -> LoadtestSpec:
        if self.max_concurrency is not None and not self.request_rate:
            raise ValueError(
                "max_concurrency caps an open loop: give request_rate too (a closed "
                "loop's size is concurrency)"
            )
        if self.request_rate and "concurrency" in self.model_fields_set:
            raise ValueError(
                "concurrency and request_rate are two kinds of tiers; with request_rate "
                "use max_concurrency to cap the requests in flight"
            )
        return self

    @field_validator("concurrency", "request_rate")
    @classmethod
    def _each_tier_once(cls, tiers: list | None) -> list | None:
        keys = [t if isinstance(t, int) else f"{t:g}" for t in tiers or []]
        if twice := next((k for i, k in enumerate(keys) if k in keys[:i]), None):
            raise ValueError(f"{twice} is listed twice; give each tier once")
        return tiers

    @property
    def tier_requests(self) -> int | None:
        """Requests per tier: the given count, 32 by default, None with ``duration_s``."""
        return None if self.duration_s is not None else self.requests_per_tier or 32

    @property
    def slos(self) -> dict[str, float]:
        """``{"ttft_ms": …, "tpot_ms": …, "e2e_ms": …}`` for the SLOs that are set."""
        slos = {k: getattr(self, f"slo_{k}") for k in ("ttft_ms", "tpot_ms", "e2e_ms")}
        return {k: v for k, v in slos.items() if v is not None}


class ProfileSpec(_Strict):
    """Profiling during ``trtbench run``.

    ``nsys``: run each variant's server under an Nsight Systems session and record one tier,
    ``nsys_tier`` (0-based position in the tier list; default the first), into
    ``RUN_DIR/traces/<variant>/`` with its launch-overhead CSVs (``trtbench.pipeline.tier_capture``).
    """

    memory_interval_ms: float = Field(default=100.0, gt=0)
    nsys: bool = False
    nsys_tier: int | None = None
    scrape_metrics: bool = True
    metrics_interval_ms: float = Field(default=1000.0, gt=0)


class BenchSpec(ReportFields, _Strict):
    """A whole benchmark: models, variants and how to deploy, load and profile them."""

    name: str = Field(default="bench", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    backend: Backend = "reference"
    trtllm_version: str | None = Field(default=None, pattern=r"^\d+\.\d+\.\d+\S*$")
    models: ModelsSpec
    variants: list[VariantSpec] = Field(min_length=1)
    deploy: DeploySpec = Field(default_factory=DeploySpec)
    loadtest: LoadtestSpec = Field(default_factory=LoadtestSpec)
    profile: ProfileSpec = Field(default_factory=ProfileSpec)
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)

    @field_validator("variants")
    @classmethod
    def _unique_names(cls, variants: list[VariantSpec]) -> list[VariantSpec]:
        seen: set[str] = set()
        for v in variants:
            if v.name in seen:
                raise ValueError(f"variant name {v.name!r} is used twice")
            seen.add(v.name)
        return variants

    @model_validator(mode="after")
    def _check_models(self) -> BenchSpec:
        for i, v in enumerate(self.variants):
            where = f"variants[{i}]"  # a vLLM-served variant has no trtbench backend
            backend = self.backend_of(v)
            if problem := trtllm_serve_problem(v.server, backend, where):
                raise ValueError(problem)
            if not stacks.server(v.server).own_engine and (
                problem := variant_backend_problem(v, backend, where)
            ):
                raise ValueError(problem)
        modes = {v.mode for v in self.variants if v.speculative_model is None}
        for method in methods.METHODS.values():  # a drafter's default directory
            if method.name in modes and method.models_dir is not None:
                name, what = method.models_dir
                if getattr(self.models, name) is None:
                    raise ValueError(
                        f"a {method.name} variant needs models.{name} ({what})"
                    )
        return self

    def backend_of(self, variant: VariantSpec) -> str:
        """The backend of ``variant``: its own ``backend``, else the spec's."""
        return variant.backend or self.backend

    def variant(self, name: str) -> VariantSpec:
        """Return the variant called ``name``.

        Raises:
            ConfigError: no such variant (the message lists the known names).
        """
        for v in self.variants:
            if v.name == name:
                return v
        known = ", ".join(v.name for v in self.variants)
        raise ConfigError(f"unknown variant {name!r}; the spec has: {known}")

    def select(self, names: tuple[str, ...] | list[str] = ()) -> list[VariantSpec]:
        """The variants named (in spec order), or all when ``names`` is empty."""
        wanted = [self.variant(n) for n in names]
        return [v for v in self.variants if not names or v in wanted]


PATH_KEYS = {
    "models",
    "tritonserver",
    "dataset",
    *DATASET_PATH_KEYS,
    *LLMAPI_PATH_KEYS,
    *SERVING_PATH_KEYS,
}


def resolve_paths(
    data: object, base: Path, keys: set[str], in_paths: bool = False
) -> object:
    """``data`` (a parsed spec) with env vars expanded and relative paths made absolute
    (against ``base``) in every string under one of ``keys`` (pure apart from the
    environment).

    Raises:
        ConfigError: an environment variable that is not set (names it and the fix).
    """
    if isinstance(data, dict):
        return {
            k: resolve_paths(v, base, keys, in_paths or k in keys)
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [resolve_paths(v, base, keys, in_paths) for v in data]
    if in_paths and isinstance(data, str):
        try:
            text = expand_vars(data)
        except KeyError as exc:
            raise ConfigError(
                f"environment variable {exc.args[0]} in {data!r} is not set; set it or "
                f"write ${{{exc.args[0]}:-default}}"
            ) from None
        path = Path(text).expanduser()
        return str(path if path.is_absolute() else (base / path).resolve())
    return data


def override_loadtest(data: dict, fields: Mapping[str, object]) -> dict:
    """``data`` (a parsed spec) with ``fields`` set in its ``loadtest`` section, as if the
    file had said so (validated afterwards like any spec).

    ``rounds`` replaces either spelling of the file's rounds (``rounds`` / ``repeats``), and
    a fixed number of rounds drops the file's ``budget`` (it bounds ``rounds: auto`` only).
    """
    loadtest = dict(data.get("loadtest") or {})
    if "rounds" in fields:
        loadtest.pop("repeats", None)
        if str(fields["rounds"]).strip().lower() != AUTO_ROUNDS:
            loadtest.pop("budget", None)
    return {**data, "loadtest": {**loadtest, **fields}}


def parse_spec(
    text: str,
    source: str = "<spec>",
    base_dir: Path | None = None,
    loadtest: Mapping[str, object] | None = None,
) -> BenchSpec:
    """Parse and validate spec YAML text.

    Args:
        text: the YAML.
        source: names the spec in messages (its path).
        base_dir: relative paths resolve against it (default: the working directory).
        loadtest: ``loadtest`` fields that replace the file's (the CLI's ``--concurrency`` /
            ``--rounds``; :func:`override_loadtest`), validated with the rest.

    Raises:
        ConfigError: YAML syntax error (with its line) or an invalid field (named).
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{source}:{where}: YAML syntax error: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: a bench spec is a YAML mapping with models and variants"
        )
    data = resolve_paths(data, base_dir or Path.cwd(), PATH_KEYS)
    if loadtest:
        data = override_loadtest(data, loadtest)
    try:
        return BenchSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source, BenchSpec)) from None


def load_spec(
    path: Path, loadtest: Mapping[str, object] | None = None, given: str = ""
) -> BenchSpec:
    """Read and validate the spec at ``path``; relative paths inside resolve against its folder.

    Args:
        path: the spec file.
        loadtest: ``loadtest`` fields that replace the file's (see :func:`parse_spec`).
        given: the options they came from, named in messages after the file
            (``spec.yaml with --rounds x: loadtest.rounds: …``).

    Raises:
        ConfigError: missing file, YAML syntax error or an invalid field.
    """
    if not path.is_file():
        raise ConfigError(
            f"spec file {path} does not exist; pass the path to a bench spec YAML"
        )
    return parse_spec(
        path.read_text(),
        source=f"{path} with {given}" if given else str(path),
        base_dir=path.parent.resolve(),
        loadtest=loadtest,
    )
