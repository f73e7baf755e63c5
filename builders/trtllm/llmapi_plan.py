"""A ``trtllm-pytorch`` variant as the keyword arguments of TensorRT-LLM's ``LLM(...)`` (pure).

:func:`llm_args_for` maps the variant onto the LLM-API arguments (names from
``tensorrt_llm/llmapi/llm_args.py``, checked against the contract of the chosen version by
``llmapi_contract.check_llm_args``); :func:`render_llm_call` and :func:`command_lines` print
the same arguments as Python and as ``trtllm-serve`` / ``trtllm-bench`` command lines.

Mapping (``speculative_config`` keys in this order, ``llm_api_options`` merged last)::

    baseline      no speculative_config
    draft_target  {decoding_type: DraftTarget, max_draft_len, speculative_model (models.draft)}
    eagle3        {decoding_type: Eagle3, max_draft_len, speculative_model}
    mtp           {decoding_type: MTP, num_nextn_predict_layers (target config.json)}
    ngram         {decoding_type: NGram, max_draft_len, max_matching_ngram_size (contract: 2)}
    + speculation.max_concurrency / draft_len_schedule, speculative_options
    cuda_graphs   true → cuda_graph_config {batch_sizes | max_batch_size, enable_padding};
                  false → cuda_graph_config: null (TensorRT-LLM's default turns graphs on)
    server: trtllm-serve  + enable_iter_perf_stats: true where the version's contract
                  lists it (:data:`COUNTER_OPTIONS`)
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trtbench.builders.trtllm.llmapi_contract import LlmApiContract, check_llm_args
from trtbench.builders.trtllm.llmapi_files import check_llm_api_yaml
from trtbench.core import methods, stacks
from trtbench.core.errors import ConfigError
from trtbench.core.methods import LLMAPI_DECODING_TYPES
from trtbench.spec.bench import BenchSpec, VariantSpec

DECODING_TYPES = LLMAPI_DECODING_TYPES  # mode → speculative_config.decoding_type
MTP_KEY = "num_nextn_predict_layers"  # DeepSeek-V3 config.json: MTP modules after the last layer
SERVE_PORT = 8000  # trtllm-serve's --port default (tensorrt_llm/commands/serve.py)
# What trtllm-serve's own speculative counters need (tensorrt_llm/llmapi/llm_args.py, False
# by default): enable_iter_perf_stats (TorchLlmArgs) fills GET /metrics with iteration stats
# (their specDecodingStats: drafts, accepted and verify steps). return_perf_metrics
# (BaseLlmArgs) is deliberately not set: it mounts GET /prometheus/metrics, whose speculative
# counters (per position; iteration totals) arrived after 1.2 (TensorRT-LLM PRs 12545, 12636),
# and its background collector drains the same iteration-stats queue, so GET /metrics then
# answers [] (aibrix issue 2004; TensorRT-LLM main buffers it since). On 1.3+ a user adds
# it with llm_api_options for the per-position counters (docs/servers.md).
COUNTER_OPTIONS: dict[str, bool] = {"enable_iter_perf_stats": True}


def mtp_layers(config: Mapping[str, Any] | None) -> int:
    """``num_nextn_predict_layers`` of a target ``config.json`` (0 when absent or not an int)."""
    value = (config or {}).get(MTP_KEY)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _speculative_config(
    spec: BenchSpec,
    v: VariantSpec,
    contract: LlmApiContract,
    target_config: Mapping[str, Any] | None,
    where: str,
) -> dict[str, Any]:
    method = methods.METHODS[v.mode]
    config: dict[str, Any] = {"decoding_type": DECODING_TYPES[v.mode]}
    if method.draft_length == MTP_KEY:
        have = mtp_layers(target_config)
        if have < 1:
            raise ConfigError(
                f"{where}.mode: mtp: model {spec.models.target} has no MTP layers "
                f"(config.json {MTP_KEY}); use a model with MTP modules (e.g. DeepSeek-V3) "
                "or another mode"
            )
        config[MTP_KEY] = v.num_nextn_predict_layers or have
    else:
        config["max_draft_len"] = v.draft_len
    if method.needs_draft_model:
        draft = v.speculative_model or spec.models.draft
        config["speculative_model"] = str(draft)
    if method.owns("max_matching_ngram_size"):
        default = contract.class_fields("NGramDecodingConfig").get(
            "max_matching_ngram_size", {}
        )
        config["max_matching_ngram_size"] = v.max_matching_ngram_size or default.get(
            "default", 2
        )
    spec_len = config.get(MTP_KEY, config.get("max_draft_len"))
    if v.speculation is not None:
        if v.speculation.max_concurrency is not None:
            config["max_concurrency"] = v.speculation.max_concurrency
        if v.speculation.draft_len_schedule is not None:
            schedule = dict(sorted(v.speculation.draft_len_schedule.items()))
            too_long = {b: n for b, n in schedule.items() if n > spec_len}
            if too_long:
                batch, n = next(iter(too_long.items()))
                raise ConfigError(
                    f"{where}.speculation.draft_len_schedule: {batch}: {n} is above the "
                    f"draft length {spec_len}; lower it"
                )
            config["draft_len_schedule"] = schedule
    config.update(v.speculative_options)
    return config


def _cuda_graph_config(v: VariantSpec) -> dict[str, Any] | None:
    if not v.cuda_graphs:
        return None
    if v.cuda_graph_batch_sizes:
        sizes: dict[str, Any] = {"batch_sizes": sorted(set(v.cuda_graph_batch_sizes))}
    else:
        sizes = {"max_batch_size": v.max_batch_size}
    return {**sizes, "enable_padding": v.cuda_graph_padding}


def counter_options(contract: LlmApiContract) -> tuple[dict[str, bool], list[str]]:
    """The :data:`COUNTER_OPTIONS` a ``server: trtllm-serve`` variant gets on ``contract``'s
    version: ``(the ones its contract lists, the names it does not)``. A name the contract
    lacks is not set (it could not be checked against that release); the build says so."""
    listed = contract.raw["llm_args"]
    have = {k: v for k, v in COUNTER_OPTIONS.items() if k in listed}
    return have, [k for k in COUNTER_OPTIONS if k not in listed]


def merge_options(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` merged in: nested mappings key by key, other values replaced."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_options(dict(out[key]), value)
        else:
            out[key] = value
    return out


def llm_args_for(
    spec: BenchSpec,
    variant: VariantSpec,
    contract: LlmApiContract,
    target_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The full ``LLM(**kwargs)`` of a trtllm-pytorch variant, checked against ``contract``.

    Args:
        spec: the bench spec (model dirs, deploy KV-cache settings).
        variant: one of ``spec.variants``.
        contract: the LLM-API contract of the TensorRT-LLM version targeted.
        target_config: the target's ``config.json`` (needed for mode mtp).

    Returns:
        ``{"model": target dir, "backend": "pytorch", "max_batch_size", ["max_num_tokens"],
        "max_seq_len", "tensor_parallel_size", "pipeline_parallel_size", "dtype",
        "disable_overlap_scheduler", "cuda_graph_config", "kv_cache_config",
        [the counter options of a trtllm-serve variant], ["speculative_config"],
        **llm_api_options}`` (plain data; YAML/JSON ready).

    Raises:
        ConfigError: mtp on a target without MTP layers, a draft_len_schedule above the
            draft length, or any key, type, range or decoding_type the contract refuses
            (naming the field and the version that has it).
    """
    where = f"variants[{spec.variants.index(variant)}]"
    args: dict[str, Any] = {
        "model": str(spec.models.target),
        "backend": "pytorch",
        "max_batch_size": variant.max_batch_size,
    }
    if variant.max_num_tokens is not None:
        args["max_num_tokens"] = variant.max_num_tokens
    args |= {
        "max_seq_len": variant.max_seq_len,
        "tensor_parallel_size": variant.tp_size,
        "pipeline_parallel_size": variant.pp_size,
        "dtype": variant.dtype,
        "disable_overlap_scheduler": not variant.overlap_scheduler,
        "cuda_graph_config": _cuda_graph_config(variant),
        "kv_cache_config": {
            "free_gpu_memory_fraction": spec.deploy.kv_cache_free_gpu_mem_fraction,
            "enable_block_reuse": spec.deploy.enable_kv_cache_reuse,
        },
    }
    if stacks.server(variant.server).llmapi_counters:
        args |= counter_options(contract)[0]
    if methods.METHODS[variant.mode].drafts:
        args["speculative_config"] = _speculative_config(
            spec, variant, contract, target_config, where
        )
    if variant.extra_llm_api_options is not None:
        args = _merge_file(args, variant, contract, where)
    args = merge_options(args, variant.llm_api_options)
    try:
        check_llm_args(args, contract)
    except (
        ConfigError
    ) as exc:  # name the variant: the key may come from any of its fields
        raise ConfigError(f"{where} (LLM arguments): {exc}") from None
    return args


def _merge_file(
    args: dict[str, Any], v: VariantSpec, contract: LlmApiContract, where: str
) -> dict[str, Any]:
    """``args`` with the variant's hand-written ``extra_llm_api_options`` YAML over them: each
    top-level key of the file replaces the variant's, as TensorRT-LLM builds each config object
    from the file's mapping. The file is checked on its own first (an unknown ``decoding_type``
    is exit 2); its ``speculative_config`` may tune the method but not switch it (``mode``)."""
    path = v.extra_llm_api_options
    options = check_llm_api_yaml(path, contract)
    for key in ("model", "backend"):
        if key in options and options[key] != args[key]:
            raise ConfigError(
                f"{where}.extra_llm_api_options: {path} sets {key}: {options[key]!r}; "
                f"trtbench sets {key} from the spec ({args[key]!r}); remove it from the file"
            )
    want = DECODING_TYPES.get(v.mode)
    got = (options.get("speculative_config") or {}).get("decoding_type", want)
    if "speculative_config" in options and got != want:
        raise ConfigError(
            f"{where}.extra_llm_api_options: {path} has speculative_config.decoding_type "
            f"{got!r} but the variant's mode {v.mode} means {want!r}; set the variant's mode "
            "or remove speculative_config from the file"
        )
    return {**args, **options}


def extra_options(args: Mapping[str, Any]) -> dict[str, Any]:
    """The ``extra_llm_api_options`` YAML form: the LLM kwargs without ``model``."""
    return {k: v for k, v in args.items() if k != "model"}


def _py(value: Any) -> str:
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    return repr(str(value))


def _config_class(key: str, value: Any, contract: LlmApiContract) -> str | None:
    """The config class ``value`` (a mapping under LLM key ``key``) is built from, if known."""
    if not isinstance(value, Mapping):
        return None
    if key == "speculative_config":
        return contract.decoding_class(str(value["decoding_type"]))
    try:
        kind = str(contract.entry("LLM", key).get("type", ""))
    except ConfigError:
        return None
    return kind.removeprefix("object:") if kind.startswith("object:") else None


def render_llm_call(args: Mapping[str, Any], contract: LlmApiContract) -> str:
    """The Python program equivalent to ``args``: imports, then ``llm = LLM(...)``.

    Config mappings are written as their classes (``Eagle3DecodingConfig(...)``, imports
    from the contract); ``decoding_type`` is implied by the class and left out.
    """
    imports: dict[str, list[str]] = {contract.import_of("LLM"): ["LLM"]}
    lines = []
    for key, value in args.items():
        cls = _config_class(key, value, contract)
        if cls is None:
            lines.append(f"    {key}={_py(value)},")
            continue
        imports.setdefault(contract.import_of(cls), []).append(cls)
        fields = ", ".join(
            f"{k}={_py(v)}" for k, v in value.items() if k != "decoding_type"
        )
        lines.append(f"    {key}={cls}({fields}),")
    head = [f"from {m} import {', '.join(sorted(set(n)))}" for m, n in imports.items()]
    return "\n".join([*head, "", "llm = LLM(", *lines, ")"])


def bench_options_flag(contract: LlmApiContract) -> str:
    """``trtllm-bench``'s option taking the YAML (contract ``cli.trtllm-bench``; default the
    ``trtllm-serve`` one)."""
    bench = contract.raw.get("cli", {}).get("trtllm-bench", {})
    return str(bench.get("options_flag") or contract.serve_options_flag)


def serve_argv(
    model: str | Path,
    options_flag: str,
    options_yaml: Path,
    host: str = "127.0.0.1",
    port: int = SERVE_PORT,
    executable: str | Path = "trtllm-serve",
) -> list[str]:
    """``EXECUTABLE MODEL --backend pytorch --host HOST --port PORT FLAG OPTIONS_YAML``.

    The options of ``trtllm-serve`` (``tensorrt_llm/commands/serve.py``): the model as its
    argument (a Hugging Face checkpoint directory), ``--backend pytorch`` (choices pytorch,
    tensorrt, _autodeploy), ``--host`` (default ``localhost``), ``--port`` (default 8000),
    and the YAML of LLM arguments that overwrite its own (``--extra_llm_api_options``;
    ``--config`` is its alias since TensorRT-LLM PR 9104): ``options_flag``, from the
    version's contract (:attr:`LlmApiContract.serve_options_flag`).
    """
    argv = [str(executable), str(model), "--backend", "pytorch", "--host", host]
    return [*argv, "--port", str(port), options_flag, str(options_yaml)]


def command_lines(
    args: Mapping[str, Any],
    contract: LlmApiContract,
    options_yaml: Path,
    host: str = "127.0.0.1",
    dataset: Path | None = None,
) -> list[str]:
    """The ``trtllm-serve`` and ``trtllm-bench throughput`` lines that run ``args``.

    Both read the LLM arguments from ``options_yaml`` (``llm_api.yaml``) through the
    version's options flag (``--extra_llm_api_options``; newer releases ``--config``).
    """
    model = str(args["model"])
    yaml_path = str(options_yaml)
    serve = serve_argv(model, contract.serve_options_flag, options_yaml, host)
    bench = ["trtllm-bench", "--model", Path(model).name, "--model_path", model]
    bench += ["throughput", "--backend", "pytorch", "--dataset"]
    bench += [
        str(dataset) if dataset else "<dataset.jsonl>",
        bench_options_flag(contract),
        yaml_path,
    ]
    return [shlex.join(serve), shlex.join(bench)]
