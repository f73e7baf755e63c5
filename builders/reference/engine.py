"""The PyTorch reference engine: greedy generation in baseline, draft_target, medusa, ngram or
eagle3 mode, with optional adaptive speculation (``adaptive.py``: the draft length of a step follows
the active batch size).

An engine directory holds only ``build.json`` (written by ``trtbench build``); it points at
the Hugging Face target / draft dirs, the Medusa heads dir or the EAGLE-3 checkpoint.
:func:`trtbench.builders.reference.loading.load_engine` reads it
and returns a :class:`ReferenceEngine`, whose :meth:`~ReferenceEngine.generate` yields one
:class:`Step` per decode step — the tokens it emitted and the draft tokens it proposed and
accepted — which is what a Triton streaming response carries.

Requests are served with in-flight batching (``batcher.py``): up to ``max_batch_size``
sequences are decoded together, one batched target forward per decode step; requests beyond
that wait in a FIFO queue and join as rows finish. Concurrent :meth:`~ReferenceEngine.generate`
calls (or :meth:`~ReferenceEngine.submit` from a server) therefore share decode steps; a
request's tokens do not depend on what else is in the batch (greedy, lossless).

Counting (TensorRT-LLM's ``total_draft_tokens`` / ``total_accepted_draft_tokens``,
triton-inference-server/tensorrtllm_backend ``docs/model_config.md``): ``draft_proposed`` is K
for a draft_target or eagle3 step, the number of tree nodes for a Medusa step and the drafts
the lookup found (0..K) for an ngram step (0 for baseline, for the prefill step and for a step
that adaptive speculation left undrafted); ``draft_accepted`` is the number of drafts
verification accepted. A step emits ``accepted + 1`` tokens unless it is cut at ``max_tokens``
or after the end token. A step reports both counts: the drafts the engine accepted
(``draft_accepted``, NOT reduced at a cut step, as vLLM counts them; the acceptance figures use
it) and the tokens it emitted (``len(token_ids)``, cut; throughput and output length use it).
Example: K = 4, 3 drafts accepted, 2 tokens of room left → the step emits 2 tokens and reports
``draft_accepted = 3``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from trtbench.builders.manifest import CudaGraphs
from trtbench.builders.reference.batcher import (
    Deliver,
    InflightBatcher,
    RequestHandle,
    Step,
)
from trtbench.builders.reference.decoding import BaselineDecoder, Greedy
from trtbench.builders.reference.handicap import HandicappedBatcher
from trtbench.builders.reference.kv_blocks import KvBlockPool
from trtbench.core.errors import ConfigError

logger = logging.getLogger(__name__)

__all__ = ["ReferenceEngine", "ServingStats", "Step"]


@dataclass(frozen=True)
class ServingStats:
    """A snapshot of the engine's scheduler, named as TensorRT-LLM's Triton backend names
    its gauges (``nv_trt_llm_request_metrics`` / ``nv_trt_llm_kv_cache_block_metrics``,
    NVIDIA/TensorRT-LLM ``triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/``).

    Attributes:
        active: requests running or waiting; ``scheduled``: rows in the latest decode step;
        context: requests prefilled in the latest iteration; ``waiting``: requests queued
        for a slot or KV blocks (TensorRT-LLM: active − scheduled); ``paused``: waiting requests that were preempted; ``max_requests``: the
        batch slots. KV: ``max_blocks``, ``free_blocks``, ``used_blocks``,
        ``tokens_per_block``. Totals: ``preemptions``, ``kv_waits``, ``draft_skipped_for_kv``,
        ``block_steps``, ``speculative_block_steps`` (``kv_blocks.KvBlockPool``),
        ``draft_tokens``, ``accepted_draft_tokens``, ``steps``.
    """

    active: int
    scheduled: int
    context: int
    waiting: int
    paused: int
    max_requests: int
    max_blocks: int
    free_blocks: int
    used_blocks: int
    tokens_per_block: int
    preemptions: int
    kv_waits: int
    draft_skipped_for_kv: int
    block_steps: int
    speculative_block_steps: int
    draft_tokens: int
    accepted_draft_tokens: int
    steps: int


class ReferenceEngine:
    """A loaded reference engine (models on their device, caches allocated).

    Args:
        mode: ``baseline``, ``draft_target``, ``medusa``, ``ngram`` or ``eagle3``.
        decoder: the batched decoding strategy over its model runners (``decoding.py``);
            its slots are the engine's ``max_batch_size``.
        tokenizer: the target's tokenizer (``PreTrainedTokenizerFast``).
        max_seq_len: prompt + generated tokens allowed per request.
        max_input_len: prompt tokens allowed per request.
        cuda_graphs: what was asked for and what this engine does (with the reason).
        kv_pool: the KV block pool (``kv_blocks.py``; None: as large as the slot cache).

    Attributes:
        eos_token_id: the tokenizer's end token (None if it has none).
        max_batch_size: sequences decoded together at most (in-flight batching).
        handicap: the batcher's extra wait per decode step, as a share of the step
            (the variant field ``handicap``; 0: none).
    """

    def __init__(
        self,
        mode: str,
        decoder: BaselineDecoder,
        tokenizer: object,
        *,
        max_seq_len: int,
        max_input_len: int,
        cuda_graphs: CudaGraphs,
        kv_pool: KvBlockPool | None = None,
    ) -> None:
        self.mode = mode
        self.decoder = decoder
        self.tokenizer = tokenizer
        self.eos_token_id: int | None = getattr(tokenizer, "eos_token_id", None)
        self.max_seq_len = max_seq_len
        self.max_input_len = max_input_len
        self.cuda_graphs = cuda_graphs
        self.vocab_size = decoder.target.lm_head.weight.shape[0]
        self.device = decoder.target.device
        self.max_batch_size = decoder.slots
        self.kv_pool = kv_pool or KvBlockPool(
            decoder.slots * decoder.target.max_cache_len, 1
        )
        self._batcher_lock = threading.Lock()
        self._batcher: InflightBatcher | None = None
        self.handicap = 0.0

    @property
    def draft_len(self) -> int:
        """Draft tokens proposed per step at most: K, the tree's node count, or 0."""
        return self.decoder.proposed_per_step

    def info(self) -> dict[str, object]:
        """Plain-data description (mode, device, dtype, limits, CUDA graphs) for logs."""
        target = self.decoder.target
        return {
            "mode": self.mode,
            "device": str(target.device),
            "dtype": str(target.dtype).removeprefix("torch."),
            "draft_len": self.draft_len,
            "max_seq_len": self.max_seq_len,
            "max_input_len": self.max_input_len,
            "batching": "inflight",
            "max_batch_size": self.max_batch_size,
            "kv_max_blocks": self.kv_pool.max_blocks,
            "kv_tokens_per_block": self.kv_pool.tokens_per_block,
            "cuda_graphs": self.cuda_graphs.model_dump(),
        }

    def _check_request(
        self, input_ids: Sequence[int], max_tokens: int, min_tokens: int
    ) -> None:
        n = len(input_ids)
        if n == 0:
            raise ConfigError("input_ids is empty; send at least one prompt token")
        if n > self.max_input_len:
            raise ConfigError(
                f"prompt of {n} tokens exceeds max_input_len {self.max_input_len}; "
                "shorten it or rebuild with a larger max_input_len"
            )
        if max_tokens < 1:
            raise ConfigError(f"max_tokens is {max_tokens}; ask for at least 1 token")
        if n + max_tokens > self.max_seq_len:
            raise ConfigError(
                f"prompt {n} + max_tokens {max_tokens} exceeds max_seq_len "
                f"{self.max_seq_len}; lower max_tokens or rebuild with a larger max_seq_len"
            )
        if min_tokens < 0:
            raise ConfigError(f"min_tokens is {min_tokens}; use 0 or more")
        bad = [t for t in input_ids if not 0 <= int(t) < self.vocab_size]
        if bad:
            raise ConfigError(
                f"input token id {bad[0]} is outside the vocabulary [0, {self.vocab_size}); "
                "tokenize with the engine's tokenizer"
            )

    def _greedy(
        self,
        input_ids: Sequence[int],
        max_tokens: int,
        end_id: int | None,
        min_tokens: int,
    ) -> Greedy:
        """Check a request and build its greedy rule (see :meth:`generate`)."""
        self._check_request(input_ids, max_tokens, min_tokens)
        eos = self.eos_token_id if end_id is None else (None if end_id < 0 else end_id)
        if eos is not None and eos >= self.vocab_size:
            raise ConfigError(
                f"end_id {eos} is outside the vocabulary [0, {self.vocab_size}); use a "
                "token id of the engine's tokenizer, or -1 to never stop early"
            )
        return Greedy(eos_id=eos, min_tokens=min_tokens)

    @property
    def batcher(self) -> InflightBatcher:
        """The engine's in-flight batcher (created on first use; its thread starts with
        the first :meth:`submit` that asks for it)."""
        with self._batcher_lock:
            if self._batcher is None:
                self._batcher = (
                    HandicappedBatcher(self.decoder, self.kv_pool, self.handicap)
                    if self.handicap
                    else InflightBatcher(self.decoder, self.kv_pool)
                )
            return self._batcher

    def stats(self) -> ServingStats:
        """The scheduler's gauges and totals now (thread-safe, approximate while a step
        runs)."""
        batcher, kv = self.batcher, self.kv_pool
        waiting, paused = batcher.queue_counts()
        running = len(self.decoder.rows)
        return ServingStats(
            active=running + waiting,
            scheduled=batcher.scheduled,
            context=batcher.context,
            waiting=waiting,
            paused=paused,
            max_requests=self.max_batch_size,
            max_blocks=kv.max_blocks,
            free_blocks=kv.free_blocks,
            used_blocks=kv.used_blocks,
            tokens_per_block=kv.tokens_per_block,
            preemptions=kv.preemptions,
            kv_waits=kv.kv_waits,
            draft_skipped_for_kv=kv.draft_skipped,
            block_steps=kv.block_steps,
            speculative_block_steps=kv.speculative_block_steps,
            draft_tokens=batcher.draft_proposed,
            accepted_draft_tokens=batcher.draft_accepted,
            steps=batcher.steps_run,
        )

    def submit(
        self,
        input_ids: Sequence[int],
        max_tokens: int,
        *,
        end_id: int | None = None,
        min_tokens: int = 0,
        deliver: Deliver | None = None,
        start: bool = True,
    ) -> RequestHandle:
        """Queue a request for in-flight batching; returns at once (thread-safe).

        Args:
            input_ids, max_tokens, end_id, min_tokens: as for :meth:`generate`.
            deliver: ``deliver(step, final, error)``, called on the batcher's thread for
                each :class:`Step` (``final=True`` on the last) and once with ``step=None,
                final=True`` when the request ends otherwise (cancelled: ``error`` None;
                engine closed or a failed forward: ``error`` set). None: iterate the handle.
            start: start the batcher's loop thread if it is not running (False: the caller
                drives ``engine.batcher.run_until_idle()`` itself).

        Returns:
            A handle (iterate it without ``deliver``; ``cancel()`` frees the slot).

        Raises:
            ConfigError: as for :meth:`generate`.
        """
        greedy = self._greedy(input_ids, max_tokens, end_id, min_tokens)
        return self._enqueue(input_ids, max_tokens, greedy, deliver, start)

    def _enqueue(
        self,
        input_ids: Sequence[int],
        max_tokens: int,
        greedy: Greedy,
        deliver: Deliver | None = None,
        start: bool = True,
    ) -> RequestHandle:
        """Hand a checked request to the batcher (see :meth:`submit`)."""
        batcher = self.batcher
        handle = batcher.submit(input_ids, max_tokens, greedy, deliver)
        if start:
            batcher.start()
        return handle

    def generate(
        self,
        input_ids: Sequence[int],
        max_tokens: int,
        *,
        end_id: int | None = None,
        min_tokens: int = 0,
    ) -> Iterator[Step]:
        """Greedy generation, one :class:`Step` per decode step.

        The request joins the engine's in-flight batch when the iterator starts; closing
        the iterator early cancels it (its slot is freed).

        Args:
            input_ids: prompt token ids.
            max_tokens: generated tokens at most (the last step is cut to fit).
            end_id: stop after emitting this token (it is included). None: the tokenizer's
                eos; -1: never stop early.
            min_tokens: the end token is suppressed until this many tokens were generated.

        Returns:
            An iterator of steps; their tokens add up to the output. The request is checked
            here, before the iterator starts.

        Raises:
            ConfigError: empty or too long prompt, ``len(input_ids) + max_tokens >
                max_seq_len``, max_tokens < 1, or a token or end id outside the vocabulary.
        """
        greedy = self._greedy(input_ids, max_tokens, end_id, min_tokens)
        return self._iterate(list(input_ids), max_tokens, greedy)

    def _iterate(
        self, prompt: list[int], max_tokens: int, greedy: Greedy
    ) -> Iterator[Step]:
        handle = self._enqueue(prompt, max_tokens, greedy)
        try:
            yield from handle
        finally:
            handle.cancel()  # no-op once the request has ended

    def close(self) -> None:
        """Stop the batcher's loop (requests in flight end with an error). The engine stays
        usable: the next request starts a new loop."""
        with self._batcher_lock:
            batcher, self._batcher = self._batcher, None
        if batcher is not None:
            batcher.close()

    def generate_ids(
        self, input_ids: Sequence[int], max_tokens: int, **kw
    ) -> list[int]:
        """All generated tokens of :meth:`generate` as one list (tests, scripts)."""
        return [
            t
            for step in self.generate(input_ids, max_tokens, **kw)
            for t in step.token_ids
        ]
