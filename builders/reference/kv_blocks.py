"""Paged KV-cache accounting for the reference engine: a block pool shared by all sequences.

The reference engine keeps a static slot cache (``runner.py``); this module decides, as
TensorRT-LLM's paged KV cache manager would, how many fixed-size blocks each sequence may
hold, and the batcher obeys it. A block holds ``tokens_per_block`` tokens of one sequence
(every layer, K and V, of every model that caches it: the target and the draft model or
EAGLE-3 layer, so a byte budget is divided by their summed bytes per token, as TensorRT-LLM's
PyTorch executor divides it). Definitions (``L``: tokens in a sequence's cache, i.e. its prompt and
output less the newest token, which the next step feeds):

- between steps a sequence holds ``ceil(L / tokens_per_block)`` blocks;
- a step that feeds ``q`` tokens (1 plain; ``K + 1`` for draft_target / ngram / eagle3; tree nodes
  + 1 for Medusa) writes positions ``[L, L + q)`` and needs ``ceil((L + q) / tokens_per_block)``
  blocks during the step; after it the sequence keeps the blocks of its new length
  (verification blocks of rejected drafts return to the pool);
- a waiting request is admitted, first come first served, when the blocks of its
  admission tokens are free, and takes them. ``max_utilization`` (TensorRT-LLM's
  ``batch_scheduler_policy`` of that name): its prefill ``n`` plus its first decode token,
  ``n + 1``; ``guaranteed_no_evict`` (TensorRT-LLM's default capacity policy): its whole
  life, ``n + r - 2 + q`` for ``r`` tokens still to generate and a verification width ``q``
  (the last step starts with ``n + r - 2`` cached), at least ``n + 1``, at most the pool;
  it keeps them until it ends, so it is never preempted and always verifies.

Each iteration (as TensorRT-LLM schedules generation requests, draft tokens included, before
new context requests): every running sequence, oldest first, gets the blocks of a plain
step; when the pool runs dry the youngest running sequence is preempted (its blocks freed,
recomputed later from its prompt + output). Then, oldest first, each running sequence gets
its verification blocks or drafts nothing this step. Then waiting requests are admitted
with what is left, and they too get verification blocks if some remain. So speculation
takes blocks that new requests would otherwise get: under pressure a speculative variant
admits fewer requests at once. Source for the names: TensorRT-LLM ``KvCacheConfig``
(``max_tokens``, ``free_gpu_memory_fraction``), ``trtllm-build --tokens_per_block`` (default
32, ``tensorrt_llm/plugin/plugin.py``) and the Triton backend's
``nv_trt_llm_kv_cache_block_metrics``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from trtbench.core.errors import ConfigError

DEFAULT_TOKENS_PER_BLOCK = 32  # trtllm-build --tokens_per_block default
MAX_UTILIZATION = "max_utilization"
GUARANTEED_NO_EVICT = "guaranteed_no_evict"
POLICIES = (MAX_UTILIZATION, GUARANTEED_NO_EVICT)


@dataclass(frozen=True)
class KvCacheSettings:
    """The KV budget of one engine.

    Attributes:
        tokens_per_block: tokens per block (TensorRT-LLM ``tokens_per_block``).
        max_tokens: tokens the pool holds at most (``KvCacheConfig.max_tokens``).
        budget_bytes: the memory ``free_memory_fraction`` applies to (on a GPU server
            TensorRT-LLM takes the free device memory; the reference engine takes this).
        free_memory_fraction: share of ``budget_bytes`` given to the KV cache.
        policy: ``max_utilization`` or ``guaranteed_no_evict`` (admission, module docstring).
    """

    tokens_per_block: int = DEFAULT_TOKENS_PER_BLOCK
    max_tokens: int | None = None
    budget_bytes: int | None = None
    free_memory_fraction: float = 0.9
    policy: str = MAX_UTILIZATION

    @property
    def limited(self) -> bool:
        """Whether a budget is set (else the pool is the slot cache's capacity)."""
        return self.max_tokens is not None or self.budget_bytes is not None


def pool_blocks(
    settings: KvCacheSettings,
    bytes_per_token: int,
    slots: int,
    max_cache_len: int,
    max_seq_len: int,
) -> int:
    """Blocks in the pool: the smallest of the slot cache's capacity
    (``slots × ceil(max_cache_len / tokens_per_block)``), ``ceil(max_tokens /
    tokens_per_block)`` and ``floor(fraction × budget_bytes / (bytes_per_token ×
    tokens_per_block))``.

    Raises:
        ConfigError: the budget holds fewer blocks than one request at ``max_seq_len``
            needs (``ceil(max_seq_len / tokens_per_block)``).
    """
    tpb = settings.tokens_per_block
    if tpb < 1:
        raise ConfigError(f"tokens_per_block is {tpb}; use 1 or more (default 32)")
    blocks = slots * math.ceil(max_cache_len / tpb)
    need = math.ceil(max_seq_len / tpb)
    field = fix = ""
    if settings.max_tokens is not None:
        blocks = min(blocks, math.ceil(settings.max_tokens / tpb))
        field = f"kv_cache_max_tokens {settings.max_tokens}"
        fix = f"raise kv_cache_max_tokens to at least {need * tpb}"
    if settings.budget_bytes is not None:
        fraction = settings.free_memory_fraction
        by_bytes = int(fraction * settings.budget_bytes // (bytes_per_token * tpb))
        if by_bytes < blocks:
            blocks = by_bytes
            field = (
                f"kv_cache_budget_bytes {settings.budget_bytes} x "
                f"kv_cache_free_gpu_mem_fraction {fraction:g} "
                f"({bytes_per_token} bytes per token)"
            )
            least = math.ceil(need * tpb * bytes_per_token / fraction)
            fix = f"raise kv_cache_budget_bytes to at least {least}"
    if blocks < need:
        raise ConfigError(
            f"{field} gives {blocks} KV blocks of {tpb} tokens, fewer than the {need} one "
            f"request at max_seq_len {max_seq_len} needs; {fix} or lower max_seq_len"
        )
    return blocks


def kv_bytes_per_token(config, dtype) -> int:
    """KV bytes per token of a decoder (a transformers config, a torch dtype): ``2 × layers
    × kv_heads × head_dim × dtype size`` (one K and one V vector per layer and KV head, the
    slot cache's layout; as ``profiling/memory/breakdown.py`` defines it)."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return 2 * config.num_hidden_layers * kv_heads * head_dim * dtype.itemsize


def slot_cache_bytes_per_token(keys: Sequence) -> int:
    """KV bytes per token of an allocated slot cache, from its per-layer key buffers
    ``[slots, kv_heads, max_len, head_dim]`` (``runner.SlotCache.keys``; V mirrors K):
    ``2 × Σ_layers kv_heads × head_dim × element size`` — :func:`kv_bytes_per_token` of the
    cache as allocated (a one-layer EAGLE-3 draft included)."""
    return 2 * sum(k.shape[1] * k.shape[3] * k.element_size() for k in keys)


@dataclass(frozen=True)
class SeqNeed:
    """One running sequence as the scheduler sees it: key, cached tokens, admission order."""

    key: Hashable
    cached: int
    order: int


class KvBlockPool:
    """Blocks held per sequence key, out of ``max_blocks`` (see the module docstring).

    Counters (cumulative, for metrics): ``preemptions``, ``kv_waits`` (times a request at
    the head of the queue began waiting for blocks), ``draft_skipped`` (sequence-steps
    that drafted nothing for lack of blocks), ``block_steps`` (sum over steps of blocks held
    during the step) and ``speculative_block_steps`` (of those, the verification blocks
    beyond a plain step's).
    """

    def __init__(
        self, max_blocks: int, tokens_per_block: int, policy: str = MAX_UTILIZATION
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(
                f"batch_scheduler_policy {policy!r} is not one of {POLICIES}"
            )
        self.max_blocks = max_blocks
        self.tokens_per_block = tokens_per_block
        self.policy = policy
        self._held: dict[Hashable, int] = {}
        self._floor: dict[Hashable, int] = {}  # blocks kept whatever the length
        self.used_blocks = 0
        self.preemptions = 0
        self.kv_waits = 0
        self._refused: set[Hashable] = set()  # waiting for blocks now
        self.draft_skipped = 0
        self.block_steps = 0
        self.speculative_block_steps = 0

    @property
    def free_blocks(self) -> int:
        return self.max_blocks - self.used_blocks

    def blocks_for(self, tokens: int) -> int:
        """``ceil(tokens / tokens_per_block)``."""
        return -(-tokens // self.tokens_per_block)

    def held(self, key: Hashable) -> int:
        return self._held.get(key, 0)

    def grow(self, key: Hashable, tokens: int) -> bool:
        """Make ``key`` hold at least ``blocks_for(tokens)``; False (nothing taken) when
        the pool lacks the difference."""
        self._refused.discard(key)
        extra = self.blocks_for(tokens) - self.held(key)
        if extra <= 0:
            return True
        if extra > self.free_blocks:
            return False
        self._held[key] = self.held(key) + extra
        self.used_blocks += extra
        return True

    def trim(self, key: Hashable, tokens: int) -> None:
        """Make ``key`` hold exactly ``blocks_for(tokens)`` if it holds more (never below
        what it reserved at admission under ``guaranteed_no_evict``)."""
        keep = max(self.blocks_for(tokens), self._floor.get(key, 0))
        extra = self.held(key) - keep
        if extra > 0:
            self._held[key] -= extra
            self.used_blocks -= extra

    def release(self, key: Hashable) -> None:
        """Free every block of ``key``."""
        self._floor.pop(key, None)
        self.used_blocks -= self._held.pop(key, 0)

    def sync(self, live: dict[Hashable, int]) -> None:
        """Release keys not in ``live``; trim the others to ``live[key]`` cached tokens."""
        for key in [k for k in self._held if k not in live]:
            self.release(key)
        for key, cached in live.items():
            self.trim(key, cached)

    def admission_tokens(self, context: int, remaining: int, q: int) -> int:
        """Tokens whose blocks a request takes at admission (module docstring): ``context``
        prefilled, ``remaining`` still to generate, verification width ``q``."""
        if self.policy == MAX_UTILIZATION:
            return context + 1
        whole = max(context + 1, context + remaining - 2 + q)
        return min(whole, self.max_blocks * self.tokens_per_block)

    def can_admit(self, tokens: int, key: Hashable = None) -> bool:
        """Whether the blocks of ``tokens`` (:meth:`admission_tokens`) are free now (a
        refused ``key`` counts one ``kv_waits`` until it next gets blocks)."""
        if self.blocks_for(tokens) <= self.free_blocks:
            return True
        if key is not None and key not in self._refused:
            self._refused.add(key)
            self.kv_waits += 1
        return False

    def admit(self, key: Hashable, tokens: int) -> None:
        """Give an admitted request the blocks of its admission ``tokens`` (checked with
        :meth:`can_admit`); under ``guaranteed_no_evict`` it keeps them until it ends."""
        self.grow(key, tokens)
        if self.policy == GUARANTEED_NO_EVICT:
            self._floor[key] = self.held(key)

    def reserve_plain(self, rows: Sequence[SeqNeed]) -> list[Hashable]:
        """Give each row, oldest first, the blocks of a one-token step; preempt the
        youngest running rows when the pool runs dry.

        Returns:
            Keys of the preempted rows, youngest first (their blocks are already freed).
        """
        alive = {r.key: r for r in rows}
        victims: list[Hashable] = []
        for row in sorted(rows, key=lambda r: r.order):
            if row.key not in alive:
                continue
            while not self.grow(row.key, row.cached + 1):
                victim = max(alive.values(), key=lambda r: r.order)
                del alive[victim.key]
                self.release(victim.key)
                victims.append(victim.key)
                self.preemptions += 1
                if victim.key == row.key:
                    break
        return victims

    def reserve_speculative(self, rows: Sequence[SeqNeed], q: int) -> list[bool]:
        """After :meth:`reserve_plain`: give each row, oldest first, the blocks of a
        ``q``-token step if the pool has them; False rows draft nothing this step.

        Returns:
            Per row (in the order given), whether it may verify ``q`` tokens.
        """
        allow = dict.fromkeys((r.key for r in rows), q <= 1)
        if q > 1:
            for row in sorted(rows, key=lambda r: r.order):
                allow[row.key] = self.grow(row.key, row.cached + q)
                self.draft_skipped += not allow[row.key]
                if allow[row.key]:
                    self.speculative_block_steps += self.blocks_for(
                        row.cached + q
                    ) - self.blocks_for(row.cached + 1)
        return [allow[r.key] for r in rows]

    def account_step(self) -> None:
        """Add the blocks held during this step to ``block_steps`` (once per step)."""
        self.block_steps += self.used_blocks
