"""A Hugging Face checkpoint's weights against its own ``config.json``, read from the
safetensors headers alone (no tensor is loaded), so a model directory whose config and
weights disagree is refused before anything is built rather than when a server loads it.

Checked where the names say what they are: the decoder layers (``….layers.<i>.…``, also
GPT-2's ``h.<i>`` and ``blocks.<i>``) must be exactly ``0 .. num_hidden_layers − 1``, and
the input embedding (``…embed_tokens.weight``) must be ``[vocab_size, hidden_size]``
(``transformers`` builds ``nn.Embedding(vocab_size, hidden_size)`` from those two keys).
A directory without safetensors files (``pytorch_model.bin``) is not checked here: reading
those needs torch. The file layout is the safetensors format (an 8-byte header length, a
JSON header of names, dtypes and shapes; https://github.com/huggingface/safetensors), read
through the ``safetensors`` package; a sharded checkpoint's shards are listed in
``model.safetensors.index.json`` (``weight_map``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from trtbench.core.errors import ConfigError

LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)\.")
"""A decoder layer's index in a tensor name (``model.layers.3.mlp.up_proj.weight``)."""
SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"


def weight_shapes(path: Path) -> dict[str, list[int]] | None:
    """Every tensor's name → shape in the safetensors files of model directory ``path``
    (``model.safetensors``, or the shards named by ``model.safetensors.index.json``);
    None when it has neither.

    Raises:
        ConfigError: a file that is not safetensors, or an index naming a missing shard.
    """
    from safetensors import safe_open

    if (path / INDEX).is_file():
        try:
            weight_map = json.loads((path / INDEX).read_text())["weight_map"]
            files = sorted({path / str(name) for name in weight_map.values()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(
                f"{path / INDEX} is not a safetensors index ({exc}); re-save the model"
            ) from None
    elif (path / SINGLE).is_file():
        files = [path / SINGLE]
    else:
        return None
    shapes: dict[str, list[int]] = {}
    for file in files:
        try:
            with safe_open(str(file), framework="numpy") as f:
                for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                    shapes[name] = list(f.get_slice(name).get_shape())
        except Exception as exc:  # safetensors raises its own error types
            raise ConfigError(
                f"{file} cannot be read as safetensors ({type(exc).__name__}: {exc}); "
                "re-save the model"
            ) from None
    return shapes


def check_weights_match_config(path: Path, config: dict[str, Any], field: str) -> None:
    """The decoder layers and the embedding in ``path``'s weights are those its
    ``config`` (its config.json) describes; see the module docstring.

    Raises:
        ConfigError: they differ (naming ``field``, both figures and the fix), or a weight
            file cannot be read.
    """
    shapes = weight_shapes(path)
    if not shapes:
        return
    fix = (
        f"re-save the model so that config and weights agree, or point {field} at the "
    )
    fix += "directory they were saved in"
    layers = sorted({int(m.group(1)) for n in shapes if (m := LAYER.search(n))})
    want = config.get("num_hidden_layers")
    if layers and isinstance(want, int) and layers != list(range(want)):
        held = f"{len(layers)} layers (indices {layers[0]}..{layers[-1]})"
        raise ConfigError(
            f"{field}: {path / 'config.json'} says num_hidden_layers {want}, but its "
            f"weights hold {held}; {fix}"
        )
    embed = [n for n in shapes if n.endswith("embed_tokens.weight")]
    want_embed = [config.get("vocab_size"), config.get("hidden_size")]
    if len(embed) == 1 and shapes[embed[0]] != want_embed:
        raise ConfigError(
            f"{field}: {path / 'config.json'} says vocab_size {want_embed[0]}, hidden_size "
            f"{want_embed[1]}, but {embed[0]} is {shapes[embed[0]]}; {fix}"
        )
