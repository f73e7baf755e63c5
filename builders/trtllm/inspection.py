"""Describe a TensorRT-LLM engine directory from its ``config.json`` (CPU only, no tensorrt_llm).

Engine layout (NVIDIA/TensorRT-LLM ``tensorrt_llm/builder.py`` ``Engine.save``): ``config.json``
(written by rank 0) and one ``rank{r}.engine`` per TP×PP rank. ``config.json`` =
``{"version", "pretrained_config": {architecture, dtype, mapping{world_size, tp_size, pp_size},
quantization{quant_algo, kv_cache_quant_algo}, Medusa: max_draft_len, num_medusa_heads,
num_medusa_layers; EAGLE: num_eagle_layers}, "build_config": {max_batch_size, max_input_len,
max_seq_len, max_beam_width, max_num_tokens, opt_num_tokens, max_draft_len,
speculative_decoding_mode (IntFlag int), kv_cache_type, gather_*_logits, plugin_config{…}}}``.

A run's variant directory (``engines/<variant>``) holds one engine at its root, or, for
draft_target, ``target/`` and ``draft/`` (named in ``build.json`` ``engines``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trtbench.builders.manifest import MANIFEST_NAME, BuildManifest, read_manifest
from trtbench.core import stacks
from trtbench.core.data_files import read_json_document
from trtbench.core.errors import BuildError, DataFileError
from trtbench.core.json_files import read_json_object
from trtbench.core.methods import LEGACY_EAGLE, METHODS
from trtbench.core.run_dir import BUILD_JSON_SCHEMA_VERSION
from trtbench.core.units import format_bytes

# SpeculativeDecodingMode (IntFlag, auto()): contract enums.SpeculativeDecodingMode.
SPEC_MODE_BITS = {
    1: "NONE",
    2: "DRAFT_TOKENS_EXTERNAL",
    4: "MEDUSA",
    8: "LOOKAHEAD_DECODING",
    16: "EXPLICIT_DRAFT_TOKENS",
    32: "EAGLE",
    64: "NGRAM",
    128: "USER_PROVIDED",
    256: "SAVE_HIDDEN_STATES",
    512: "AUTO",
}
MODE_NAMES = {
    **{m.engine_mode: m.name for m in METHODS.values() if m.engine_mode},
    "EAGLE": LEGACY_EAGLE,
    "LOOKAHEAD_DECODING": "lookahead",
    "EXPLICIT_DRAFT_TOKENS": "redrafter",
}
_RANK_FILE = re.compile(r"^rank(\d+)\.engine$")


@dataclass(frozen=True)
class EngineSummary:
    """One engine as its config.json describes it; sizes in bytes, lengths in tokens."""

    engine_dir: str
    role: str
    tensorrt_llm_version: str | None
    architecture: str | None
    dtype: str | None
    mode: str
    speculative_decoding_mode: str
    max_draft_len: int
    num_medusa_heads: int | None
    num_medusa_layers: int | None
    medusa_max_draft_len: int | None
    num_eagle_layers: int | None
    tp_size: int
    pp_size: int
    world_size: int
    max_batch_size: int | None
    max_input_len: int | None
    max_seq_len: int | None
    max_beam_width: int | None
    max_num_tokens: int | None
    opt_num_tokens: int | None
    kv_cache_type: str | None
    quant_algo: str | None
    kv_cache_quant_algo: str | None
    gather_context_logits: bool
    gather_generation_logits: bool
    plugins: Mapping[str, Any] = field(default_factory=dict)
    bytes_per_rank: Mapping[int, int] = field(default_factory=dict)

    @property
    def missing_ranks(self) -> list[int]:
        """Ranks of the mapping with no ``rank{r}.engine`` file."""
        return [r for r in range(self.world_size) if r not in self.bytes_per_rank]


def decode_spec_mode(value: Any) -> str:
    """``build_config.speculative_decoding_mode`` (int, name or None) → member name.

    Raises:
        BuildError: an int that is not one SpeculativeDecodingMode bit, or an unknown name.
    """
    if value is None:
        return "NONE"
    if isinstance(value, int) and not isinstance(value, bool):
        if value in SPEC_MODE_BITS:
            return SPEC_MODE_BITS[value]
    elif isinstance(value, str):
        name = value.rsplit(".", 1)[-1].upper()
        if name in SPEC_MODE_BITS.values():
            return name
    raise BuildError(
        f"speculative_decoding_mode {value!r} is not a TensorRT-LLM SpeculativeDecodingMode; "
        "the engine config.json is damaged or from an unknown version: rebuild the engine"
    )


def read_engine_config(engine_dir: Path) -> dict[str, Any]:
    """Load ``engine_dir/config.json``.

    Raises:
        BuildError: missing or not an engine config (no ``pretrained_config`` /
            ``build_config``).
    """
    path = Path(engine_dir) / "config.json"
    data = read_json_object(
        path,
        error=BuildError,
        missing_fix="pass a TensorRT-LLM engine directory (or run "
        "`trtbench build --backend trtllm`)",
        bad_fix="rebuild the engine",
    )
    if not all(
        isinstance(data.get(k), dict) for k in ("pretrained_config", "build_config")
    ):
        raise BuildError(
            f"{path} has no pretrained_config/build_config: not a TensorRT-LLM engine "
            "config (a checkpoint or HF config?); pass the engine output directory"
        )
    return data


def rank_engine_bytes(engine_dir: Path) -> dict[int, int]:
    """``{rank: size of rank{rank}.engine}`` for the files present."""
    out = {}
    for path in Path(engine_dir).iterdir():
        match = _RANK_FILE.match(path.name)
        if match and path.is_file():
            out[int(match[1])] = path.stat().st_size
    return dict(sorted(out.items()))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def summarize_engine_config(
    config: Mapping[str, Any],
    engine_dir: Path | str = "",
    role: str = "target",
    bytes_per_rank: Mapping[int, int] | None = None,
) -> EngineSummary:
    """Summarize a parsed engine config.json (pure; sizes are passed in).

    Raises:
        BuildError: an unknown speculative decoding mode.
    """
    pre, build = config["pretrained_config"], config["build_config"]
    mapping = pre.get("mapping") or {}
    quant = pre.get("quantization") or {}
    tp, pp = _int(mapping.get("tp_size")) or 1, _int(mapping.get("pp_size")) or 1
    spec = decode_spec_mode(build.get("speculative_decoding_mode"))
    kv_type = build.get("kv_cache_type")
    return EngineSummary(
        engine_dir=str(engine_dir),
        role=role,
        tensorrt_llm_version=config.get("version"),
        architecture=pre.get("architecture"),
        dtype=pre.get("dtype"),
        mode=MODE_NAMES.get(spec, spec.lower()),
        speculative_decoding_mode=spec,
        max_draft_len=_int(build.get("max_draft_len")) or 0,
        num_medusa_heads=_int(pre.get("num_medusa_heads")),
        num_medusa_layers=_int(pre.get("num_medusa_layers")),
        medusa_max_draft_len=_int(pre.get("max_draft_len")),
        num_eagle_layers=_int(pre.get("num_eagle_layers")),
        tp_size=tp,
        pp_size=pp,
        world_size=_int(mapping.get("world_size")) or tp * pp,
        max_batch_size=_int(build.get("max_batch_size")),
        max_input_len=_int(build.get("max_input_len")),
        max_seq_len=_int(build.get("max_seq_len")),
        max_beam_width=_int(build.get("max_beam_width")),
        max_num_tokens=_int(build.get("max_num_tokens")),
        opt_num_tokens=_int(build.get("opt_num_tokens")),
        kv_cache_type=str(kv_type).rsplit(".", 1)[-1].upper() if kv_type else None,
        quant_algo=quant.get("quant_algo"),
        kv_cache_quant_algo=quant.get("kv_cache_quant_algo"),
        gather_context_logits=bool(build.get("gather_context_logits")),
        gather_generation_logits=bool(build.get("gather_generation_logits")),
        plugins=dict(build.get("plugin_config") or {}),
        bytes_per_rank=dict(bytes_per_rank or {}),
    )


def summarize_engine(engine_dir: Path, role: str = "target") -> EngineSummary:
    """Read and summarize one engine directory (config.json + rank files).

    Raises:
        BuildError: see :func:`read_engine_config`.
    """
    config = read_engine_config(engine_dir)
    sizes = rank_engine_bytes(engine_dir)
    return summarize_engine_config(config, engine_dir, role, sizes)


def _engine_dirs(path: Path) -> dict[str, Path]:
    """role → engine dir under a variant dir (``build.json`` engines, else subdirs)."""
    if (path / "config.json").is_file():
        return {"target": path}
    manifest = path / "build.json"
    if manifest.is_file():
        doc = read_json_document(
            manifest,
            max_schema_version=BUILD_JSON_SCHEMA_VERSION,
            fix="re-run `trtbench build`, or delete it",
        )
        engines = doc.get("engines") or {}
        if not isinstance(engines, dict):
            raise DataFileError(
                f"{manifest}: engines is not an object; re-run `trtbench build`"
            )
        if engines:
            return {role: (path / rel) for role, rel in engines.items()}
    found = {p.name: p for p in sorted(path.iterdir()) if (p / "config.json").is_file()}
    if not found:
        raise BuildError(
            f"{path} holds no engine (no config.json here or in a sub-directory); pass "
            "an engine directory such as runs/<name>/engines/<variant>"
        )
    return found


def inspect_engines(path: Path) -> list[EngineSummary]:
    """Summaries of every engine in an engine or variant directory.

    Raises:
        BuildError: the directory does not exist or holds no readable engine.
    """
    path = Path(path)
    if not path.is_dir():
        raise BuildError(f"{path} is not a directory; pass an engine directory")
    return [summarize_engine(d, role) for role, d in _engine_dirs(path).items()]


def _enabled_plugins(plugins: Mapping[str, Any]) -> str:
    on = []
    for key, value in sorted(plugins.items()):
        if value is True:
            on.append(key)
        elif isinstance(value, str) and key.endswith("_plugin"):
            on.append(f"{key}={value}")
    return ", ".join(on) or "none"


def format_summary(s: EngineSummary) -> str:
    """Human-readable block for one engine."""
    draft = f"max_draft_len={s.max_draft_len}"
    if s.num_medusa_heads is not None:
        draft += f", medusa heads={s.num_medusa_heads} x {s.num_medusa_layers} layer(s)"
    if s.num_eagle_layers is not None:
        draft += f", eagle layers={s.num_eagle_layers}"
    sizes = ", ".join(f"rank{r}={format_bytes(b)}" for r, b in s.bytes_per_rank.items())
    sizes = sizes or "no rank files"
    if s.missing_ranks:
        sizes += f" (missing: {', '.join(f'rank{r}.engine' for r in s.missing_ranks)})"
    lines = [
        f"engine {s.role}: {s.engine_dir}",
        f"  TensorRT-LLM {s.tensorrt_llm_version}, {s.architecture}, dtype {s.dtype}",
        f"  mode {s.mode} ({s.speculative_decoding_mode}), {draft}",
        f"  TP={s.tp_size} PP={s.pp_size} (world {s.world_size}), "
        f"quant={s.quant_algo} kv_quant={s.kv_cache_quant_algo}",
        f"  shapes: batch={s.max_batch_size} input={s.max_input_len} seq={s.max_seq_len} "
        f"beam={s.max_beam_width} num_tokens={s.max_num_tokens}, kv_cache={s.kv_cache_type}",
        f"  logits: context={s.gather_context_logits} generation={s.gather_generation_logits}",
        f"  plugins: {_enabled_plugins(s.plugins)}",
        f"  bytes per rank: {sizes}",
    ]
    return "\n".join(lines)


def reference_summary(manifest: BuildManifest) -> dict[str, Any]:
    """What a reference-backend build is, from its ``build.json`` (it has no engine files)."""
    variant = manifest.variant
    return {
        "backend": manifest.backend,
        "variant": manifest.name,
        "mode": manifest.mode,
        "max_draft_len": manifest.max_draft_len,
        "medusa": manifest.medusa.model_dump() if manifest.medusa else None,
        "dtype": variant.get("dtype"),
        "max_batch_size": variant.get("max_batch_size"),
        "max_input_len": variant.get("max_input_len"),
        "max_seq_len": variant.get("max_seq_len"),
        "cuda_graphs": manifest.cuda_graphs.model_dump(),
        "models": {k: (m.path if m else None) for k, m in manifest.models.items()},
        "model_bytes": manifest.bytes_on_disk,
    }


def format_reference_summary(summary: Mapping[str, Any]) -> str:
    """Human-readable block for a reference-backend build."""
    graphs = summary["cuda_graphs"]
    if not graphs["requested"]:
        graph_text = "off"
    elif graphs["available"]:
        graph_text = "on"
    else:
        graph_text = f"requested but unavailable ({graphs['reason']})"
    medusa = summary["medusa"]
    draft = f"max_draft_len={summary['max_draft_len']}"
    if medusa:
        draft += (
            f", medusa heads={medusa['num_heads']} x {medusa['num_layers']} layer(s), "
            f"tree of {len(medusa['choices'])} nodes"
        )
    models = ", ".join(f"{k}={v}" for k, v in summary["models"].items() if v)
    return "\n".join(
        [
            f"reference build {summary['variant']} (PyTorch reference engine; no engine files)",
            f"  mode {summary['mode']}, {draft}",
            f"  dtype {summary['dtype']}, batch={summary['max_batch_size']} "
            f"input={summary['max_input_len']} seq={summary['max_seq_len']}",
            f"  CUDA graphs {graph_text}",
            f"  models ({format_bytes(summary['model_bytes'])}): {models}",
        ]
    )


def render_engine_inspection(path: Path, as_json: bool = False) -> str:
    """What ``trtbench inspect`` prints: text blocks, or a JSON list of summaries.

    A reference-backend variant (``build.json`` with ``backend: reference``) is described
    from its manifest, since the reference engine runs the Hugging Face models directly.

    Raises:
        BuildError: see :func:`inspect_engines`.
    """
    path = Path(path)
    if (path / MANIFEST_NAME).is_file() and not (path / "config.json").is_file():
        manifest = read_manifest(path)
        if stacks.backend(manifest.backend).reference_engine:
            summary = reference_summary(manifest)
            if as_json:
                return json.dumps([summary], indent=2)
            return format_reference_summary(summary)
    summaries = inspect_engines(path)
    if as_json:
        return json.dumps(
            [{**asdict(s), "missing_ranks": s.missing_ranks} for s in summaries],
            indent=2,
        )
    return "\n".join(format_summary(s) for s in summaries)
