"""``trtbench build --backend reference``: validate the model dirs and write ``build.json``.

The reference "engine" is the Hugging Face dirs themselves, loaded by
:func:`trtbench.builders.reference.loading.load_engine`; the engine dir holds only
``build.json``, which records them with the sha256 of every weight/config file. Building
therefore means checking everything a load would trip over, up front, with one-line errors:
paths, ``config.json``, draft/target vocabulary and tokenizer, Medusa heads against the
target, the tree against the heads and ``max_draft_len``, an EAGLE-3 checkpoint against the
target (``eagle3.check_eagle3``), and options the reference engine cannot honour.

A method's own checks and build notes live in its module of ``builders/reference/methods/``
(the hooks ``check_models`` and ``build_notes``, found by :func:`method_hook`); this module
holds the checks they share and never names a method.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from trtbench.builders.checkpoint import check_weights_match_config
from trtbench.builders.manifest import (
    BuildManifest,
    CudaGraphs,
    MedusaInfo,
    ModelFiles,
    describe_model_dir,
    host_info,
    library_versions,
    utc_now,
    write_manifest,
)
from trtbench.core import methods
from trtbench.core.errors import ConfigError, ModelMismatchError
from trtbench.core.json_files import read_json_object
from trtbench.core.run_dir import RunDir
from trtbench.spec.bench import BenchSpec, VariantSpec

logger = logging.getLogger(__name__)

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "vocab.json",
    "tokenizer_config.json",
)


def check_model_dir(path: Path | None, field: str, what: str) -> Path:
    """A model dir must exist and hold ``config.json``.

    Raises:
        ConfigError: unset, missing or without config.json (the message names ``field``).
    """
    if path is None:
        raise ConfigError(f"{field} is not set; give the {what} directory in the spec")
    if not path.exists():
        raise ConfigError(
            f"{field}: {path} does not exist; set it to the {what} directory"
        )
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"{field}: {path} has no config.json; point it at a {what} saved with "
            "save_pretrained"
        )
    return path


def _read_config(path: Path, field: str) -> dict[str, Any]:
    config = read_json_object(
        path / "config.json",
        label=f"{field}: ",
        missing_fix=f"point {field} at a model saved with save_pretrained",
        bad_fix="re-save the model",
    )
    for key in ("vocab_size", "hidden_size"):
        if not isinstance(config.get(key), int):
            raise ConfigError(
                f"{field}: {path / 'config.json'} has no integer {key}; it is not a causal "
                "LM config, point it at one"
            )
    return config


def _tokenizer_vocab(path: Path, field: str) -> dict[str, int] | None:
    """The tokenizer's token → id map, or None when ``path`` holds no tokenizer files."""
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        return None
    try:
        return dict(AutoTokenizer.from_pretrained(path).get_vocab())
    except Exception as exc:  # any loader failure is a bad model dir
        raise ConfigError(
            f"{field}: the tokenizer in {path} cannot be loaded ({type(exc).__name__}: "
            f"{exc}); re-save it with the model"
        ) from None


def vocab_sha256(vocab: dict[str, int]) -> str:
    """sha256 of a token → id map (sorted by id, then token; JSON-encoded)."""
    items = sorted(vocab.items(), key=lambda kv: (kv[1], kv[0]))
    return hashlib.sha256(json.dumps(items, ensure_ascii=False).encode()).hexdigest()


def check_target(path: Path) -> tuple[Path, dict[str, int], dict[str, Any]]:
    """The target dir must hold config.json and a tokenizer; returns it, the vocab and its
    config.json (read once, for the checks of the parts that draft for it).

    Raises:
        ConfigError: missing dir, config.json or tokenizer, or weights that are not what
            config.json describes (naming ``models.target``).
    """
    target = check_model_dir(path, "models.target", "target model")
    vocab = _tokenizer_vocab(target, "models.target")
    if vocab is None:
        raise ConfigError(
            f"models.target: {target} has no tokenizer ({', '.join(TOKENIZER_FILES[:2])}); "
            "save the tokenizer with the target model"
        )
    config = _read_config(target, "models.target")
    check_weights_match_config(target, config, "models.target")
    return target, vocab, config


def check_draft(
    draft: Path,
    where: str,
    target_config: dict[str, Any],
    target_vocab: dict[str, int],
) -> None:
    """The draft (at spec field ``where``) must hold weights its config.json describes and
    share the target's vocabulary size and tokenizer; each config.json is read once.

    Raises:
        ConfigError: a config.json that is not a causal LM's, or weights that disagree with it.
        ModelMismatchError: vocab_size or the tokenizer's vocabulary differs.
    """
    config = _read_config(draft, where)
    check_weights_match_config(draft, config, where)
    t_size, d_size = target_config["vocab_size"], config["vocab_size"]
    if d_size != t_size:
        raise ModelMismatchError(
            f"{where}: vocab_size {d_size} differs from the target's {t_size}; "
            "use a draft trained with the target's tokenizer"
        )
    d_vocab = _tokenizer_vocab(draft, where)
    if d_vocab is not None and vocab_sha256(d_vocab) != vocab_sha256(target_vocab):
        diff = len(set(d_vocab.items()) ^ set(target_vocab.items()))
        raise ModelMismatchError(
            f"{where}: the tokenizer in {draft} differs from the target's "
            f"({diff} token/id pairs differ); use a draft trained with the target's tokenizer"
        )


def check_medusa(
    target: Path, heads_dir: Path, variant: VariantSpec, index: int
) -> tuple[MedusaInfo, int]:
    """Heads must match the target; the tree must fit the heads and ``max_draft_len``.

    Returns:
        The Medusa section of build.json and max_draft_len (default: the tree's node count).

    Raises:
        ModelMismatchError: heads' hidden size or vocab differ from the target's.
        ConfigError: the tree is malformed, deeper than the heads, or larger than
            max_draft_len (the message names ``variants[i].medusa_choices``).
    """
    from trtbench.builders.medusa_tree import resolve_choices, validate_choices
    from trtbench.builders.reference.medusa_heads import read_medusa_config

    config = _read_config(target, "models.target")
    heads = read_medusa_config(heads_dir)
    for key in ("hidden_size", "vocab_size"):
        if heads[key] != config[key]:
            raise ModelMismatchError(
                f"models.medusa: the heads in {heads_dir} have {key} {heads[key]} but the "
                f"target has {config[key]}; use Medusa heads trained on this target"
            )
    field = f"variants[{index}].medusa_choices"
    try:
        choices = resolve_choices(variant.tree)
        limit = variant.max_draft_len or len(choices)
        tree = validate_choices(
            choices, max_draft_len=limit, num_heads=heads["num_heads"]
        )
    except ConfigError as exc:
        raise ConfigError(f"{field} (variant {variant.name!r}): {exc}") from None
    info = MedusaInfo(
        num_heads=heads["num_heads"],
        num_layers=heads["num_layers"],
        choices=[list(c) for c in tree],
    )
    return info, limit


def check_reference_options(variant: VariantSpec, index: int) -> None:
    """Refuse options the reference engine cannot honour instead of ignoring them.

    Raises:
        ConfigError: tp_size/pp_size > 1, max_beam_width > 1 or fp8 quantization.
    """
    where = f"variants[{index}]"
    unsupported = {
        "tp_size": (variant.tp_size, 1),
        "pp_size": (variant.pp_size, 1),
        "max_beam_width": (variant.max_beam_width, 1),
        "quantization": (variant.quantization, "none"),
    }
    for key, (value, plain) in unsupported.items():
        if value != plain:
            raise ConfigError(
                f"{where}.{key} is {value!r}, but the reference backend runs one device, "
                f"greedy, unquantized; set {key}: {plain!r} or use --backend trtllm"
            )


def cuda_graphs_at_build(requested: bool) -> CudaGraphs:
    """What the build host can say about CUDA graphs (the engine re-checks at load)."""
    if not requested:
        return CudaGraphs(requested=False, available=False, reason="not requested")
    import torch

    if torch.cuda.is_available():
        return CudaGraphs(
            requested=True,
            available=True,
            reason="the decode step is captured with torch.cuda.CUDAGraph when the engine loads",
        )
    return CudaGraphs(
        requested=True,
        available=False,
        reason=f"no CUDA device on the build host (torch {torch.__version__}); the "
        "reference engine runs the decode step eagerly on CPU",
    )


@dataclass(frozen=True)
class ModelCheck:
    """What a method's ``check_models`` hook is given (:func:`method_hook`).

    Attributes:
        spec: the bench spec (its model dirs); variant: the variant built; index: its
            place in ``spec.variants`` (messages name ``variants[index]``).
        target, target_vocab, target_config: the checked target dir, its tokenizer's
            vocabulary and its config.json (:func:`check_target`).
    """

    spec: BenchSpec
    variant: VariantSpec
    index: int
    target: Path
    target_vocab: dict[str, int]
    target_config: dict[str, Any]


@dataclass(frozen=True)
class MethodModels:
    """What a method's ``check_models`` hook found.

    Attributes:
        roles: role → checked dir of each model the method loads beside the target
            (build.json's ``models``: ``draft``, ``medusa``, ``eagle3``).
        draft_len: K, build.json's ``max_draft_len`` (None: the method drafts nothing).
        medusa: build.json's ``medusa`` section (a ``MedusaInfo``: heads and tree).
        checked: what the check of the method's own checkpoint says, for its build note.
    """

    roles: dict[str, Path] = field(default_factory=dict)
    draft_len: int | None = None
    medusa: MedusaInfo | None = None
    checked: Any = None


def method_hook(mode: str, name: str) -> Callable[..., Any] | None:
    """The function ``name`` of the reference engine's module of method ``mode`` (the
    module its ``Method.reference_decoder`` names, imported on demand); None: the method
    is not on the reference engine or its module has no such hook.

    Hooks: ``check_models(ModelCheck) -> MethodModels`` (default :func:`default_models`)
    and ``build_notes(VariantSpec, MethodModels) -> dict[str, str]`` (default: none).
    """
    path = methods.METHODS[mode].reference_decoder
    if path is None:
        return None
    return getattr(importlib.import_module(path.partition(":")[0]), name, None)


def default_models(check: ModelCheck) -> MethodModels:
    """A method without a ``check_models`` hook loads no model of its own; its K is the
    variant's ``draft_len`` when it drafts."""
    drafts = methods.METHODS[check.variant.mode].drafts
    return MethodModels(draft_len=check.variant.draft_len if drafts else None)


def _reference_notes(variant: VariantSpec, found: MethodModels) -> dict[str, str]:
    """How the reference engine realises this variant (recorded, never silently dropped):
    the engine's own notes, the method's (its ``build_notes`` hook), adaptive speculation."""
    notes = {
        "engine_dir": "build.json only; the model dirs are loaded in place",
        "batching": (
            f"inflight: up to max_batch_size {variant.max_batch_size} sequences per decode "
            "step (one batched target forward), later requests wait FIFO and join as rows "
            "finish; each prompt is prefilled alone between decode steps"
        ),
        "decoding": "greedy",
    }
    if (build_notes := method_hook(variant.mode, "build_notes")) is not None:
        notes.update(build_notes(variant, found))
    if variant.speculation is not None:
        notes["speculation"] = (
            "adaptive: the draft length of a step follows the active batch size "
            f"({variant.speculation.model_dump(exclude_none=True)})"
        )
    return notes


def _check_kv_budget(spec: BenchSpec, variant: VariantSpec, models: list[Path]) -> None:
    """Raise ConfigError (exit 2) when the byte budget holds less than one request at
    max_seq_len (KV bytes per token summed over the configs of ``models``: the target and
    the draft model or EAGLE-3 layer, as the engine sizes its pool; dtype auto: float32)."""
    import torch
    from transformers import AutoConfig

    from trtbench.builders.reference.kv_blocks import (
        KvCacheSettings,
        kv_bytes_per_token,
        pool_blocks,
    )

    name = variant.dtype if variant.dtype != "auto" else "float32"
    settings = KvCacheSettings(
        variant.tokens_per_block,
        variant.kv_cache_max_tokens,
        variant.kv_cache_budget_bytes,
        spec.deploy.kv_cache_free_gpu_mem_fraction,
        variant.batch_scheduler_policy,
    )
    per_token = sum(
        kv_bytes_per_token(AutoConfig.from_pretrained(m), getattr(torch, name))
        for m in models
    )
    try:
        pool_blocks(settings, per_token, 1, variant.max_seq_len, variant.max_seq_len)
    except ConfigError as exc:
        raise ConfigError(f"variant {variant.name!r}: {exc}") from None


def _gpus() -> list[str]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def build_reference_variant(
    spec: BenchSpec,
    variant: VariantSpec,
    out: RunDir,
    *,
    dry_run: bool = False,
    describe: Callable[[Path], ModelFiles] = describe_model_dir,
) -> BuildManifest:
    """Validate one variant's models and write ``out/engines/<variant>/build.json``.

    Args:
        spec: the bench spec (for the model dirs).
        variant: the variant to build (one of ``spec.variants``).
        out: the run directory.
        dry_run: validate and return the manifest without writing anything.
        describe: hashes a model directory (a shared :class:`ModelDescriber` hashes
            each directory once across variants).

    Returns:
        The manifest (``bytes_on_disk``: the model files the engine loads; the engine dir
        holds only build.json).

    Raises:
        ConfigError: a missing path, a dir without config.json, a bad tree, an option the
            reference backend cannot honour.
        ModelMismatchError: draft or heads incompatible with the target.
    """
    t0 = time.perf_counter_ns()
    index = spec.variants.index(variant)
    check_reference_options(variant, index)
    models = spec.models
    target, target_vocab, target_config = check_target(models.target)
    check = ModelCheck(spec, variant, index, target, target_vocab, target_config)
    found = (method_hook(variant.mode, "check_models") or default_models)(check)
    roles: dict[str, Path | None] = {
        "target": target,
        "draft": None,
        "medusa": None,
        **found.roles,
    }
    if variant.kv_cache_budget_bytes is not None:
        caching = [roles[r] for r in ("target", "draft", "eagle3") if roles.get(r)]
        _check_kv_budget(spec, variant, caching)
    files = {r: describe(p) if p else None for r, p in roles.items()}
    manifest = BuildManifest(
        backend="reference",
        variant={
            **variant.model_dump(mode="json"),  # + the fraction a KV byte budget takes
            "kv_cache_free_gpu_mem_fraction": spec.deploy.kv_cache_free_gpu_mem_fraction,
        },
        mode=variant.mode,
        max_draft_len=found.draft_len,
        models=files,
        tokenizer_dir=str(target.resolve()),
        medusa=found.medusa,
        cuda_graphs=cuda_graphs_at_build(variant.cuda_graphs),
        versions=library_versions(),
        host={**host_info(), "gpus": _gpus()},
        bytes_on_disk=sum(f.bytes for f in files.values() if f is not None),
        created_at=utc_now(),
        tokenizer={
            "vocab_size": len(target_vocab),
            "vocab_sha256": vocab_sha256(target_vocab),
        },
        reference=_reference_notes(variant, found),
    )
    manifest.build_seconds = (time.perf_counter_ns() - t0) / 1e9
    if not dry_run:
        write_manifest(out.engine_dir(variant.name), manifest)
        logger.debug("wrote %s", out.build_json(variant.name))
    return manifest
