"""What a TensorRT-LLM build plan needs from the model directories: their config.json files.

Read once per variant, before planning (:mod:`trtbench.builders.trtllm.plan` stays pure):
the target's vocabulary and dtype, the draft's vocabulary (must equal the target's), and the
Medusa heads' ``medusa_num_heads`` / ``medusa_num_layers`` (FasterDecoding keys; TensorRT-LLM's
``MedusaConfig.from_hugging_face`` reads ``medusa_num_layers`` from that file,
``tensorrt_llm/models/medusa/config.py`` @ a4817fb).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtbench.core import methods
from trtbench.core.errors import ConfigError, ModelMismatchError
from trtbench.core.json_files import read_json_object
from trtbench.spec.bench import ModelsSpec, VariantSpec

CHECKPOINT_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class ModelFacts:
    """What the plan needs from the model directories' config.json files (read once)."""

    target_dir: str
    target_vocab: int | None
    target_dtype: str | None
    draft_dir: str | None = None
    draft_vocab: int | None = None
    medusa_dir: str | None = None
    medusa_num_heads: int | None = None
    medusa_num_layers: int | None = None


def _read_config(directory: Path, role: str) -> dict[str, Any]:
    return read_json_object(
        Path(directory) / "config.json",
        label=f"models.{role}: ",
        missing_fix=f"point models.{role} at a Hugging Face model directory "
        "(save_pretrained layout)",
        bad_fix="fix it",
    )


def _heads_facts(directory: Path, target_vocab: int | None) -> tuple[int, int]:
    config = _read_config(directory, "medusa")
    heads, layers = config.get("medusa_num_heads"), config.get("medusa_num_layers")
    if not isinstance(heads, int) or not isinstance(layers, int):
        raise ConfigError(
            f"models.medusa: {directory}/config.json needs integer medusa_num_heads and "
            "medusa_num_layers (TensorRT-LLM reads medusa_num_layers from it); add them"
        )
    vocab = config.get("vocab_size")
    if vocab is not None and target_vocab is not None and vocab != target_vocab:
        raise ModelMismatchError(
            f"Medusa heads in {directory} predict {vocab} tokens but the target has "
            f"{target_vocab}; train the heads on this target"
        )
    return heads, layers


def _loads(modes: set[str], field: str) -> bool:
    """Whether a method of ``modes`` drafts with the spec's ``models.<field>``
    (``Method.models_dir``)."""
    dirs = [m.models_dir for m in map(methods.method_of, modes) if m is not None]
    return any(d is not None and d[0] == field for d in dirs)


def read_model_facts(models: ModelsSpec, modes: set[str]) -> ModelFacts:
    """Read the config.json of the target, and of the draft / heads when ``modes`` need them.

    Raises:
        ConfigError: a directory or config.json is missing or unreadable, or the heads'
            config lacks ``medusa_num_heads`` / ``medusa_num_layers``.
        ModelMismatchError: draft (or heads) vocabulary differs from the target's.
    """
    target = _read_config(models.target, "target")
    vocab = target.get("vocab_size")
    dtype = target.get("torch_dtype") or target.get("dtype")
    facts: dict[str, Any] = {
        "target_dir": str(models.target),
        "target_vocab": vocab,
        "target_dtype": dtype if isinstance(dtype, str) else None,
    }
    if _loads(modes, "draft"):
        if models.draft is None:
            raise ConfigError(
                "a draft_target variant needs models.draft (a draft model dir); add it"
            )
        draft_vocab = _read_config(models.draft, "draft").get("vocab_size")
        if draft_vocab != vocab:
            raise ModelMismatchError(
                f"draft model {models.draft} has vocab_size {draft_vocab} but the target "
                f"has {vocab}; use a draft trained with the target's tokenizer"
            )
        facts.update(draft_dir=str(models.draft), draft_vocab=draft_vocab)
    if _loads(modes, "medusa"):
        if models.medusa is None:
            raise ConfigError(
                "a medusa variant needs models.medusa (a Medusa heads dir); add it"
            )
        heads, layers = _heads_facts(models.medusa, vocab)
        facts.update(
            medusa_dir=str(models.medusa),
            medusa_num_heads=heads,
            medusa_num_layers=layers,
        )
    return ModelFacts(**facts)


def checkpoint_dtype(variant: VariantSpec, facts: ModelFacts) -> str:
    """The explicit dtype the examples/ converters want ('auto' -> the target's, else float16)."""
    if variant.dtype != "auto":
        return variant.dtype
    found = facts.target_dtype
    return found if found in CHECKPOINT_DTYPES else "float16"
