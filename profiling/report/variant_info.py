"""What the files of a run directory say about one variant (``build.json``,
``model_repo/<v>/trtbench.json``, ``run.json``, else its name): :class:`VariantInfo` and
:func:`variant_info`, for :mod:`trtbench.profiling.report.run_data` and the readers of
other tools' results (``pipeline/peers.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trtbench.core import methods
from trtbench.core.methods import K_FROM_MAX_DRAFT_LEN

GRAPHS_ON, GRAPHS_OFF, GRAPHS_UNAVAILABLE, UNKNOWN = (
    "on",
    "off",
    "unavailable",
    "unknown",
)


DRAFTING_MODES = K_FROM_MAX_DRAFT_LEN  # modes whose K is max_draft_len


@dataclass(frozen=True)
class VariantInfo:
    """What the build and the deployment say about one variant.

    Attributes:
        name: variant name (as in the CSVs).
        mode: baseline | draft_target | medusa (None when nothing says).
        mode_source: build.json | metadata (trtbench.json / run.json) | name (guessed).
        backend: reference | trtllm | trtllm-pytorch (None when unknown).
        server: the serving stack: triton | vllm (None when unknown).
        runtime: who served an LLM-API variant (``tensorrt_llm`` | ``reference``), else None.
        draft_len: γ of a draft_target or ngram variant (``max_draft_len``).
        tree_nodes: Medusa tree nodes (tokens verified per step minus the root).
        medusa_choices: the Medusa tree served (root paths), when known.
        medusa_heads: number of Medusa heads, when known.
        medusa_layers: residual blocks per Medusa head, when known.
        cuda_graphs: on | off | unavailable | unknown.
        cuda_graphs_reason: why graphs were unavailable, when said.
        gpus: GPUs the build host had (``build.json`` host.gpus; None: not recorded).
        streaming: one response per decode step (False: the whole output at once, e.g.
            draft-target through BLS); None when the repository metadata is absent.
    """

    name: str
    mode: str | None = None
    mode_source: str = ""
    backend: str | None = None
    server: str | None = None
    runtime: str | None = None
    draft_len: int | None = None
    tree_nodes: int | None = None
    medusa_choices: tuple[tuple[int, ...], ...] | None = None
    medusa_heads: int | None = None
    medusa_layers: int | None = None
    cuda_graphs: str = UNKNOWN
    cuda_graphs_reason: str = ""
    gpus: int | None = None
    streaming: bool | None = None


def _graphs(build: dict[str, Any], repo: dict[str, Any]) -> tuple[str, str]:
    """CUDA-graph status from the deployed metadata, else from the build manifest."""
    deployed = repo.get("cuda_graphs") or {}
    built = build.get("cuda_graphs") or {}
    reason = str(deployed.get("reason") or built.get("reason") or "")
    if "enabled" in deployed:
        if deployed["enabled"]:
            return GRAPHS_ON, reason
        return (GRAPHS_UNAVAILABLE if deployed.get("requested") else GRAPHS_OFF), reason
    if built:
        if not built.get("requested"):
            return GRAPHS_OFF, reason
        return (GRAPHS_ON if built.get("available") else GRAPHS_UNAVAILABLE), reason
    return UNKNOWN, reason


def _gpu_count(build: dict[str, Any]) -> int | None:
    gpus = (build.get("host") or {}).get("gpus")
    return len(gpus) if isinstance(gpus, list) else None


def mode_from_name(name: str) -> str | None:
    """Guess a mode from a variant name (``Method.name_hints``: ``medusa…``,
    ``draft…``/``dtm…``, ``baseline…``).

    Only for what no file records: a ``trtbench loadtest`` run against a server trtbench did
    not build, or an AIPerf artifact directory. A run that built its variants reads the
    mode from build.json; a guess is marked (``mode_source`` ``name``) and the report says so.
    """
    low = name.lower()
    for method in reversed(methods.METHODS.values()):  # Method.name_hints, later first
        if any(token in low for token in method.name_hints):
            return method.name
    return None


def variant_info(
    name: str,
    build: dict[str, Any],
    repo: dict[str, Any],
    run: dict[str, Any] | None = None,
) -> VariantInfo:
    """Merge what the files say about one variant (any of the dicts may be empty).

    Precedence: ``build.json``, then ``model_repo/<v>/trtbench.json``, then ``run.json``
    (``build.variants.<v>``; ``loadtest.<v>.endpoint`` for streaming), then the name
    (:func:`mode_from_name`, recorded in ``mode_source``).
    """
    run = run or {}
    built = (run.get("build") or {}).get("variants", {}).get(name) or {}
    tested = (run.get("loadtest") or {}).get(name) or {}
    mode, source = build.get("mode"), "build.json"
    if not mode:
        mode, source = repo.get("mode") or built.get("mode"), "metadata"
    if not mode:
        mode, source = mode_from_name(name), "name"
    method = methods.method_of(mode)
    tree = method is not None and method.tree  # Medusa's heads' tree
    medusa = build.get("medusa") or {}
    choices = medusa.get("choices") or repo.get("medusa_choices")
    draft_len = (
        build.get("max_draft_len")
        or repo.get("max_draft_len")
        or built.get("max_draft_len")
    )
    graphs, reason = _graphs(build or {"cuda_graphs": built.get("cuda_graphs")}, repo)
    streaming = repo.get("streaming")
    if streaming is None and tested.get("endpoint"):
        streaming = tested["endpoint"] == "stream"
    return VariantInfo(
        name=name,
        mode=mode,
        mode_source=source if mode else "",
        backend=build.get("backend") or repo.get("backend") or built.get("backend"),
        server=(build.get("variant") or {}).get("server"),
        runtime=repo.get("runtime"),
        draft_len=int(draft_len) if mode in DRAFTING_MODES and draft_len else None,
        tree_nodes=len(choices) if tree and choices else None,
        medusa_choices=tuple(tuple(int(k) for k in c) for c in choices)
        if tree and choices
        else None,
        medusa_heads=medusa.get("num_heads"),
        medusa_layers=medusa.get("num_layers"),
        cuda_graphs=graphs,
        cuda_graphs_reason=reason,
        streaming=streaming,
        gpus=_gpu_count(build),
    )
