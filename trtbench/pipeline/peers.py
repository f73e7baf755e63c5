"""Measurements made by another tool, as runs ``trtbench compare`` and ``report`` can show.

An AIPerf "run" is an artifact directory (``profile_export.jsonl`` +
``profile_export_aiperf.json``), or a folder holding several (one per load tier); its variant
label is the folder's name, or NAME in the ``NAME=DIR`` form (give a trtbench variant's name to
line the two up row by row in ``compare``). The mapping of names is in docs/peers.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from trtbench.core.errors import ConfigError
from trtbench.core.export import Schema
from trtbench.core.run_dir import RunDir
from trtbench.profiling.peers.aiperf_files import (
    AGGREGATE_FILE,
    RECORDS_FILE,
    artifact_dirs,
    read_artifacts,
)
from trtbench.profiling.peers.aiperf_summary import summary_frame, summary_notes
from trtbench.profiling.report.run_data import RunData, load_run
from trtbench.profiling.report.variant_info import VariantInfo, mode_from_name


@dataclasses.dataclass(frozen=True)
class LoadedRun:
    """A run as report/compare read it, and what the report should say about its origin."""

    run: RunData
    notes: list[str]


def split_label(arg: str | Path) -> tuple[str | None, Path]:
    """``NAME=DIR`` → (NAME, DIR); anything else (or an existing path with ``=`` in it) →
    (None, path)."""
    text = str(arg)
    name, sep, rest = text.partition("=")
    if sep and name and rest and not Path(text).exists():
        return name, Path(rest)
    return None, Path(text)


def load_peer(arg: str | Path) -> LoadedRun:
    """An AIPerf run (``[NAME=]DIR``) as :class:`~trtbench.profiling.report.run_data.RunData`: one variant, one
    summary row per artifact directory (tier), mode guessed from the label.

    Raises:
        ConfigError: no artifact directory at or below DIR, two directories of the same tier,
            or a malformed file (``aiperf_files.read_artifacts``).
    """
    label, path = split_label(arg)
    dirs = artifact_dirs(path)
    if not dirs:
        raise ConfigError(
            f"{path}: no AIPerf artifact directory ({RECORDS_FILE} + {AGGREGATE_FILE}) at or "
            "below it; give the folder `aiperf profile --artifact-dir` wrote"
        )
    tiers = [read_artifacts(d) for d in dirs]
    seen: dict[str, Path] = {}
    for art in tiers:
        if art.tier in seen:
            raise ConfigError(
                f"{art.path} and {seen[art.tier]} are both tier {art.tier}; give one "
                "AIPerf artifact directory per load"
            )
        seen[art.tier] = art.path
    variant = label or path.resolve().name
    mode = mode_from_name(variant)
    info = VariantInfo(name=variant, mode=mode, mode_source="name" if mode else "")
    run = RunData(path.resolve(), {}, {variant: info}, summary_frame(tiers, variant))
    return LoadedRun(run, summary_notes(tiers, variant))


def load_any(arg: str | Path, schemas: Mapping[str, Schema]) -> LoadedRun:
    """A trtbench run directory (``load_run``), else an AIPerf run (:func:`load_peer`).

    Raises:
        ConfigError / DataFileError: as ``load_run`` (neither kind of run found) or
            :func:`load_peer`.
    """
    label, path = split_label(arg)
    if label is None and (
        RunDir(path).summary_csv.is_file() or not artifact_dirs(path)
    ):
        return LoadedRun(load_run(path, schemas), [])
    return load_peer(arg)


def with_peers(run: RunData, peers: Sequence[LoadedRun]) -> RunData:
    """``run`` with the peers' variants and summary rows added beside its own.

    Raises:
        ConfigError: a peer's label is already a variant of the run (or of another peer).
    """
    variants = dict(run.variants)
    frames = [run.summary]
    for peer in peers:
        for name, info in peer.run.variants.items():
            if name in variants:
                raise ConfigError(
                    f"peer {peer.run.root} is labelled {name!r}, already a variant of "
                    f"{run.root}; give it another name with NAME={peer.run.root}"
                )
            variants[name] = info
        frames.append(peer.run.summary)
    summary = pd.concat(frames, ignore_index=True)
    return dataclasses.replace(run, variants=variants, summary=summary)
