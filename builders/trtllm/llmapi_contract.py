"""TensorRT-LLM's LLM-API (PyTorch backend) contract per version, and checks of LLM(...) arguments.

The contract is data: ``builders/trtllm/data/llmapi_<version>.json`` (``llmapi_1_2_1.json``)
lists the ``LLM(...)`` arguments trtbench writes (``llm_args``; another key passes unchecked, see
:func:`is_partial`), their config classes (``classes``), the ``decoding_type`` → class map and
the ``trtllm-serve`` / ``trtllm-bench`` option taking the YAML, and (``llm_args_not_read``) the
keys another version lists that were not read for this one. Value checks (types, bounds,
rules): :mod:`~trtbench.builders.trtllm.llmapi_values`. Facts come from ``tensorrt_llm/llmapi/llm_args.py`` and the release's API reference
(nvidia.github.io/TensorRT-LLM/<version>/llm-api/reference/<Class>.html); each entry names its
``source`` (``sources``: repo, path, tag, commit / index id / url, ``tag_verified``). A field entry:
``{type, default, nullable?, ge/gt/le?, item_gt?, choices?, rules?, source, line, confirmed,
evidence, note}``; ``confirmed`` only when read at the tag with its line, else ``evidence`` grades it
(``release_docs``, ``other_release_docs``, ``stored_copy``, ``second_hand``). Types: int, float,
bool, str, path, list[int], list[list[int]], dict[int,int], mapping (opaque), enum (``choices``),
``object:<Class>`` (``dispatch: decoding_type``: the class named by the value's decoding_type).
Every failure is a :class:`~trtbench.core.errors.ConfigError`: one line naming the field and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from trtbench.builders.trtllm.llmapi_values import (
    SIMPLE_TYPES,
    check_bounds,
    check_rules,
)
from trtbench.core.errors import ConfigError

LLMAPI_VERSIONS: tuple[str, ...] = ("1.2.1", "1.4.0rc4")  # oldest → newest
PYTORCH_BACKENDS = (None, "pytorch", "_autodeploy")


def newest_llmapi_version() -> str:
    """The newest TensorRT-LLM version with an LLM-API contract (``"1.4.0rc4"``)."""
    return LLMAPI_VERSIONS[-1]


def _file_name(version: str) -> str:
    return "llmapi_" + version.replace(".", "_") + ".json"


@cache
def _packaged(version: str) -> Mapping[str, Any]:
    data = resources.files("trtbench.builders.trtllm").joinpath(
        "data", _file_name(version)
    )
    return json.loads(data.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class LlmApiContract:
    """One version's contract file (see the module docstring); ``raw`` is the whole document."""

    raw: Mapping[str, Any]

    @property
    def version(self) -> str:
        return str(self.raw["tensorrt_llm_version"])

    @property
    def file_name(self) -> str:
        """The packaged file name, e.g. ``llmapi_1_4_0rc4.json`` (for build.json)."""
        return _file_name(self.version)

    @property
    def serve_options_flag(self) -> str:
        """``trtllm-serve``'s option taking the YAML (``--extra_llm_api_options`` or ``--config``)."""
        return str(self.raw["cli"]["trtllm-serve"]["options_flag"])

    @property
    def not_read(self) -> tuple[str, ...]:
        """Top-level ``LLM(...)`` keys another version's contract lists that were not read
        for this version (``llm_args_not_read``): they pass unchecked here instead of being
        refused as the other version's keys."""
        return tuple(self.raw.get("llm_args_not_read", {}).get("names", ()))

    def decoding_class(self, decoding_type: Any) -> str:
        """Class of a ``decoding_type`` (``"Eagle3"`` → ``Eagle3DecodingConfig``); ConfigError
        if this version lacks the type or the contract does not describe it."""
        types = self.raw["decoding_types"]
        if decoding_type in types:
            return str(types[decoding_type])
        known = ", ".join(sorted(types))
        if decoding_type in self.raw.get("decoding_types_not_described", ()):
            raise ConfigError(
                f"speculative_config.decoding_type {decoding_type} exists in TensorRT-LLM "
                f"{self.version} but trtbench's contract does not describe it; use one of: {known}"
            )
        raise ConfigError(
            f"unknown decoding_type {decoding_type!r} in speculative_config; TensorRT-LLM "
            f"{self.version} has: {known}"
        )

    def class_entry(self, cls: str) -> Mapping[str, Any]:
        """Entry of ``cls`` (``import``, ``base``, ``required``, ``pytorch``, ``why``, ``fields``…);
        ConfigError if this version's contract lacks the class."""
        classes = self.raw["classes"]
        if cls not in classes:
            raise ConfigError(
                f"{cls} is not in the TensorRT-LLM {self.version} LLM-API contract "
                f"(known: {', '.join(sorted(classes))}); use one of those"
            )
        return classes[cls]

    def class_fields(self, cls: str) -> Mapping[str, Any]:
        """Field table of ``cls``: own fields over its bases'; ConfigError if the class is unknown."""
        entry = self.class_entry(cls)
        base = entry.get("base")
        fields = dict(self.class_fields(base)) if base else {}
        fields.update(entry["fields"])
        return fields

    def import_of(self, cls: str) -> str:
        """Module to import ``cls`` from (``"LLM"`` → ``tensorrt_llm``)."""
        if cls == "LLM":
            return str(self.raw["llm_class"]).rsplit(".", 1)[0]
        return str(self.class_entry(cls)["import"])

    def entry(self, cls: str, field: str) -> Mapping[str, Any]:
        """Entry of ``cls.field`` (``"LLM"`` = top level: type, default, source, line…);
        ConfigError if this version's contract lacks the class or the field."""
        fields = self.raw["llm_args"] if cls == "LLM" else self.class_fields(cls)
        if field not in fields:
            raise ConfigError(
                f"{cls}.{field} is not in the TensorRT-LLM {self.version} LLM-API contract "
                f"(known: {', '.join(sorted(fields))})"
            )
        return fields[field]


def load_llmapi_contract(version: str) -> LlmApiContract:
    """The packaged contract of TensorRT-LLM ``version`` (one of :data:`LLMAPI_VERSIONS`).

    Raises:
        ConfigError: no contract for that version (the message lists the known ones).
    """
    if version not in LLMAPI_VERSIONS:
        raise ConfigError(
            f"no LLM-API contract for TensorRT-LLM {version!r}; trtbench has "
            f"{', '.join(LLMAPI_VERSIONS)}: set trtllm_version to one of them"
        )
    return LlmApiContract(_packaged(version))


def _fields_at(contract: LlmApiContract, path: Sequence[str]) -> Mapping | None:
    """Field table reached by ``path`` in ``contract`` (``()`` = top level,
    ``("cuda_graph_config",)``, ``("speculative_config", "Eagle3")``); None if it has none."""
    fields: Mapping[str, Any] = contract.raw["llm_args"]
    for step in path:
        spec = fields.get(step)
        if spec is not None and spec.get("dispatch"):
            continue  # the next step is the decoding_type
        if spec is not None and str(spec["type"]).startswith("object:"):
            cls = str(spec["type"]).split(":", 1)[1]
        else:
            cls = contract.raw["decoding_types"].get(step)
        if cls not in contract.raw["classes"]:
            return None
        fields = contract.class_fields(cls)
    return fields


def _other_versions(path: Sequence[str], field: str, here: str) -> list[str]:
    contracts = [load_llmapi_contract(v) for v in LLMAPI_VERSIONS if v != here]
    return [c.version for c in contracts if field in (_fields_at(c, path) or {})]


def version_having(cls_or_llm: str, field: str) -> list[str]:
    """Versions whose contract has ``field`` on ``cls_or_llm`` (``"LLM"`` = top level)."""
    found = []
    for v in LLMAPI_VERSIONS:
        c = load_llmapi_contract(v)
        if cls_or_llm == "LLM" or cls_or_llm in c.raw["classes"]:
            on = (
                c.raw["llm_args"] if cls_or_llm == "LLM" else c.class_fields(cls_or_llm)
            )
            found += [v] if field in on else []
    return found


def _check_value(
    where: str,
    value: Any,
    spec: Mapping,
    contract: LlmApiContract,
    path: tuple,
    sibling: Mapping,
) -> None:
    if value is None:
        if spec.get("nullable"):
            return
        raise ConfigError(f"{where} must not be null; give a value or drop the key")
    kind = str(spec["type"])
    if kind == "enum":
        if value not in spec["choices"]:
            raise ConfigError(f"{where}={value!r}: must be one of {spec['choices']}")
        return
    if kind.startswith("object:"):
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"{where}: expected a mapping of {kind.split(':', 1)[1]} fields, got {value!r}"
            )
        if spec.get("dispatch") == "decoding_type":
            _check_speculative(where, value, contract, sibling)
        else:
            _check_object(where, value, kind.split(":", 1)[1], contract, path)
        return
    if kind not in SIMPLE_TYPES:
        raise ConfigError(
            f"contract type {kind!r} of {where} is unknown; fix {contract.file_name}"
        )
    if not SIMPLE_TYPES[kind](value):
        raise ConfigError(
            f"{where}={value!r}: expected {kind} (TensorRT-LLM {contract.version}); fix the type"
        )
    if kind in ("int", "float", "list[int]"):
        check_bounds(where, value, spec)
    if spec.get("rules"):
        check_rules(where, value, spec["rules"], sibling)


def _owner(field: str, contract: LlmApiContract) -> str | None:
    """The LLM argument (``speculative_config`` …) whose class has ``field``, or None."""
    for key, spec in contract.raw["llm_args"].items():
        kind = str(spec.get("type", ""))
        if not kind.startswith("object:"):
            continue
        one = {kind.split(":", 1)[1]}
        classes = (
            set(contract.raw["decoding_types"].values())
            if spec.get("dispatch")
            else one
        )
        if any(
            c in contract.raw["classes"] and field in contract.class_fields(c)
            for c in classes
        ):
            return key
    return None


def is_partial(cls: str, contract: LlmApiContract) -> bool:
    """Whether the contract lists only part of ``cls``'s fields: ``LLM`` itself (only what
    trtbench writes) and every class not marked ``complete`` (decoding configs are complete:
    their reference pages list all fields). A key such a table lacks passes unchecked."""
    if cls == "LLM":
        return not contract.raw.get("llm_args_complete", False)
    entry = contract.raw["classes"].get(cls, {})
    return not entry.get("complete", cls.endswith("DecodingConfig"))


def _check_fields(
    where: str,
    args: Mapping,
    fields: Mapping,
    cls: str,
    contract: LlmApiContract,
    path: tuple,
) -> None:
    for key, value in args.items():
        here = f"{where}.{key}" if where else str(key)
        if key not in fields:
            unread = not path and key in contract.not_read
            others = [] if unread else _other_versions(path, key, contract.version)
            if others:
                raise ConfigError(
                    f"{here} is not in TensorRT-LLM {contract.version} (it is in "
                    f"{', '.join(others)}); remove it or set trtllm_version"
                )
            if cls == "LLM" and (owner := _owner(key, contract)):
                raise ConfigError(
                    f"{here} is not a field of LLM in TensorRT-LLM {contract.version}: it "
                    f"belongs in {owner}; move it there"
                )
            if is_partial(cls, contract):
                continue  # not listed, not refused: unchecked_keys() names it
            raise ConfigError(
                f"{here} is not a field of {cls} in TensorRT-LLM {contract.version} "
                f"(known: {', '.join(sorted(fields))}); remove it"
            )
        _check_value(here, value, fields[key], contract, (*path, key), args)


def _check_object(
    where: str, args: Mapping, cls: str, contract: LlmApiContract, path: tuple
) -> None:
    fields = contract.class_fields(cls)
    _check_fields(where, args, fields, cls, contract, path)
    entry = contract.class_entry(cls)
    for name in entry.get("required", ()):
        if args.get(name) is None:
            raise ConfigError(f"{where}.{name} is required by {cls}; set it")
    if "max_batch_size_matches_batch_sizes" in entry.get("rules", ()):
        sizes, top = args.get("batch_sizes"), args.get("max_batch_size")
        if sizes and top and top != max(sizes):
            raise ConfigError(
                f"{where}: max_batch_size {top} must equal max(batch_sizes) = {max(sizes)} "
                f"when both are given; drop one of them"
            )


def _check_speculative(
    where: str, spec: Mapping, contract: LlmApiContract, llm_args: Mapping
) -> None:
    """``speculative_config``: class by ``decoding_type``, then that class's fields; the class
    must be usable on the PyTorch backend (Medusa is not)."""
    if "decoding_type" not in spec:
        known = ", ".join(sorted(contract.raw["decoding_types"]))
        raise ConfigError(
            f"{where} needs a decoding_type (TensorRT-LLM {contract.version} has: {known})"
        )
    decoding_type = spec["decoding_type"]
    cls = contract.decoding_class(decoding_type)
    entry = contract.class_entry(cls)
    backend = llm_args.get("backend")
    if entry.get("pytorch") is False and backend in PYTORCH_BACKENDS:
        raise ConfigError(
            f"{where}.decoding_type {decoding_type} is not usable on the PyTorch backend of "
            f"TensorRT-LLM {contract.version} ({entry.get('why', cls)}); use backend: trtllm "
            f"(the engine path, TensorRT-LLM <= 1.3.0rc20)"
        )
    _check_object(where, spec, cls, contract, ("speculative_config", decoding_type))


def check_llm_args(args: Mapping[str, Any], contract: LlmApiContract) -> None:
    """Check the full ``LLM(...)`` keyword mapping (``model``, ``backend``, ``speculative_config``
    ``{decoding_type: ..., ...}``, ``cuda_graph_config`` mapping or None, ``kv_cache_config``…) or
    its ``extra_llm_api_options`` YAML form (no ``model``) against ``contract``.

    A key missing from a partial table (:func:`is_partial`) passes unchecked.

    Raises:
        ConfigError: unknown key (naming the contract version that has it, if any), wrong
            type/range/enum, missing required field, unknown ``decoding_type``, or a decoding
            config the PyTorch backend cannot run (Medusa).
    """
    if not isinstance(args, Mapping):
        raise ConfigError(f"LLM arguments must be a mapping, got {type(args).__name__}")
    _check_fields("", args, contract.raw["llm_args"], "LLM", contract, ())
