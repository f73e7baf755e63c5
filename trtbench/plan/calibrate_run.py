"""``trtbench calibrate`` as one call: resolve the model config, check the grid, time it on
this device (``calibrate_torch``) and write the calibration file (``calibration``)."""

from __future__ import annotations

import importlib.util
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtbench.core.errors import ConfigError
from trtbench.core.json_files import read_json_object
from trtbench.plan.calibration import (
    MODEL_KEYS,
    Calibration,
    write_calibration,
)
from trtbench.plan.model_shapes import (
    PRESET_ALIASES,
    PRESET_CONFIGS,
    model_preset_names,
    moe_key,
    shape_from_hf_config,
)


@dataclass(frozen=True)
class CalibrateSettings:
    """What ``trtbench calibrate`` is asked (the command's help for each)."""

    model: str
    out: Path
    batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    queries: tuple[int, ...] = (1, 2, 4, 8, 16)
    context: int = 1024
    device: str = "auto"
    warmup: int = 3
    repeats: int = 5
    min_repeat_ms: float = 20.0


def calibration_config(spec: str) -> dict[str, Any]:
    """The dense Llama config of ``spec``: a model preset or a HF config.json / model dir,
    reduced to :data:`calibration.MODEL_KEYS` and ``tie_word_embeddings``.

    Raises:
        ConfigError: neither form, a MoE config, or a key missing (one line, the fix).
    """
    key = PRESET_ALIASES.get(spec.strip().lower(), spec.strip().lower())
    path = Path(spec).expanduser()
    if key in PRESET_CONFIGS:
        config, name = PRESET_CONFIGS[key], key
    elif path.exists():
        file = path / "config.json" if path.is_dir() else path
        config = read_json_object(
            file,
            label="model config ",
            missing_fix="give a HF config.json, a model dir or a preset",
            bad_fix="give a Hugging Face config.json",
        )
        name = str(path)
    else:
        raise ConfigError(
            f"--model {spec!r} is neither a preset ({model_preset_names()}) nor an "
            "existing config.json / model dir"
        )
    if moe_key(config) is not None:
        raise ConfigError(
            f"--model {name} is a mixture-of-experts model; calibrate measures dense "
            "Llama shapes only: give a dense preset or config.json"
        )
    shape = shape_from_hf_config(config, name=name)  # raises for a missing key
    out = {k: config.get(k) for k in MODEL_KEYS}
    out["num_key_value_heads"], out["head_dim"] = shape.kv_heads, shape.head_dim
    out["tie_word_embeddings"] = bool(config.get("tie_word_embeddings", False))
    return out


def _device(asked: str) -> str:
    """``cuda`` or ``cpu`` (``auto``: CUDA when torch sees a GPU).

    Raises:
        ConfigError: torch is not installed or older than 2.5, or ``cuda`` asked
            without a GPU.
    """
    if importlib.util.find_spec("torch") is None:
        raise ConfigError(
            "trtbench calibrate needs torch: run it in an NGC PyTorch / TensorRT-LLM "
            "container or `pip install torch`"
        )
    import torch

    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 5):
        raise ConfigError(
            f"trtbench calibrate needs torch >= 2.5 (grouped-query attention in "
            f"scaled_dot_product_attention), found {torch.__version__}; use a newer "
            "NGC PyTorch container"
        )
    has_gpu = torch.cuda.is_available()
    if asked == "cuda" and not has_gpu:
        raise ConfigError("--device cuda: torch sees no CUDA GPU; use --device cpu")
    return "cuda" if asked == "cuda" or (asked == "auto" and has_gpu) else "cpu"


def check_grid(settings: CalibrateSettings) -> None:
    """The axes ascend from 1 with at least 2 values each; counts positive.

    Raises:
        ConfigError: naming the option.
    """
    for flag, axis in (("--batch", settings.batches), ("--query", settings.queries)):
        if len(axis) < 2 or axis[0] != 1 or list(axis) != sorted(set(axis)):
            raise ConfigError(
                f"{flag} {','.join(map(str, axis))}: give at least 2 ascending values "
                "starting at 1, e.g. 1,2,4,8"
            )
    if settings.context < 1 or settings.repeats < 1 or settings.warmup < 0:
        raise ConfigError("--context and --repeats must be >= 1, --warmup >= 0")


def run_calibration(settings: CalibrateSettings) -> tuple[Calibration, Path]:
    """Measure T(B, q) and the launch costs on this device and write the file.

    Raises:
        ConfigError: a bad model, grid or device (before anything is built).
    """
    cfg = calibration_config(settings.model)
    check_grid(settings)
    device = _device(settings.device)
    import torch

    from trtbench.plan.calibrate_torch import launch_costs, time_grid

    timing = (settings.warmup, settings.repeats, settings.min_repeat_ms)
    grid = time_grid(
        cfg, settings.batches, settings.queries, settings.context, device, timing
    )
    name = torch.cuda.get_device_name() if device == "cuda" else _cpu_name()
    cal = Calibration(
        device=name,
        device_kind=device,
        torch_version=str(torch.__version__),
        dtype="bfloat16" if device == "cuda" else "float32",
        context_len=settings.context,
        model=cfg,
        batches=settings.batches,
        queries=settings.queries,
        step_ms=grid.step_ms,
        step_ms_low=grid.low_ms,
        step_ms_high=grid.high_ms,
        repeats=settings.repeats,
        cuda_graphs=grid.cuda_graphs,
        timer=grid.timer,
        launch=launch_costs(device, settings.repeats),
        source=str(settings.out),
    )
    return cal, write_calibration(cal, settings.out)


def _cpu_name() -> str:
    return f"cpu ({platform.processor() or platform.machine()})"
