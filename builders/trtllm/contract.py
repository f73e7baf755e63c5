"""TensorRT-LLM 1.2.1's documented contract, and checks of build plans against it (CPU only).

The contract is data: ``builders/trtllm/data/trtllm_1_2_1_contract.json`` lists the fields, types and
defaults of ``BuildConfig``, ``PluginConfig``, ``MedusaDecodingConfig``, … the enum values, the
``trtllm-build`` flags and the cross-field rules, each with its source (repository, path, commit
or index id). :func:`check_call` rejects an unknown field, a wrong type or enum value;
:func:`check_build_argv` rejects a ``trtllm-build`` flag or value the CLI does not have.

The cross-field rules (the JSON's ``constraints``) live in
:mod:`trtbench.builders.trtllm.rules`. Every failure is a :class:`~trtbench.core.errors.ConfigError`
naming the field and the fix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from trtbench.builders.trtllm.calls import Call, EnumRef, PathArg, RankArg
from trtbench.core.errors import ConfigError, NotAvailableError

CONTRACT_FILE = "trtllm_1_2_1_contract.json"
FP8_MIN_CAPABILITY = (8, 9)
RUNTIME_SHAPES = (
    "max_batch_size",
    "max_input_len",
    "max_seq_len",
    "max_beam_width",
    "max_num_tokens",
)


@dataclass(frozen=True)
class Contract:
    """The parsed contract file (see the module docstring); ``raw`` is the whole document."""

    raw: Mapping[str, Any]

    @property
    def version(self) -> str:
        return str(self.raw["tensorrt_llm_version"])

    @property
    def image(self) -> str:
        return str(self.raw["ngc_image"])

    @property
    def imports(self) -> Mapping[str, str]:
        return self.raw["imports"]

    def entry(self, name: str) -> Mapping[str, Any]:
        """Contract entry of class or method ``name`` (``fields``, ``positional``, ``source``…).

        Raises:
            ConfigError: ``name`` is not in the contract.
        """
        classes = self.raw["classes"]
        if name not in classes:
            raise ConfigError(
                f"{name} is not part of the TensorRT-LLM {self.version} contract "
                f"(known: {', '.join(sorted(classes))}); use one of those"
            )
        return classes[name]

    def fields(self, name: str) -> Mapping[str, Any]:
        """Field table of contract class ``name`` (see :meth:`entry`)."""
        return self.entry(name)["fields"]

    def enum_members(self, enum: str) -> Mapping[str, Any]:
        return self.raw["enums"][enum]["members"]


@cache
def _packaged_text() -> str:
    return (
        resources.files("trtbench.builders.trtllm")
        .joinpath("data", CONTRACT_FILE)
        .read_text(encoding="utf-8")
    )


def load_contract(path: Path | None = None) -> Contract:
    """Read the contract (default: the packaged TensorRT-LLM 1.2.1 table)."""
    text = path.read_text(encoding="utf-8") if path else _packaged_text()
    return Contract(json.loads(text))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_choices(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and all(_is_int(k) and k >= 0 for k in p)
        for p in value
    )


_SIMPLE = {
    "int": _is_int,
    "bool": lambda v: isinstance(v, bool),
    "float": lambda v: _is_int(v) or isinstance(v, float),
    "str": lambda v: isinstance(v, str),
    "path": lambda v: isinstance(v, (str, PathArg)),
    "choices": _is_choices,
    "rank": lambda v: _is_int(v) or isinstance(v, RankArg),
    "any": lambda v: True,
}


def _type_error(value: Any, type_: str, contract: Contract) -> str | None:
    """Why ``value`` does not fit contract type ``type_`` (None when it fits)."""
    kind, _, arg = type_.partition(":")
    optional = kind.endswith("?")
    kind = kind.rstrip("?")
    if value is None and optional:
        return None
    if kind in _SIMPLE:
        return None if _SIMPLE[kind](value) else f"expected {type_}"
    if kind == "literal":
        allowed = contract.raw["literals"][arg]
        return None if value in allowed else f"must be one of {allowed}"
    if kind == "enum":
        members = contract.enum_members(arg)
        if not isinstance(value, EnumRef) or value.enum != arg:
            return f"expected {arg}.<member>"
        return None if value.member in members else f"must be one of {list(members)}"
    if kind == "call":
        names = arg.split("|")
        ok = isinstance(value, Call) and value.name in names
        return None if ok else f"expected a {' or '.join(names)}"
    raise ConfigError(f"contract type {type_!r} is unknown; fix {CONTRACT_FILE}")


def check_call(call: Call, contract: Contract, where: str = "") -> None:
    """Check ``call`` and every call nested in it against the contract's field tables.

    Raises:
        ConfigError: unknown class or field, or a value of the wrong type or enum member
            (the message names ``where.field``).
    """
    entry = contract.entry(call.name)
    fields = entry["fields"]
    here = f"{where}{call.name}"
    positional = entry.get("positional", [])
    if len(call.args) > len(positional):
        raise ConfigError(
            f"{here}: {len(call.args)} positional arguments, the contract allows "
            f"{len(positional)} ({', '.join(positional) or 'none'}); pass keywords"
        )
    named = dict(zip(positional, call.args, strict=False))
    for key, value in [*named.items(), *call.kwargs.items()]:
        if key not in fields:
            scope = (
                f"TensorRT-LLM {contract.version}"
                if entry.get("complete")
                else "the verified subset of the contract (fields trtbench sets)"
            )
            raise ConfigError(
                f"{here}: unknown field {key!r} for {scope}; valid fields: "
                f"{', '.join(sorted(fields))}"
            )
        problem = _type_error(value, fields[key]["type"], contract)
        if problem:
            raise ConfigError(f"{here}.{key}={value!r}: {problem}")
        if isinstance(value, Call):
            check_call(value, contract, f"{here}.{key} -> ")


def version_key(version: str) -> tuple[int, int, int, int, int] | None:
    """``(major, minor, patch, stage, n)`` of a PEP 440 release (stage: a 0, b 1, rc 2,
    final 3); local and post parts are ignored. None when ``version`` is not one.

    ``1.3.0rc20`` → ``(1, 3, 0, 2, 20)``; ``1.2.1.post1`` → ``(1, 2, 1, 3, 0)``.
    """
    match = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:(a|b|rc)(\d+))?", version)
    if not match:
        return None
    stage = {"a": 0, "b": 1, "rc": 2, None: 3}[match[4]]
    return (int(match[1]), int(match[2]), int(match[3] or 0), stage, int(match[5] or 0))


def check_trtllm_version(version: str, contract: Contract) -> None:
    """Refuse a TensorRT-LLM without the engine path: before ``supported.min`` (1.0) or after
    ``supported.last`` (1.3.0rc20, the last release with ``trtllm-build``, per its
    TensorRT-LLM release notes).

    Raises:
        NotAvailableError (exit 2): older (no ``_tensorrt_engine``) or newer (engine path
            removed); the message names the last version with it and the NGC image.
    """
    have = version_key(version)
    if have is None:
        raise NotAvailableError(
            f"cannot read the TensorRT-LLM version {version!r}; use {contract.image}"
        )
    supported = contract.raw["supported"]
    if have > (version_key(supported["last"]) or have):
        raise NotAvailableError(
            f"TensorRT-LLM {version} has no TensorRT engine path (removed after "
            f"{supported['last']}, the last release with it); build inside "
            f"{contract.image} (TensorRT-LLM {contract.version}) or use backend: "
            "trtllm-pytorch"
        )
    if have < (version_key(supported["min"]) or have):
        raise NotAvailableError(
            f"TensorRT-LLM {version} predates tensorrt_llm._tensorrt_engine (1.0+); "
            f"build inside {contract.image} (TensorRT-LLM {contract.version})"
        )


def check_fp8_capability(capability: tuple[int, int] | None) -> None:
    """FP8 needs compute capability ≥ 8.9 (Ada, Hopper, Blackwell); ``None`` = no GPU seen.

    Raises:
        ConfigError: the GPU is older (e.g. 8.0 A100).
    """
    if capability is not None and tuple(capability) < FP8_MIN_CAPABILITY:
        major, minor = capability
        raise ConfigError(
            f"quantization: fp8 needs an Ada or Hopper GPU (compute capability >= 8.9) but "
            f"the visible GPU is {major}.{minor}; set quantization: none for this GPU"
        )


def check_build_argv(argv: Sequence[str], contract: Contract) -> None:
    """Check a ``trtllm-build`` command line against the contract's flag list and choices.

    Raises:
        ConfigError: an unknown flag or a value outside the flag's choices.
    """
    table = contract.raw["trtllm_build"]
    plugin_flags = set(table["plugin_flags"])
    choices = {
        "--speculative_decoding_mode": table["speculative_decoding_mode_choices"],
        "--kv_cache_type": table["kv_cache_type_choices"],
    }
    plugins = contract.fields("PluginConfig")
    for i, token in enumerate(argv):
        if not token.startswith("--"):
            continue
        name = token[2:]
        value = argv[i + 1] if i + 1 < len(argv) else None
        if token not in table["flags"] and name not in plugin_flags:
            raise ConfigError(
                f"trtllm-build has no flag {token} in TensorRT-LLM {contract.version}; "
                "use a flag from tensorrt_llm/commands/build.py"
            )
        allowed: list[Any] | None = choices.get(token)
        if name in plugin_flags:
            type_ = plugins[name]["type"]
            if type_ == "bool":
                allowed = table["bool_values"]
            elif type_.startswith("literal:"):
                literal = contract.raw["literals"][type_.split(":", 1)[1]]
                allowed = [v if v is not None else "disable" for v in literal]
        if allowed is not None and value not in allowed:
            raise ConfigError(f"trtllm-build {token} {value}: must be one of {allowed}")
