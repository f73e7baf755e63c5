"""Medusa heads in the FasterDecoding/Medusa checkpoint format: the module, save, load.

Format (FasterDecoding/Medusa ``medusa/model/medusa_model.py`` and
``medusa/train/train_legacy.py``)::

    <dir>/config.json                 {"medusa_num_heads": N, "medusa_num_layers": L,
                                       "base_model_name_or_path": "...", "hidden_size": H,
                                       "vocab_size": V, "version": "2",
                                       "model_type": "medusa", "medusa_fc_bias": true}
    <dir>/medusa_lm_head.safetensors  (or the legacy medusa_lm_head.pt)
        {h}.{l}.linear.weight  [H, H]   {h}.{l}.linear.bias  [H]   for l in 0..L-1
        {h}.{L}.weight         [V, H]   (the head's LM projection, no bias)

Head ``h`` is ``Sequential(ResBlock x L, Linear(H, V, bias=False))`` with
``ResBlock(x) = x + SiLU(Linear(H, H)(x))``; the ResBlock weight starts at zero so an untrained
head equals its LM projection. Head ``k`` (0-based) predicts the token ``k + 1`` places after the
base model's next token, i.e. token ``t + k + 2`` from the hidden state at ``t``.

FasterDecoding builds the L layers of a head by list multiplication (one shared module); here
each layer is its own module. The key names are the same, so either kind of checkpoint loads.
The same directory feeds TensorRT-LLM's ``examples/medusa/convert_checkpoint.py --medusa_model_dir``.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trtbench.builders.reference.medusa_config import VLLM_KEYS
from trtbench.core.errors import BuildError, ModelMismatchError
from trtbench.core.json_files import read_json_object

logger = logging.getLogger(__name__)

CONFIG_NAME = "config.json"
SAFETENSORS_NAME = "medusa_lm_head.safetensors"
PT_NAME = "medusa_lm_head.pt"
FORMAT_VERSION = "2"
_KEY = re.compile(r"^(\d+)\.(\d+)\.(linear\.weight|linear\.bias|weight)$")


class ResBlock(nn.Module):
    """``x + SiLU(Linear(hidden, hidden)(x))``; the linear weight starts at zero (bias random)."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden_size, hidden_size, bias=True)
        nn.init.zeros_(self.linear.weight)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.linear(x))


class MedusaHeads(nn.ModuleList):
    """N Medusa heads over a base model's last hidden states.

    Args:
        num_heads: N, the number of heads (head k predicts token t + k + 2 from hidden state t).
        num_layers: L, ResBlocks per head.
        hidden_size: H, the base model's hidden size.
        vocab_size: V, the base model's vocabulary size.

    A ``ModuleList`` of ``Sequential`` (as in FasterDecoding), so ``state_dict()`` keys are
    exactly ``{h}.{l}.linear.weight`` … ``{h}.{L}.weight``.
    """

    def __init__(
        self, num_heads: int, num_layers: int, hidden_size: int, vocab_size: int
    ) -> None:
        super().__init__(
            nn.Sequential(
                *(ResBlock(hidden_size) for _ in range(num_layers)),
                nn.Linear(hidden_size, vocab_size, bias=False),
            )
            for _ in range(num_heads)
        )
        self.num_heads = num_heads
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.vocab_size = vocab_size

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Logits of every head.

        Args:
            hidden_states: [batch, seq, hidden] (any leading shape ending in hidden works).

        Returns:
            [num_heads, batch, seq, vocab] logits.
        """
        return torch.stack([head(hidden_states) for head in self])

    def init_lm_heads_from(self, lm_head_weight: torch.Tensor) -> None:
        """Copy the base model's LM head [vocab, hidden] into every head (Medusa's usual start)."""
        with torch.no_grad():
            for head in self:
                head[-1].weight.copy_(lm_head_weight)


def save_medusa_heads(
    heads: MedusaHeads, directory: Path, base_model_name_or_path: str
) -> Path:
    """Write ``config.json`` and ``medusa_lm_head.safetensors`` (FasterDecoding format).

    Args:
        heads: the heads to save (weights are saved contiguous, in their current dtype).
        directory: created if missing; existing files of the same names are replaced.
        base_model_name_or_path: written to the config (the target model's directory or hub id).

    Returns:
        ``directory``.
    """
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in heads.state_dict().items()}
    save_file(tensors, str(directory / SAFETENSORS_NAME), metadata={"format": "pt"})
    config = {
        "medusa_num_heads": heads.num_heads,
        "medusa_num_layers": heads.num_layers,
        "base_model_name_or_path": str(base_model_name_or_path),
        "hidden_size": heads.hidden_size,
        "vocab_size": heads.vocab_size,
        "version": FORMAT_VERSION,
        **VLLM_KEYS,  # vLLM loads the same directory (medusa_config.py)
    }
    (directory / CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n")
    return directory


def _weights_path(directory: Path) -> Path:
    for name in (SAFETENSORS_NAME, PT_NAME):
        if (directory / name).is_file():
            return directory / name
    raise BuildError(
        f"Medusa heads in {directory} have no weights: expected {SAFETENSORS_NAME} or "
        f"{PT_NAME}; point the medusa path at a FasterDecoding/Medusa heads directory"
    )


def _read_config_json(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_NAME
    if not path.is_file():
        raise BuildError(
            f"Medusa heads config {path} is missing; point the medusa path at a directory "
            f"with config.json and {SAFETENSORS_NAME} (FasterDecoding/Medusa format)"
        )
    return read_json_object(
        path,
        label="Medusa heads config ",
        missing_fix="point the medusa path at a FasterDecoding/Medusa heads directory",
        bad_fix="fix or re-save the heads",
        error=BuildError,
    )


def _weight_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name → shape, without loading safetensors data."""
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    return {k: tuple(v.shape) for k, v in _load_tensors(path).items()}


def _load_tensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt file: the message names it
        raise BuildError(
            f"Medusa heads weights {path} cannot be read ({exc}); re-save the heads"
        ) from exc
    if not isinstance(state, dict):
        raise BuildError(f"Medusa heads weights {path} do not hold a state dict")
    return state


def _infer_layout(
    shapes: dict[str, tuple[int, ...]], path: Path
) -> tuple[int, int, int, int]:
    """(num_heads, num_layers, hidden, vocab) from FasterDecoding key names and shapes."""
    parts: dict[int, dict[int, dict[str, tuple[int, ...]]]] = {}
    for key, shape in shapes.items():
        match = _KEY.match(key)
        if match is None:
            raise ModelMismatchError(
                f"Medusa heads weights {path} hold an unexpected tensor {key!r}; expected "
                "FasterDecoding names {h}.{l}.linear.weight|bias and {h}.{L}.weight"
            )
        h, layer, kind = int(match[1]), int(match[2]), match[3]
        parts.setdefault(h, {}).setdefault(layer, {})[kind] = shape
    if not parts or sorted(parts) != list(range(len(parts))):
        raise ModelMismatchError(
            f"Medusa heads weights {path} have heads {sorted(parts)}; expected 0..N-1"
        )
    num_layers = len(parts[0]) - 1
    lm = parts[0].get(num_layers, {}).get("weight")
    if lm is None or len(lm) != 2:
        raise ModelMismatchError(
            f"Medusa heads weights {path} lack the LM projection '0.{num_layers}.weight' "
            "[vocab, hidden]; re-save the heads"
        )
    vocab, hidden = lm
    expected = {num_layers: {"weight": (vocab, hidden)}}
    for layer in range(num_layers):
        expected[layer] = {"linear.weight": (hidden, hidden), "linear.bias": (hidden,)}
    for h, layers in parts.items():
        if layers != expected:
            raise ModelMismatchError(
                f"Medusa heads weights {path}: head {h} has tensors {layers}, expected "
                f"{expected} (all heads must share num_layers={num_layers}, hidden={hidden}, "
                f"vocab={vocab}); re-save the heads"
            )
    return len(parts), num_layers, hidden, vocab


def read_medusa_config(directory: Path) -> dict[str, Any]:
    """Read a heads directory's layout, checking config.json against the weights.

    Args:
        directory: a FasterDecoding/Medusa heads directory.

    Returns:
        ``{"num_heads", "num_layers", "hidden_size", "vocab_size", "base_model_name_or_path",
        "weights_path"}``. Counts and sizes come from the weights; a config value that is
        absent is inferred, one that disagrees raises (except ``medusa_num_heads`` below the
        number of heads stored: the published vicuna heads say 2 and store 5, and FasterDecoding
        loads all of them, so the stored count wins with a warning).

    Raises:
        BuildError: config.json or the weights file is missing or unreadable.
        ModelMismatchError: the tensors are not FasterDecoding heads, or disagree with the config.
    """
    directory = Path(directory)
    config = _read_config_json(directory)
    path = _weights_path(directory)
    num_heads, num_layers, hidden, vocab = _infer_layout(_weight_shapes(path), path)
    found = {
        "medusa_num_heads": num_heads,
        "medusa_num_layers": num_layers,
        "hidden_size": hidden,
        "vocab_size": vocab,
    }
    for key, value in found.items():
        said = config.get(key)
        if said is None or said == value:
            continue
        if key == "medusa_num_heads" and isinstance(said, int) and said < value:
            logger.warning(
                "%s says %s=%s; the weights hold %s heads, using all",
                directory / CONFIG_NAME,
                key,
                said,
                value,
            )
            continue
        raise ModelMismatchError(
            f"Medusa heads config {directory / CONFIG_NAME} says {key}={said} but "
            f"{path.name} holds {value}; fix config.json or re-save the heads"
        )
    return {
        "num_heads": num_heads,
        "num_layers": num_layers,
        "hidden_size": hidden,
        "vocab_size": vocab,
        "base_model_name_or_path": config.get("base_model_name_or_path"),
        "weights_path": path,
    }


def load_medusa_heads(
    directory: Path,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> MedusaHeads:
    """Load heads saved by :func:`save_medusa_heads` or by FasterDecoding/Medusa.

    Reads ``medusa_lm_head.safetensors`` if present, else ``medusa_lm_head.pt``.

    Args:
        directory: the heads directory.
        dtype: parameter dtype of the returned module.
        device: where the module lives.

    Returns:
        A :class:`MedusaHeads` in eval mode.

    Raises:
        BuildError: config.json or the weights are missing or unreadable.
        ModelMismatchError: the weights are not FasterDecoding heads or disagree with the config.
    """
    info = read_medusa_config(directory)
    heads = MedusaHeads(
        info["num_heads"], info["num_layers"], info["hidden_size"], info["vocab_size"]
    )
    heads.load_state_dict(_load_tensors(info["weights_path"]), strict=True)
    return heads.to(device=device, dtype=dtype).eval()
