"""Tensor and pipeline parallelism for the planner: what each GPU holds and what it sends.

Model (Megatron-style tensor parallelism, as TensorRT-LLM's ``tp_size`` / vLLM's
``tensor_parallel_size`` shard a Llama layer; pipeline stages as ``pp_size``):

* Weights: each GPU holds ``params / (tp * pp)`` (embedding and lm_head split over the
  vocabulary, linears over heads / the MLP width; the replicated norms, ~0.001 % of a Llama,
  are ignored).
* KV cache: each GPU holds ``ceil(kv_heads / tp) / kv_heads`` of a layer's KV (a KV head is
  replicated when tp exceeds the KV heads) for ``1 / pp`` of the layers.
* Time of one pass: the roofline over one GPU's share of the bytes and FLOPs, summed over the
  ``pp`` stages run one after another (one micro-batch in decode), plus communication, not
  overlapped with compute:

      all-reduce of M bytes over N GPUs (ring) = latency + 2 (N-1)/N * M / link bandwidth
      M = B * T * hidden * 2 bytes  (BF16/FP16 activations, FP8 weights included)
      per pass: 2 all-reduces per layer (after attention and after the MLP), tp > 1
      pipeline: (pp - 1) point-to-point sends of M bytes, each latency + M / link bandwidth

  The ring formula is the bus-bandwidth convention of NVIDIA nccl-tests (doc/PERFORMANCE.md:
  busBw = algBw * 2 (n-1)/n for all-reduce). Link bandwidth is one direction of the GPU's
  link (``gpus.GpuSpec.link_bytes_per_s``: 450 GB/s for H100/H200 NVLink 4, 300 GB/s for A100
  NVLink 3). The default latency, 10 µs per all-reduce, is an assumption of the order of a
  small NCCL all-reduce within one NVLink node; override it (``--allreduce-latency-us``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trtbench.core.errors import ConfigError
from trtbench.plan.model_shapes import ModelShape

ACTIVATION_BYTES = 2.0  # BF16/FP16 hidden states between layers
DEFAULT_ALLREDUCE_LATENCY_S = 10e-6


@dataclass(frozen=True)
class Parallelism:
    """How the model is split and how fast the GPUs talk.

    Attributes:
        tp: tensor-parallel GPUs per stage.
        pp: pipeline stages.
        link_bytes_per_s: one-direction GPU-to-GPU bandwidth (B/s).
        allreduce_latency_s: fixed time of one all-reduce or point-to-point send (s).
    """

    tp: int = 1
    pp: int = 1
    link_bytes_per_s: float = 450e9
    allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S

    @property
    def gpus(self) -> int:
        """GPUs in all: ``tp * pp``."""
        return self.tp * self.pp


def kv_share(model: ModelShape, tp: int) -> float:
    """Share of one layer's KV cache a GPU holds: ``ceil(kv_heads / tp) / kv_heads``."""
    return math.ceil(model.kv_heads / tp) / model.kv_heads


def allreduce_s(par: Parallelism, message_bytes: float) -> float:
    """One ring all-reduce of ``message_bytes`` over ``tp`` GPUs (0 for tp = 1), seconds."""
    if par.tp <= 1:
        return 0.0
    n = par.tp
    return (
        par.allreduce_latency_s + 2 * (n - 1) / n * message_bytes / par.link_bytes_per_s
    )


def communication_s(
    par: Parallelism, model: ModelShape, batch: int, new_tokens: int
) -> float:
    """All-reduces (2 per layer) and pipeline sends of one pass over ``batch`` x ``new_tokens``.

    Returns seconds (module doc for the formula).
    """
    message = batch * new_tokens * model.hidden * ACTIVATION_BYTES
    ring = 2 * model.layers * allreduce_s(par, message)
    sends = (par.pp - 1) * (par.allreduce_latency_s + message / par.link_bytes_per_s)
    return ring + sends


def check_tp(
    model: ModelShape,
    tp: int,
    role: str = "--model",
    flag: str = "--tp",
    most: int | None = None,
) -> None:
    """``tp`` must divide the attention heads, and divide or be a multiple of the KV heads.

    Args:
        role, flag: the option naming the model and the one giving ``tp`` (for the message).
        most: the largest tp that may be offered (the GPUs there are; None: no limit).

    Raises:
        ConfigError: naming the model, its heads and the tp, and the tp values that work.
    """
    if tp < 1:
        raise ConfigError(f"{flag} must be >= 1, got {tp}")
    kv_ok = model.kv_heads % tp == 0 or tp % model.kv_heads == 0
    if model.q_heads % tp == 0 and kv_ok:
        return
    ok = [
        n
        for n in range(1, min(model.q_heads, most or model.q_heads) + 1)
        if model.q_heads % n == 0
        and (model.kv_heads % n == 0 or n % model.kv_heads == 0)
    ]
    raise ConfigError(
        f"{flag} {tp} does not divide the {model.q_heads} attention heads "
        f"({model.kv_heads} KV heads) of {role} {model.name}; use {flag} "
        f"{', '.join(map(str, ok))}"
    )


def check_parallelism(par: Parallelism) -> None:
    """Positive sizes and link figures.

    Raises:
        ConfigError: naming the option at fault.
    """
    if par.pp < 1:
        raise ConfigError(f"--pp must be >= 1, got {par.pp}")
    if par.link_bytes_per_s <= 0:
        raise ConfigError("--link-gbs must be > 0 (GB/s in one direction)")
    if par.allreduce_latency_s < 0:
        raise ConfigError("--allreduce-latency-us must be >= 0")
