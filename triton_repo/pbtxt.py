"""Protobuf-text building blocks for model configs, and template filling (pure).

Templates live in ``templates/`` (package data) and are filled with
:class:`string.Template` (``${name}``); a missing value raises instead of leaving a
placeholder behind, as TensorRT-LLM's ``fill_template.py`` does (``safe_substitute``;
NVIDIA/TensorRT-LLM ``triton_backend/tools/fill_template.py``): an unfilled placeholder in a
structural field such as ``max_batch_size: ${…}`` makes a config unparseable.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

from trtbench.core.errors import DeployError
from trtbench.triton_repo.interface import Tensor

HELPER_MODULES = ("trtbench_model_utils.py", "trtbench_detok.py")


def load_template(relpath: str) -> str:
    """Text of ``templates/<relpath>`` (package data)."""
    return (resources.files("trtbench.triton_repo") / "templates" / relpath).read_text()


def fill_template(relpath: str, **values: object) -> str:
    """``templates/<relpath>`` with every ``${key}`` replaced.

    Raises:
        DeployError: the template names a key not given (a bug in the caller).
    """
    try:
        return string.Template(load_template(relpath)).substitute(
            {k: str(v) for k, v in values.items()}
        )
    except KeyError as exc:
        raise DeployError(
            f"template {relpath} needs a value for {exc.args[0]}"
        ) from None


def quote(text: str) -> str:
    """A protobuf text-format string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_tensors(tensors: Sequence[Tensor]) -> str:
    """The body of an ``input [...]`` / ``output [...]`` list."""
    blocks = []
    for t in tensors:
        lines = [
            f"    name: {quote(t.name)}",
            f"    data_type: {t.data_type}",
            f"    dims: [ {', '.join(str(d) for d in t.dims)} ]",
        ]
        if t.scalar_reshape:
            lines.append("    reshape: { shape: [ ] }")
        if t.ragged:
            lines.append("    allow_ragged_batch: true")
        if t.optional:
            lines.append("    optional: true")
        blocks.append("  {\n" + "\n".join(lines) + "\n  }")
    return ",\n".join(blocks)


def render_parameters(params: Mapping[str, str]) -> str:
    """``parameters { key value { string_value } }`` blocks, in the given order."""
    return "\n".join(
        f"parameters {{\n  key: {quote(k)}\n  value {{ string_value: {quote(v)} }}\n}}"
        for k, v in params.items()
    )


@dataclass(frozen=True)
class EnsembleStep:
    """One ensemble step: ``input_map`` / ``output_map`` are {model tensor: ensemble tensor}."""

    model_name: str
    input_map: Mapping[str, str]
    output_map: Mapping[str, str]


def render_steps(steps: Sequence[EnsembleStep]) -> str:
    """The body of ``ensemble_scheduling { step [...] }``."""

    def maps(kind: str, mapping: Mapping[str, str]) -> list[str]:
        return [
            f"      {kind} {{ key: {quote(k)} value: {quote(v)} }}"
            for k, v in mapping.items()
        ]

    blocks = []
    for step in steps:
        lines = [
            f"      model_name: {quote(step.model_name)}",
            "      model_version: -1",
        ]
        lines += maps("input_map", step.input_map) + maps("output_map", step.output_map)
        blocks.append("    {\n" + "\n".join(lines) + "\n    }")
    return ",\n".join(blocks)


def render_python_model(
    name: str,
    comment: str,
    *,
    max_batch_size: int,
    decoupled: bool,
    inputs: Sequence[Tensor],
    outputs: Sequence[Tensor],
    instance_count: int,
    parameters: Mapping[str, str],
) -> str:
    """``config.pbtxt`` of a Python-backend model."""
    return fill_template(
        "python_model.pbtxt",
        comment=comment,
        name=name,
        max_batch_size=max_batch_size,
        decoupled=str(decoupled).lower(),
        inputs=render_tensors(inputs),
        outputs=render_tensors(outputs),
        instance_count=instance_count,
        parameters=render_parameters(parameters),
    )


def python_model_files(name: str, config: str, model_py: str) -> dict[str, str]:
    """config.pbtxt, ``1/model.py`` and the shared helper modules of one Python model."""
    files = {
        f"{name}/config.pbtxt": config,
        f"{name}/1/model.py": load_template(model_py),
    }
    for helper in HELPER_MODULES:
        files[f"{name}/1/{helper}"] = load_template(f"python/{helper}")
    return files


def medusa_brace(choices: Sequence[Sequence[int]]) -> str:
    """Triton's brace syntax for medusa_choices, ``"{0}, {0, 1}"``.

    Source: triton-inference-server/tensorrtllm_backend ``docs/model_config.md``.
    """
    return ", ".join("{" + ", ".join(str(k) for k in path) + "}" for path in choices)
