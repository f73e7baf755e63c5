"""``build.json``: the build manifest every backend writes into ``engines/<variant>/``.

Later stages (deploy, loadtest, report) read only this file to learn what an engine is, so it
carries the variant as resolved, the model files (with sha256), the artefacts, the runtime knobs
(CUDA graphs) and where they were or were not available.

Format (JSON, ``schema_version`` 1)::

    {"schema_version": 1, "backend": "reference", "variant": {...VariantSpec...},
     "mode": "medusa", "max_draft_len": 6,
     "models": {"target": {"path": "/…/target", "sha256": {"model.safetensors": "…"},
                           "bytes": 123}, "draft": null, "medusa": {...}},
     "tokenizer_dir": "/…/target",
     "engines": {"target": "."},                # trtllm: per-role engine dirs, relative
     "medusa": {"num_heads": 3, "num_layers": 1, "choices": [[0], [0, 0]]},
     "cuda_graphs": {"requested": true, "available": false, "reason": "no CUDA device"},
     "tensorrt_llm": {"version": "1.2.1", "path": "engine", ...},   # trtllm, trtllm-pytorch
     "versions": {"trtbench": "0.1.0", "torch": "2.13.0+cpu", …},
     "host": {"hostname": "…", "platform": "…", "python": "3.11.7", "gpus": []},
     "build_seconds": 0.4, "bytes_on_disk": 1234, "created_at": "2026-11-29T08:00:00+00:00"}
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import platform
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trtbench import __version__
from trtbench.core import methods
from trtbench.core.data_files import read_json_document, validation_problem
from trtbench.core.errors import BuildError, DataFileError
from trtbench.core.run_dir import BUILD_JSON_SCHEMA_VERSION, write_json_atomic

MANIFEST_NAME = "build.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".engine", ".json", ".model", ".txt")
VERSION_PACKAGES = (
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "tensorrt_llm",
    "tensorrt",
    "tritonclient",
    "nvidia-pytriton",
)


class ModelFiles(BaseModel):
    """A model directory and the sha256 of each weight/config file in it."""

    model_config = ConfigDict(extra="forbid")

    path: str
    sha256: dict[str, str] = Field(default_factory=dict)
    bytes: int = 0


class MedusaInfo(BaseModel):
    """Medusa heads and the tree the engine serves."""

    model_config = ConfigDict(extra="forbid")

    num_heads: int
    num_layers: int
    choices: list[list[int]]


class CudaGraphs(BaseModel):
    """Whether CUDA graphs were asked for and whether the backend can use them here."""

    model_config = ConfigDict(extra="forbid")

    requested: bool
    available: bool
    reason: str = ""


RecordedMode = Literal[(*methods.METHODS, methods.LEGACY_EAGLE)]  # type: ignore[valid-type]
"""build.json's ``mode``: every method, and the legacy EAGLE engines ``inspect`` reads."""


class BuildManifest(BaseModel):
    """Contents of ``build.json`` (see the module docstring)."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = BUILD_JSON_SCHEMA_VERSION
    backend: Literal["reference", "trtllm", "trtllm-pytorch"]
    variant: dict[str, Any]
    mode: RecordedMode
    max_draft_len: int | None = None
    models: dict[str, ModelFiles | None]
    tokenizer_dir: str
    engines: dict[str, str] = Field(default_factory=dict)
    medusa: MedusaInfo | None = None
    cuda_graphs: CudaGraphs
    versions: dict[str, str] = Field(default_factory=dict)
    host: dict[str, Any] = Field(default_factory=dict)
    build_seconds: float = 0.0
    bytes_on_disk: int = 0
    created_at: str = ""

    @property
    def name(self) -> str:
        return str(self.variant.get("name", ""))


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


REHASH_MAX_BYTES = 64 << 20
"""Model files up to this size are hashed again by :func:`changed_model_files` (configs,
tokenizers; the weights of a large model are not read again on every check)."""


def changed_model_files(
    manifest: BuildManifest, max_bytes: int = REHASH_MAX_BYTES
) -> list[str]:
    """Model files the build hashed that changed since: ``role: path/name (why)``.

    Files still present and at most ``max_bytes`` are hashed again and compared; a larger
    one counts as changed only when it is gone. A model folder that is not there at all
    (a run directory moved to another host) is not checked.
    """
    changed = []
    for role, files in manifest.models.items():
        if files is None or not Path(files.path).is_dir():
            continue
        for name, digest in files.sha256.items():
            path = Path(files.path) / name
            if not path.is_file():
                changed.append(f"{role}: {path} (gone)")
            elif path.stat().st_size <= max_bytes and sha256_file(path) != digest:
                changed.append(f"{role}: {path} (sha256 differs from build.json)")
    return changed


def describe_model_dir(
    path: Path, suffixes: Iterable[str] = WEIGHT_SUFFIXES
) -> ModelFiles:
    """Hash the weight/config files directly inside ``path`` (sorted by name)."""
    files = sorted(
        p for p in path.iterdir() if p.is_file() and p.suffix in tuple(suffixes)
    )
    return ModelFiles(
        path=str(path.resolve()),
        sha256={p.name: sha256_file(p) for p in files},
        bytes=sum(p.stat().st_size for p in files),
    )


class ModelDescriber:
    """:func:`describe_model_dir` that hashes each model directory once.

    One instance serves one ``build_variants`` call, so a target shared by every variant
    (possibly many GB) is read once, not once per variant.
    """

    def __init__(self) -> None:
        self._seen: dict[Path, ModelFiles] = {}

    def __call__(self, path: Path) -> ModelFiles:
        key = path.resolve()
        if key not in self._seen:
            self._seen[key] = describe_model_dir(path)
        return self._seen[key]


def dir_bytes(path: Path) -> int:
    """Total size in bytes of the regular files under ``path`` (symlinks not followed)."""
    return sum(
        p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()
    )


def library_versions(packages: Iterable[str] = VERSION_PACKAGES) -> dict[str, str]:
    """Installed versions of the packages that shape a build (absent ones are skipped)."""
    out = {"trtbench": __version__, "python": platform.python_version()}
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def host_info() -> dict[str, Any]:
    """Hostname, platform, CPU count and Python; GPU facts are added by callers that know them."""
    import os

    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }


def utc_now() -> str:
    """Current UTC time, ISO 8601 (labels only; durations use perf_counter_ns)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def write_manifest(engine_dir: Path, manifest: BuildManifest) -> Path:
    """Write ``engine_dir/build.json`` atomically; returns its path."""
    path = engine_dir / MANIFEST_NAME
    write_json_atomic(path, manifest.model_dump(mode="json"))
    return path


def read_manifest(engine_dir: Path) -> BuildManifest:
    """Read and validate ``engine_dir/build.json`` (format: the module docstring).

    Raises:
        BuildError: the directory or manifest is missing ("run trtbench build").
        DataFileError: the manifest is not JSON (truncated), not a valid manifest (the
            message names the first bad field), or has a ``schema_version`` newer than
            :data:`~trtbench.core.run_dir.BUILD_JSON_SCHEMA_VERSION`.
    """
    path = engine_dir / MANIFEST_NAME
    if not engine_dir.is_dir():
        raise BuildError(
            f"engine dir {engine_dir} does not exist; run `trtbench build` first"
        )
    if not path.is_file():
        raise BuildError(
            f"engine dir {engine_dir} has no {MANIFEST_NAME} (not built or the build failed); "
            "run `trtbench build` again"
        )
    fix = "run `trtbench build` again for this variant"
    doc = read_json_document(
        path, max_schema_version=BUILD_JSON_SCHEMA_VERSION, fix=fix
    )
    try:
        return BuildManifest.model_validate(doc)
    except ValidationError as exc:
        raise DataFileError(
            f"{path} is not a valid build manifest ({validation_problem(exc)}); {fix}"
        ) from None
