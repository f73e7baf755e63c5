"""Hand-written build manifests for rendering and validation tests (no engines needed)."""

from __future__ import annotations

from pathlib import Path

from trtbench.builders.manifest import BuildManifest

ENGINE_DIR = Path("/runs/r/engines/v")
TREE = [[0], [1], [0, 0]]


def manifest(
    backend: str, mode: str, graphs=(False, False), **variant
) -> BuildManifest:
    """A build.json for variant ``v`` (max_batch_size 4 unless given)."""
    engines = {"target": "target"}
    if mode == "draft_target":
        engines["draft"] = "draft"
    return BuildManifest(
        backend=backend,
        mode=mode,
        variant={"name": "v", "mode": mode, "max_batch_size": 4, **variant},
        max_draft_len={"draft_target": 4, "medusa": 3}.get(mode),
        models={},
        tokenizer_dir="/models/target",
        engines=engines,
        medusa={"num_heads": 2, "num_layers": 1, "choices": TREE}
        if mode == "medusa"
        else None,
        cuda_graphs={
            "requested": graphs[0],
            "available": graphs[1],
            "reason": "" if graphs[1] else "no CUDA device",
        },
    )
