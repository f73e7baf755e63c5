"""``trtbench calibrate``'s measurement: a random-init Llama-shaped model in plain torch, timed
over a grid of batch B x query length q on the device it runs on, and the launch costs.

The model (:func:`llama_weights`, :func:`decode_pass`): embedding, per layer RMSNorm, one fused
QKV GEMM, rotary embedding, the new K/V written into a static cache of ``context + q_max``
tokens, scaled-dot-product attention over ``context + q`` cached tokens (GQA, causal inside
the q new tokens), output GEMM, RMSNorm, fused gate/up GEMM, SiLU x up, down GEMM; final norm,
LM head and a greedy argmax. Weights are ``N(0, 0.02)`` (timing does not depend on values).
bf16 on CUDA, float32 on CPU.

Timing (:func:`time_grid`) per shape: ``warmup`` passes (eager, on a side stream on CUDA),
then on CUDA one CUDA-graph capture and ``warmup`` replays; then ``repeats`` timed repeats of
``iters`` passes each, timed by CUDA events (perf_counter on CPU); ``iters`` is chosen so a
repeat lasts about ``min_repeat_ms``. The figure is the median over repeats of the mean pass
time, with the min and max as its interval.

Launch costs (:func:`launch_costs`), no profiler attached: eager, the host time of one
``add_`` on a one-element tensor issued back to back (a PyTorch op, dispatch included); on
CUDA, a graph of 1 and of 129 such kernels: the graph launch is the host time of one
``replay()`` of the 1-node graph, the per-node cost the slope of the GPU time (CUDA events)
between the two graphs, the tiny kernel's own run time included.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GRAPH_NODES = 129
"""Kernels of the larger graph of the per-node launch measurement."""


@dataclass(frozen=True)
class GridTiming:
    """Median, min and max pass time (ms) per (B, q) and the timer used."""

    step_ms: tuple[tuple[float, ...], ...]
    low_ms: tuple[tuple[float, ...], ...]
    high_ms: tuple[tuple[float, ...], ...]
    timer: str
    cuda_graphs: bool


def _head_dim(cfg: dict[str, Any]) -> int:
    return int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])


def llama_weights(torch: Any, cfg: dict[str, Any], device: Any, dtype: Any) -> dict:
    """Random weights of a Llama config (``hidden_size``, ``num_hidden_layers``,
    ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``, ``intermediate_size``,
    ``vocab_size``, ``tie_word_embeddings``) on ``device``: a dict of tensors and lists."""
    h, d = cfg["hidden_size"], _head_dim(cfg)
    nq, nkv, inter = (
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["intermediate_size"],
    )

    def rand(*shape: int) -> Any:
        return torch.randn(*shape, device=device, dtype=dtype) * 0.02

    layers = cfg["num_hidden_layers"]
    embed = rand(cfg["vocab_size"], h)
    return {
        "embed": embed,
        "lm_head": embed.t()
        if cfg.get("tie_word_embeddings")
        else rand(h, cfg["vocab_size"]),
        "norm": torch.ones(h, device=device, dtype=dtype),
        "ln1": [torch.ones(h, device=device, dtype=dtype) for _ in range(layers)],
        "ln2": [torch.ones(h, device=device, dtype=dtype) for _ in range(layers)],
        "qkv": [rand(h, (nq + 2 * nkv) * d) for _ in range(layers)],
        "o": [rand(nq * d, h) for _ in range(layers)],
        "gate_up": [rand(h, 2 * inter) for _ in range(layers)],
        "down": [rand(inter, h) for _ in range(layers)],
    }


def _rms(torch: Any, x: Any, w: Any) -> Any:
    var = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(var + 1e-6)).to(x.dtype) * w


def _rope(torch: Any, x: Any, cos: Any, sin: Any) -> Any:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def decode_pass(
    torch: Any, cfg: dict, w: dict, cache: Any, ids: Any, context: int, rope: tuple
) -> Any:
    """One forward pass of ``ids`` [B, q] after ``context`` cached tokens; writes the new
    K/V at positions ``context .. context+q-1`` of ``cache`` [layers, 2, B_max, kv_heads,
    tokens, head_dim]; returns the greedy next tokens [B, q]."""
    return decode_logits(torch, cfg, w, cache, ids, context, rope).argmax(-1)


def decode_logits(
    torch: Any, cfg: dict, w: dict, cache: Any, ids: Any, context: int, rope: tuple
) -> Any:
    """:func:`decode_pass` before the argmax: the logits [B, q, vocab]."""
    f = torch.nn.functional
    b, q = ids.shape
    d, nq, nkv = _head_dim(cfg), cfg["num_attention_heads"], cfg["num_key_value_heads"]
    cos, sin, mask = rope
    x = w["embed"][ids]
    for layer in range(cfg["num_hidden_layers"]):
        qkv = _rms(torch, x, w["ln1"][layer]) @ w["qkv"][layer]
        qh, kh, vh = (
            qkv.view(b, q, nq + 2 * nkv, d).transpose(1, 2).split((nq, nkv, nkv), dim=1)
        )
        qh, kh = _rope(torch, qh, cos, sin), _rope(torch, kh, cos, sin)
        cache[layer, 0, :b, :, context : context + q] = kh
        cache[layer, 1, :b, :, context : context + q] = vh
        keys = cache[layer, 0, :b, :, : context + q]
        values = cache[layer, 1, :b, :, : context + q]
        att = f.scaled_dot_product_attention(
            qh, keys, values, attn_mask=mask, enable_gqa=nq != nkv
        )
        x = x + att.transpose(1, 2).reshape(b, q, nq * d) @ w["o"][layer]
        gate, up = (_rms(torch, x, w["ln2"][layer]) @ w["gate_up"][layer]).chunk(2, -1)
        x = x + (f.silu(gate) * up) @ w["down"][layer]
    return _rms(torch, x, w["norm"]) @ w["lm_head"]


def rope_and_mask(
    torch: Any, d: int, context: int, q: int, device: Any, dtype: Any
) -> tuple:
    """cos, sin [q, d] of positions ``context ..`` (θ = 10000) and the causal mask
    [q, context + q] (True: attend; None for q = 1, which attends to every cached key, so
    that SDPA may pick its fused decode kernels)."""
    pos = torch.arange(context, context + q, device=device, dtype=torch.float32)
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device=device).float() / d))
    angles = torch.outer(pos, inv).repeat(1, 2)
    keys = torch.arange(context + q, device=device)
    mask = keys[None, :] <= (context + torch.arange(q, device=device))[:, None]
    return angles.cos().to(dtype), angles.sin().to(dtype), None if q == 1 else mask


def _timer(torch: Any, cuda: bool) -> Callable[[Callable[[], Any], int], float]:
    """A function timing ``iters`` calls of ``fn``: mean ms per call."""

    def by_events(fn: Callable[[], Any], iters: int) -> float:
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / iters

    def by_clock(fn: Callable[[], Any], iters: int) -> float:
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) * 1e3 / iters

    return by_events if cuda else by_clock


def _graphed(torch: Any, fn: Callable[[], Any], warmup: int) -> Callable[[], Any]:
    """``fn`` warmed on a side stream, captured as a CUDA graph; its ``replay``."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(warmup, 1)):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def _measure(torch: Any, run: Callable[[], Any], cuda: bool, plan: tuple) -> tuple:
    """(median, min, max) ms over ``repeats`` of ``iters`` runs (``plan``: warmup, repeats,
    min_repeat_ms)."""
    warmup, repeats, min_repeat_ms = plan
    timer = _timer(torch, cuda)
    for _ in range(warmup):
        run()
    once = timer(run, 1)
    iters = max(1, min(1000, int(min_repeat_ms / max(once, 1e-3)) + 1))
    samples = [timer(run, iters) for _ in range(repeats)]
    return statistics.median(samples), min(samples), max(samples)


def time_grid(
    cfg: dict[str, Any],
    batches: tuple[int, ...],
    queries: tuple[int, ...],
    context: int,
    device: str,
    timing: tuple[int, int, float],
) -> GridTiming:
    """Time one pass at every (B, q) of a random-init model of ``cfg`` on ``device``
    (``cuda`` or ``cpu``); ``timing``: (warmup, repeats, min_repeat_ms) (module doc)."""
    import torch

    cuda = device == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    w = llama_weights(torch, cfg, device, dtype)
    d, layers = _head_dim(cfg), cfg["num_hidden_layers"]
    cache = torch.zeros(
        layers,
        2,
        max(batches),
        cfg["num_key_value_heads"],
        context + max(queries),
        d,
        device=device,
        dtype=dtype,
    )
    med, low, high = [], [], []
    with torch.inference_mode():
        for b in batches:
            rows = []
            for q in queries:
                ids = torch.randint(0, cfg["vocab_size"], (b, q), device=device)
                rope = rope_and_mask(torch, d, context, q, device, dtype)

                def step(ids: Any = ids, rope: tuple = rope) -> Any:
                    return decode_pass(torch, cfg, w, cache, ids, context, rope)

                run = _graphed(torch, step, timing[0]) if cuda else step
                rows.append(_measure(torch, run, cuda, timing))
                del run
            med.append(tuple(r[0] for r in rows))
            low.append(tuple(r[1] for r in rows))
            high.append(tuple(r[2] for r in rows))
    timer = "cuda events" if cuda else "perf_counter"
    return GridTiming(tuple(med), tuple(low), tuple(high), timer, cuda)


def launch_costs(device: str, repeats: int) -> dict[str, float | None]:
    """Eager launch (µs, host) and, on CUDA, graph launch (µs, host) and per-node cost (µs,
    GPU) of tiny kernels (module doc); CPU: the graph figures are None."""
    import torch

    cuda = device == "cuda"
    x = torch.zeros(1, device=device)
    calls = 2000

    def eager() -> float:
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            x.add_(1)
        elapsed = time.perf_counter() - t0
        if cuda:
            torch.cuda.synchronize()
        return elapsed * 1e6 / calls

    eager()
    out: dict[str, float | None] = {
        "eager_launch_us": statistics.median(eager() for _ in range(max(repeats, 3))),
        "graph_launch_us": None,
        "graph_node_us": None,
    }
    if not cuda:
        return out

    def kernels(n: int) -> Callable[[], None]:
        def fn() -> None:
            for _ in range(n):
                x.add_(1)

        return fn

    one, many = _graphed(torch, kernels(1), 3), _graphed(torch, kernels(GRAPH_NODES), 3)
    host = []
    for _ in range(max(repeats, 3)):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            one()
        host.append((time.perf_counter() - t0) * 1e6 / 200)
        torch.cuda.synchronize()
    gpu_one = _measure(torch, one, True, (3, max(repeats, 3), 20.0))[0]
    gpu_many = _measure(torch, many, True, (3, max(repeats, 3), 20.0))[0]
    out["graph_launch_us"] = statistics.median(host)
    out["graph_node_us"] = (gpu_many - gpu_one) * 1e3 / (GRAPH_NODES - 1)
    return out
