"""A calibration file: step times of the target's shape measured on one device (``trtbench
calibrate``), and how the planner reads them in place of the roofline.

File (JSON, :data:`SCHEMA_VERSION`)::

    {"schema_version": 1, "device": "NVIDIA H200", "device_kind": "cuda",
     "torch_version": "2.5.1", "dtype": "bfloat16", "context_len": 1024,
     "model": {"hidden_size": ..., "num_hidden_layers": ..., "num_attention_heads": ...,
               "num_key_value_heads": ..., "head_dim": ..., "intermediate_size": ...,
               "vocab_size": ...},
     "batches": [1, 2, 4, ...], "queries": [1, 2, 4, ...],
     "step_ms": [[T(B0,q0), T(B0,q1), ...], ...],      # median over the repeats
     "step_ms_low": [[...]], "step_ms_high": [[...]],  # min and max over the repeats
     "repeats": 5, "cuda_graphs": true, "timer": "cuda events",
     "launch": {"eager_launch_us": 6.1, "graph_launch_us": 9.8, "graph_node_us": 1.9}}

``step_ms[i][j]`` is one forward pass of ``batches[i]`` sequences each with ``queries[j]``
new tokens over a KV cache of ``context_len`` tokens, greedy token choice included. With
``n`` repeats the median lies between the min and the max with probability ``1 - 2^(1-n)``
(94 % for 5), the interval the file gives.

In the planner (:func:`calibrated_pass_s`), a target pass at (B, q) is T interpolated
linearly in B and in q between the measured points (beyond the largest: extrapolated from the
last two, never below the last), plus the KV bytes of the difference between the plan's mean
context and ``context_len`` at the calibration's effective bandwidth (:meth:`Calibration.
bandwidth_bytes_per_s`: the bytes of the (1, 1) pass over its time, launches included). Draft
and head passes keep the roofline, read at that bandwidth; the launch figures replace the
``--launch-us`` / ``--graph-launch-us`` / ``--graph-node-us`` constants.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trtbench.core.errors import ConfigError
from trtbench.plan.model_shapes import ModelShape, shape_from_hf_config

SCHEMA_VERSION = 1
"""Version of the calibration file this code writes and reads (newer: refused)."""
MODEL_KEYS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
)
"""The config values a calibration records and a target must match (``head_dim``: derived
as hidden / heads when the config has none)."""
ELEMENT_BYTES = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0}
"""Bytes per weight and KV element of the calibration's dtype."""
FIX = "rerun `trtbench calibrate --model MODEL --out FILE` to write a new one"


@dataclass(frozen=True)
class Calibration:
    """Measured step times T(B, q) in ms (module doc for the file and its meaning).

    Attributes:
        device: the device's name (``torch.cuda.get_device_name`` or ``cpu``).
        device_kind: ``cuda`` or ``cpu``.
        torch_version: torch's version string.
        dtype: weights and KV element type (``bfloat16`` on CUDA, ``float32`` on CPU).
        context_len: KV tokens each sequence attends to before its new tokens.
        model: the model config measured (:data:`MODEL_KEYS`, plus ``tie_word_embeddings``).
        batches, queries: the grid's axes, ascending, each starting at 1.
        step_ms, step_ms_low, step_ms_high: median, min and max per (B, q) (ms).
        repeats: timed repeats per shape.
        cuda_graphs: the passes were replayed as CUDA graphs.
        timer: ``cuda events`` or ``perf_counter``.
        launch: ``eager_launch_us`` and, with CUDA, ``graph_launch_us``, ``graph_node_us``.
        source: the file it was read from (not written).
    """

    device: str
    device_kind: str
    torch_version: str
    dtype: str
    context_len: int
    model: dict[str, Any]
    batches: tuple[int, ...]
    queries: tuple[int, ...]
    step_ms: tuple[tuple[float, ...], ...]
    step_ms_low: tuple[tuple[float, ...], ...]
    step_ms_high: tuple[tuple[float, ...], ...]
    repeats: int
    cuda_graphs: bool
    timer: str
    launch: dict[str, float | None] = field(default_factory=dict)
    source: str = ""

    def step_ms_at(self, batch: float, query: float) -> float:
        """T(``batch``, ``query``) in ms, interpolated as the module doc says."""
        return _interp2(self.batches, self.queries, self.step_ms, batch, query)

    def bandwidth_bytes_per_s(self, model: ModelShape) -> float:
        """Effective bandwidth of the (1, 1) pass: weights + one context's KV over T(1, 1)."""
        elem = ELEMENT_BYTES[self.dtype]
        moved = model.params * elem + self.context_len * model.kv_bytes_per_token(elem)
        return moved / (self.step_ms[0][0] / 1e3)

    def describe(self, model: ModelShape) -> str:
        """One line for the plan's header (``model``: the target, for the bandwidth)."""
        graphs = "CUDA graphs" if self.cuda_graphs else "eager"
        return (
            f"calibration ({self.source}): target passes measured on {self.device} "
            f"(torch {self.torch_version}, {self.dtype}, {graphs}, context "
            f"{self.context_len}), B {_span(self.batches)} x q {_span(self.queries)}; "
            f"draft and head passes at its effective "
            f"{self.bandwidth_bytes_per_s(model) / 1e12:.3g} TB/s"
        )


def _span(axis: tuple[int, ...]) -> str:
    return f"{axis[0]}..{axis[-1]}"


def _bracket(axis: tuple[int, ...], x: float) -> tuple[int, int, float]:
    """Indices (i, i+1) around ``x`` and its fraction between them (> 1 beyond the end)."""
    i = 0
    while i < len(axis) - 2 and x > axis[i + 1]:
        i += 1
    return i, i + 1, (x - axis[i]) / (axis[i + 1] - axis[i])


def _interp2(
    bs: tuple[int, ...],
    qs: tuple[int, ...],
    table: tuple[tuple[float, ...], ...],
    batch: float,
    query: float,
) -> float:
    """Bilinear in (B, q), linear extrapolation beyond the grid, never below its corner."""
    i0, i1, tb = _bracket(bs, batch)
    j0, j1, tq = _bracket(qs, query)

    def along_q(row: tuple[float, ...]) -> float:
        return row[j0] + tq * (row[j1] - row[j0])

    value = along_q(table[i0]) + tb * (along_q(table[i1]) - along_q(table[i0]))
    corner = table[min(_last_at_most(bs, batch), len(bs) - 1)][_last_at_most(qs, query)]
    return max(value, corner) if batch > bs[-1] or query > qs[-1] else value


def _last_at_most(axis: tuple[int, ...], x: float) -> int:
    return max(i for i, v in enumerate(axis) if v <= x)


def calibration_to_json(cal: Calibration) -> dict[str, Any]:
    """The file's JSON object (``source`` left out)."""
    data = asdict(cal)
    data.pop("source")
    return {"schema_version": SCHEMA_VERSION, **data}


def write_calibration(cal: Calibration, path: Path) -> Path:
    """Write ``cal`` as JSON to ``path`` (folders made); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(calibration_to_json(cal), indent=1) + "\n")
    return path


def _grid(data: dict[str, Any], key: str, rows: int, cols: int) -> tuple:
    table = data[key]
    if len(table) != rows or any(len(r) != cols for r in table):
        raise ValueError(f"{key} is not {rows} x {cols} (batches x queries)")
    values = tuple(tuple(float(v) for v in r) for r in table)
    if not all(math.isfinite(v) and v > 0 for r in values for v in r):
        raise ValueError(f"{key} holds a value that is not a time > 0")
    return values


def _axis(data: dict[str, Any], key: str) -> tuple[int, ...]:
    axis = tuple(int(v) for v in data[key])
    if len(axis) < 2 or axis[0] != 1 or list(axis) != sorted(set(axis)):
        raise ValueError(f"{key} must ascend from 1 with at least 2 values, got {axis}")
    return axis


def read_calibration(path: Path) -> Calibration:
    """Read and check a calibration file.

    Raises:
        ConfigError: no such file, not JSON, a newer or missing ``schema_version``, or a
            missing / malformed field (one line naming the file, the field and the fix).
    """
    path = Path(path)
    where = f"--calibration {path}"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{where} does not exist; {FIX}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = str(exc).splitlines()[0]
        raise ConfigError(f"{where} is not a JSON file ({reason}); {FIX}") from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int):
        raise ConfigError(f"{where}: no integer schema_version; {FIX}")
    if version > SCHEMA_VERSION:
        raise ConfigError(
            f"{where}: schema_version {version} is newer than this trtbench reads "
            f"({SCHEMA_VERSION}); upgrade trtbench or {FIX}"
        )
    try:
        bs, qs = _axis(data, "batches"), _axis(data, "queries")
        model = dict(data["model"])
        missing = [k for k in MODEL_KEYS if not isinstance(model.get(k), int)]
        if missing:
            raise ValueError(f"model lacks {', '.join(missing)}")
        if data["dtype"] not in ELEMENT_BYTES:
            raise ValueError(
                f"dtype {data['dtype']!r} is not one of {list(ELEMENT_BYTES)}"
            )
        return Calibration(
            device=str(data["device"]),
            device_kind=str(data["device_kind"]),
            torch_version=str(data["torch_version"]),
            dtype=str(data["dtype"]),
            context_len=int(data["context_len"]),
            model=model,
            batches=bs,
            queries=qs,
            step_ms=_grid(data, "step_ms", len(bs), len(qs)),
            step_ms_low=_grid(data, "step_ms_low", len(bs), len(qs)),
            step_ms_high=_grid(data, "step_ms_high", len(bs), len(qs)),
            repeats=int(data["repeats"]),
            cuda_graphs=bool(data["cuda_graphs"]),
            timer=str(data["timer"]),
            launch=dict(data.get("launch") or {}),
            source=str(path),
        )
    except KeyError as exc:
        raise ConfigError(f"{where}: field {exc.args[0]!r} is missing; {FIX}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}; {FIX}") from None


def check_calibration(cal: Calibration, target: ModelShape, gpus: int) -> None:
    """The calibration measured this target's shape on one GPU.

    Raises:
        ConfigError: a dense-shape value differs from ``--model``'s, or the plan spans
            more than one GPU.
    """
    if gpus != 1:
        raise ConfigError(
            f"--calibration {cal.source} measured one device; plan with --tp 1 --pp 1 "
            "or drop --calibration"
        )
    measured = shape_from_hf_config(cal.model, name="calibration")
    for attr in ("hidden", "layers", "q_heads", "kv_heads", "head_dim", "vocab"):
        mine, theirs = getattr(target, attr), getattr(measured, attr)
        if mine != theirs:
            raise ConfigError(
                f"--calibration {cal.source} measured {attr} {theirs}, --model has {mine}; "
                f"calibrate this model (`trtbench calibrate --model {target.name}`)"
            )


def calibrated_pass_s(
    cal: Calibration, model: ModelShape, batch: int, query: int, context: float
) -> float:
    """One target pass (s): T(B, q) plus the KV of ``context - context_len`` tokens per
    sequence at the calibration's bandwidth (module doc)."""
    elem = ELEMENT_BYTES[cal.dtype]
    extra = batch * (context - cal.context_len) * model.kv_bytes_per_token(elem)
    measured = cal.step_ms_at(batch, query) / 1e3
    return max(measured + extra / cal.bandwidth_bytes_per_s(model), 0.0)
