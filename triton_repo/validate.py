"""Check a Triton model repository before a server sees it (``trtbench deploy --check``).

Every ``config.pbtxt`` is parsed with ``tritonclient.grpc.model_config_pb2`` (shipped in the
``tritonclient[grpc]`` wheel) and ``google.protobuf.text_format``, then checked against
Triton's model repository rules (triton-inference-server/server ``docs/user_guide/``:
``model_repository.md``, ``model_configuration.md``, ``ensemble_models.md``) and what a
TensorRT-LLM deployment needs on top:

- the config parses, its ``name`` equals the folder, no unfilled ``${…}`` is left;
- a numeric version folder exists (not starting with ``0``; on disk only), and a Python model
  has ``<version>/model.py``;
- ensemble steps name models of the repository and tensors those models have, with equal
  data types; every required step input is mapped; every step input comes from an ensemble
  input or an earlier step; every ensemble output is produced by a step;
- the ensemble's ``max_batch_size`` is ≤ each step model's non-zero one;
- where ``trtbench.json`` says the served model streams, the model (or, for an ensemble, a
  step) is decoupled; the model it names exists and declares the inputs it lists.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from trtbench.core.errors import DeployError
from trtbench.triton_repo.interface import METADATA_NAME, RepoMetadata

CONFIG_NAME = "config.pbtxt"
_PLACEHOLDER = re.compile(r"\$\{[^}]*\}")
_VERSION = re.compile(r"^[1-9][0-9]*$")


@dataclass(frozen=True)
class Problem:
    """One finding: the file (relative to the repository) and what is wrong."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def parse_config(text: str) -> mc.ModelConfig:
    """Parse config.pbtxt text into a ``ModelConfig``.

    Raises:
        google.protobuf.text_format.ParseError: not valid protobuf text.
    """
    return text_format.Parse(text, mc.ModelConfig())


def _dtypes(tensors) -> dict[str, int]:
    return {t.name: t.data_type for t in tensors}


def _check_model(
    folder: str, text: str, files: Mapping[str, str], versions: list[str] | None
) -> tuple[mc.ModelConfig | None, list[Problem]]:
    where = f"{folder}/{CONFIG_NAME}"
    left = _PLACEHOLDER.findall(text)
    if left:
        return None, [
            Problem(where, f"unfilled placeholder {left[0]}; render it again")
        ]
    try:
        config = parse_config(text)
    except text_format.ParseError as exc:
        return None, [Problem(where, f"does not parse as ModelConfig: {exc}")]
    problems = []
    if config.name and config.name != folder:
        problems.append(
            Problem(where, f"name {config.name!r} differs from its folder {folder!r}")
        )
    if versions is not None and not any(_VERSION.match(v) for v in versions):
        problems.append(Problem(folder, "has no numeric version folder (e.g. 1/)"))
    model_py = re.compile(rf"^{re.escape(folder)}/[1-9]\d*/model\.py$")
    if config.backend == "python" and not any(model_py.match(p) for p in files):
        problems.append(Problem(folder, "python model without <version>/model.py"))
    return config, problems


def _check_ensemble(
    name: str, ensemble: mc.ModelConfig, configs: Mapping[str, mc.ModelConfig]
) -> list[Problem]:
    where = f"{name}/{CONFIG_NAME}"
    problems: list[Problem] = []
    available = _dtypes(ensemble.input)
    for i, step in enumerate(ensemble.ensemble_scheduling.step):
        model = configs.get(step.model_name)
        label = f"step {i} ({step.model_name})"
        if model is None:
            problems.append(
                Problem(where, f"{label} names a model not in the repository")
            )
            continue
        if model.max_batch_size and ensemble.max_batch_size > model.max_batch_size:
            problems.append(
                Problem(
                    where,
                    f"max_batch_size {ensemble.max_batch_size} exceeds {step.model_name}'s "
                    f"{model.max_batch_size}",
                )
            )
        inputs, outputs = _dtypes(model.input), _dtypes(model.output)
        for key, value in step.input_map.items():
            if key not in inputs:
                problems.append(Problem(where, f"{label} maps unknown input {key!r}"))
            elif value not in available:
                problems.append(
                    Problem(
                        where,
                        f"{label} input {key!r} reads {value!r}, which no "
                        "ensemble input or earlier step provides",
                    )
                )
            elif available[value] != inputs[key]:
                problems.append(
                    Problem(
                        where,
                        f"{label} input {key!r} gets "
                        f"{mc.DataType.Name(available[value])}, expects "
                        f"{mc.DataType.Name(inputs[key])}",
                    )
                )
        for tensor in model.input:
            if not tensor.optional and tensor.name not in step.input_map:
                problems.append(
                    Problem(
                        where, f"{label} leaves required input {tensor.name!r} unmapped"
                    )
                )
        for key, value in step.output_map.items():
            if key not in outputs:
                problems.append(Problem(where, f"{label} maps unknown output {key!r}"))
            else:
                available.setdefault(value, outputs[key])
    for tensor in ensemble.output:
        if tensor.name not in available:
            problems.append(
                Problem(where, f"output {tensor.name!r} is produced by no step")
            )
        elif available[tensor.name] != tensor.data_type:
            problems.append(
                Problem(
                    where,
                    f"output {tensor.name!r} is "
                    f"{mc.DataType.Name(tensor.data_type)} but its step makes "
                    f"{mc.DataType.Name(available[tensor.name])}",
                )
            )
    return problems


def _check_model_refs(
    name: str, config: mc.ModelConfig, configs: Mapping[str, mc.ModelConfig]
) -> list[Problem]:
    """Parameters ``*_model_name`` (BLS targets) must name models of the repository."""
    return [
        Problem(
            f"{name}/{CONFIG_NAME}",
            f"parameter {key} names {value.string_value!r}, which is not in the repository",
        )
        for key, value in sorted(config.parameters.items())
        if key.endswith("_model_name")
        and value.string_value
        and value.string_value not in configs
    ]


def is_decoupled(name: str, configs: Mapping[str, mc.ModelConfig]) -> bool:
    """True when ``name`` is decoupled (an ensemble: when any step model is; CORE rule)."""
    config = configs[name]
    if config.platform == "ensemble":
        steps = config.ensemble_scheduling.step
        return any(
            s.model_name in configs and is_decoupled(s.model_name, configs)
            for s in steps
        )
    return config.model_transaction_policy.decoupled


def _check_metadata(text: str, configs: Mapping[str, mc.ModelConfig]) -> list[Problem]:
    try:
        meta = RepoMetadata.model_validate_json(text)
    except ValueError as exc:
        return [Problem(METADATA_NAME, f"invalid: {str(exc).splitlines()[0]}")]
    problems = []
    missing = [m for m in [meta.model_name, *meta.models] if m not in configs]
    if missing:
        return [
            Problem(METADATA_NAME, f"names model {missing[0]!r}, which has no config")
        ]
    served = configs[meta.model_name]
    if (meta.streaming or meta.decoupled) and not is_decoupled(
        meta.model_name, configs
    ):
        problems.append(
            Problem(
                f"{meta.model_name}/{CONFIG_NAME}",
                "must be decoupled: trtbench.json says it is called over a stream",
            )
        )
    declared = {t.name for t in served.input}
    unknown = [n for n in [*meta.inputs, *meta.extra_inputs] if n not in declared]
    if unknown:
        problems.append(
            Problem(
                METADATA_NAME,
                f"input {unknown[0]!r} is not an input of {meta.model_name}",
            )
        )
    return problems


def validate_files(
    files: Mapping[str, str], versions: Mapping[str, list[str]] | None = None
) -> list[Problem]:
    """Check a repository given as ``{relative path: text}`` (what ``render`` returns).

    Args:
        files: repository files; models are the folders holding ``config.pbtxt``.
        versions: sub-folder names of each model folder, when checking a repository on
            disk; None skips the version-folder check (``write.py`` creates ``1/``).

    Returns:
        Problems found, in model order; empty when the repository is valid.
    """
    configs: dict[str, mc.ModelConfig] = {}
    problems: list[Problem] = []
    for path in sorted(files):
        parts = path.split("/")
        if len(parts) == 2 and parts[1] == CONFIG_NAME:
            folder_versions = None if versions is None else versions.get(parts[0], [])
            config, found = _check_model(parts[0], files[path], files, folder_versions)
            problems += found
            if config is not None:
                configs[parts[0]] = config
    if not configs and not problems:
        problems.append(Problem(".", "holds no model (no <model>/config.pbtxt)"))
    for name, config in configs.items():
        if config.platform == "ensemble":
            problems += _check_ensemble(name, config, configs)
        problems += _check_model_refs(name, config, configs)
    if METADATA_NAME in files and configs:
        problems += _check_metadata(files[METADATA_NAME], configs)
    return problems


def read_repository(repo_dir: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Text files of a repository on disk and the sub-folders of each model folder.

    Raises:
        DeployError: ``repo_dir`` is not a directory.
    """
    if not repo_dir.is_dir():
        raise DeployError(
            f"model repository {repo_dir} does not exist; render it with `trtbench deploy`"
        )
    files = {}
    for path in sorted(repo_dir.rglob("*")):
        if path.is_file() and path.suffix in (".pbtxt", ".json", ".py"):
            files[path.relative_to(repo_dir).as_posix()] = path.read_text(
                errors="replace"
            )
    versions = {
        model.name: sorted(p.name for p in model.iterdir() if p.is_dir())
        for model in repo_dir.iterdir()
        if (model / CONFIG_NAME).is_file()
    }
    return files, versions


def validate_repository(repo_dir: Path) -> list[Problem]:
    """:func:`validate_files` on a repository on disk, version folders included."""
    files, versions = read_repository(repo_dir)
    return validate_files(files, versions)


def ensure_valid(problems: list[Problem], repo: str) -> None:
    """Raise when ``problems`` is not empty.

    Raises:
        DeployError: one line naming the first problem (and how many more there are).
    """
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise DeployError(
            f"model repository {repo} is invalid: {problems[0]}{more}; "
            "render it again with `trtbench deploy`"
        )
