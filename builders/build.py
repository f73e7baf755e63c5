"""Build every selected variant of a bench spec with one backend, and record it in run.json.

``build_variants`` is what ``trtbench build`` calls. Each backend is one function
``(spec, variant, out, *, dry_run, describe) -> BuildManifest``; :func:`backend_builder`
picks it. One :class:`~trtbench.builders.manifest.ModelDescriber` serves all variants.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from trtbench.builders.manifest import (
    BuildManifest,
    ModelDescriber,
    host_info,
    library_versions,
    utc_now,
)
from trtbench.run_dir import RunDir
from trtbench.spec import BenchSpec
from trtbench.units import format_bytes

logger = logging.getLogger(__name__)

Builder = Callable[..., BuildManifest]


def backend_builder(backend: str) -> Builder:
    """The build function of ``backend`` (``reference`` imports torch lazily)."""
    if backend == "trtllm":
        from trtbench.builders.trtllm.backend import build_trtllm_variant

        return build_trtllm_variant
    from trtbench.builders.reference.build import build_reference_variant

    return build_reference_variant


def build_variants(
    spec: BenchSpec,
    names: Sequence[str] = (),
    backend: str | None = None,
    out: RunDir | None = None,
    dry_run: bool = False,
) -> list[BuildManifest]:
    """Build the variants named (all when empty) and record the build in ``run.json``.

    Args:
        spec: the validated bench spec.
        names: variant names to build, in any order (built in spec order).
        backend: ``reference`` or ``trtllm`` (default: the spec's).
        out: the run directory (default ``runs/<spec name>`` under the current directory).
        dry_run: validate and return the manifests without writing anything.

    Returns:
        One manifest per variant, in spec order.

    Raises:
        ConfigError: unknown variant (known names listed) or invalid input.
        ModelMismatchError: draft or Medusa heads incompatible with the target.
        NotAvailableError: backend trtllm without TensorRT-LLM.
    """
    out = out or RunDir(Path("runs") / spec.name)
    backend = backend or spec.backend
    variants = spec.select(tuple(names))
    builder = backend_builder(backend)
    started = utc_now()
    describe = ModelDescriber()
    manifests = [
        builder(spec, v, out, dry_run=dry_run, describe=describe) for v in variants
    ]
    if not dry_run:
        _record(spec, backend, out, manifests, started)
        for manifest in manifests:
            logger.info("%s", describe_build(manifest))
    return manifests


def _record(
    spec: BenchSpec,
    backend: str,
    out: RunDir,
    manifests: list[BuildManifest],
    started: str,
) -> None:
    """Merge this build into run.json's ``build`` section (earlier variants are kept)."""
    previous = out.read_run_json().get("build", {}).get("variants", {})
    variants = {
        **previous,
        **{
            m.name: {
                "mode": m.mode,
                "backend": m.backend,
                "max_draft_len": m.max_draft_len,
                "build_seconds": m.build_seconds,
                "bytes_on_disk": m.bytes_on_disk,
                "cuda_graphs": m.cuda_graphs.model_dump(),
                "built_at": m.created_at,
            }
            for m in manifests
        },
    }
    out.update_run_json(
        "build",
        {
            "backend": backend,
            "spec": spec.model_dump(mode="json"),
            "variants": variants,
            "versions": library_versions(),
            "host": host_info(),
            "started_at": started,
            "finished_at": utc_now(),
        },
    )


def describe_build(manifest: BuildManifest, dry_run: bool = False) -> str:
    """One line per variant: name, mode, draft size, bytes, seconds, CUDA graphs."""
    if manifest.mode == "draft_target":
        draft = f"K={manifest.max_draft_len}"
    elif manifest.mode == "medusa" and manifest.medusa is not None:
        depth = max(len(c) for c in manifest.medusa.choices)
        draft = (
            f"tree={len(manifest.medusa.choices)} nodes, depth {depth}, "
            f"max_draft_len={manifest.max_draft_len}"
        )
    else:
        draft = "no draft"
    graphs = manifest.cuda_graphs
    if not graphs.requested:
        cg = "cuda_graphs=off"
    elif graphs.available:
        cg = "cuda_graphs=on"
    else:
        cg = f"cuda_graphs=unavailable ({graphs.reason})"
    head = f"{manifest.name}: {manifest.backend} {manifest.mode}, {draft}"
    if dry_run:
        checked = (
            "plan passed the TensorRT-LLM contract checks"
            if manifest.backend == "trtllm"
            else "inputs checked"
        )
        return f"would build {head}, {cg} ({checked}; nothing written)"
    return (
        f"built {head}, {format_bytes(manifest.bytes_on_disk)} on disk, "
        f"{manifest.build_seconds:.2f} s, {cg}"
    )
