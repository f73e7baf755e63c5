"""LLM-API option files: a hand-written ``llm_api.yaml`` checked against a contract, and the
keys of an LLM-argument mapping the contract cannot vouch for.

TensorRT-LLM's ``LLM(...)`` takes far more arguments than trtbench writes; the contract lists
the ones trtbench writes (``builders/trtllm/data/llmapi_<version>.json``). A key it does not
list passes through (:func:`~trtbench.builders.trtllm.llmapi_contract.is_partial`) and
:func:`unchecked_keys` names it, so the build can say what was not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from trtbench.builders.trtllm.llmapi_contract import (
    LlmApiContract,
    check_llm_args,
    is_partial,
    load_llmapi_contract,
)
from trtbench.core.errors import ConfigError


def unchecked_keys(args: Mapping[str, Any], contract: LlmApiContract) -> list[str]:
    """Dotted keys of ``args`` (an ``LLM(...)`` mapping) that no contract table lists: top-level
    keys, and keys inside a config object whose class table is partial (``kv_cache_config.
    host_cache_size``). Speculative configs are complete, so none of theirs appear here.
    """
    out: list[str] = []
    fields = contract.raw["llm_args"]
    for key, value in args.items():
        spec = fields.get(key)
        if spec is None:
            out.append(str(key))
            continue
        kind = str(spec.get("type", ""))
        if not (kind.startswith("object:") and isinstance(value, Mapping)):
            continue
        cls = kind.split(":", 1)[1]
        if spec.get("dispatch") or cls not in contract.raw["classes"]:
            continue
        if is_partial(cls, contract):
            known = contract.class_fields(cls)
            out += [f"{key}.{k}" for k in value if k not in known]
    return out


def check_llm_api_yaml(path: Path, version: str | LlmApiContract) -> dict[str, Any]:
    """Read a hand-written ``llm_api.yaml`` (``extra_llm_api_options`` form), check it with
    :func:`check_llm_args` against ``version``'s contract and return the mapping (safe_load).

    Raises:
        ConfigError: unreadable, not YAML, not a mapping, or failing the contract (one line).
    """
    contract = version
    if not isinstance(contract, LlmApiContract):
        contract = load_llmapi_contract(contract)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}; check the llm_api.yaml path"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())
        raise ConfigError(f"{path} is not valid YAML ({first}); fix the file") from None
    data = {} if data is None else data
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{path} must hold a mapping of LLM arguments, got {type(data).__name__}"
        )
    try:
        check_llm_args(data, contract)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return dict(data)
