"""TensorRT-LLM API calls as data: what to construct, with which arguments.

A :class:`Call` names a contract entry (``BuildConfig``, ``LLM``, ``MedusaDecodingConfig``,
``MedusaForCausalLm.from_hugging_face``…; ``builders/trtllm/data/trtllm_1_2_1_contract.json``) and holds
its keyword arguments. Values are plain data, nested calls, :class:`EnumRef` (an enum member such
as ``SpeculativeDecodingMode.MEDUSA``), :class:`PathArg` (a ``pathlib.Path``) or :class:`RankArg`
(the rank of a per-rank loop). A call tree is printed as Python for humans
(:func:`render_python`), written as JSON for the build worker (:func:`call_to_json`), and turned
into real objects only inside the NGC image (:func:`materialize`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class EnumRef:
    """An enum member by name, e.g. ``EnumRef("SpeculativeDecodingMode", "MEDUSA")``."""

    enum: str
    member: str


@dataclass(frozen=True)
class PathArg:
    """A filesystem path passed as ``pathlib.Path`` (some TensorRT-LLM code uses ``/`` on it)."""

    path: str


@dataclass(frozen=True)
class RankArg:
    """Placeholder for the rank of a per-rank loop (``Mapping(rank=...)``)."""


@dataclass(frozen=True)
class Call:
    """``name(*args, **kwargs)``; ``name`` is a contract entry, ``Class`` or ``Class.method``.

    ``args`` are positional arguments, checked against the contract entry's ``positional`` names.
    """

    name: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    args: tuple[Any, ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        """The argument ``key`` (``default`` when not passed)."""
        return self.kwargs.get(key, default)


def iter_calls(value: Any) -> list[Call]:
    """Every :class:`Call` in ``value`` (a call, list or dict), depth first, outer first."""
    if isinstance(value, Call):
        found = [value]
        for arg in (*value.args, *value.kwargs.values()):
            found.extend(iter_calls(arg))
        return found
    if isinstance(value, (list, tuple)):
        return [c for item in value for c in iter_calls(item)]
    return []


def call_to_json(value: Any) -> Any:
    """Encode a call tree as JSON-ready data (``{"$call": ...}``, ``{"$enum": ...}``…)."""
    if isinstance(value, Call):
        return {
            "$call": value.name,
            "args": [call_to_json(v) for v in value.args],
            "kwargs": {k: call_to_json(v) for k, v in value.kwargs.items()},
        }
    if isinstance(value, EnumRef):
        return {"$enum": f"{value.enum}.{value.member}"}
    if isinstance(value, PathArg):
        return {"$path": value.path}
    if isinstance(value, RankArg):
        return {"$rank": True}
    if isinstance(value, (list, tuple)):
        return [call_to_json(v) for v in value]
    return value


def call_from_json(data: Any) -> Any:
    """Inverse of :func:`call_to_json`."""
    if isinstance(data, dict):
        if "$call" in data:
            kwargs = {k: call_from_json(v) for k, v in data["kwargs"].items()}
            args = tuple(call_from_json(v) for v in data.get("args", []))
            return Call(data["$call"], kwargs, args)
        if "$enum" in data:
            enum, member = data["$enum"].split(".", 1)
            return EnumRef(enum, member)
        if "$path" in data:
            return PathArg(data["$path"])
        if "$rank" in data:
            return RankArg()
        return {k: call_from_json(v) for k, v in data.items()}
    if isinstance(data, list):
        return [call_from_json(v) for v in data]
    return data


def _render_value(value: Any, indent: int) -> str:
    if isinstance(value, Call):
        return render_call(value, indent)
    if isinstance(value, EnumRef):
        return f"{value.enum}.{value.member}"
    if isinstance(value, PathArg):
        return f"Path({value.path!r})"
    if isinstance(value, RankArg):
        return "rank"
    return repr(value)


def render_call(call: Call, indent: int = 0) -> str:
    """Python source for one call, one argument per line, nested calls indented."""
    if not call.kwargs and not call.args:
        return f"{call.name}()"
    pad = " " * (indent + 4)
    parts = [f"{pad}{_render_value(v, indent + 4)}" for v in call.args] + [
        f"{pad}{key}={_render_value(value, indent + 4)}"
        for key, value in call.kwargs.items()
    ]
    body = ",\n".join(parts)
    return f"{call.name}(\n{body},\n{' ' * indent})"


def names_used(calls: list[Call]) -> set[str]:
    """Top-level names a snippet of these calls needs imported (classes and enums)."""
    names: set[str] = set()
    for call in calls:
        for inner in iter_calls(call):
            names.add(inner.name.split(".")[0])
            names.update(
                v.enum for v in inner.kwargs.values() if isinstance(v, EnumRef)
            )
    return names


def render_imports(names: set[str], imports: Mapping[str, str]) -> str:
    """``from MODULE import A, B`` lines for ``names`` (module per name from the contract)."""
    by_module: dict[str, list[str]] = {}
    for name in sorted(names):
        by_module.setdefault(imports[name], []).append(name)
    return "\n".join(
        f"from {module} import {', '.join(items)}"
        for module, items in sorted(by_module.items())
    )


def resolve_name(name: str, imports: Mapping[str, str]) -> Callable[..., Any]:
    """Import the object ``name`` (``Class`` or ``Class.method``) from its contract module."""
    head, _, attr = name.partition(".")
    obj = getattr(importlib.import_module(imports[head]), head)
    return getattr(obj, attr) if attr else obj


def materialize(value: Any, imports: Mapping[str, str], rank: int = 0) -> Any:
    """Build the real objects of a call tree (needs ``tensorrt_llm``; GPU machines only).

    Args:
        value: a call tree (or any value inside one).
        imports: contract ``imports`` (name -> module).
        rank: the value of :class:`RankArg`.

    Raises:
        ImportError, AttributeError: the name does not exist in this TensorRT-LLM.
    """
    if isinstance(value, Call):
        args = [materialize(v, imports, rank) for v in value.args]
        kwargs = {k: materialize(v, imports, rank) for k, v in value.kwargs.items()}
        return resolve_name(value.name, imports)(*args, **kwargs)
    if isinstance(value, EnumRef):
        return getattr(resolve_name(value.enum, imports), value.member)
    if isinstance(value, PathArg):
        return Path(value.path)
    if isinstance(value, RankArg):
        return rank
    if isinstance(value, (list, tuple)):
        return [materialize(v, imports, rank) for v in value]
    return value
