"""One causal LM with a static KV cache, run on explicit positions and attention masks.

The reference engine drives every decoding mode through :class:`ModelRunner`: a prompt is
prefilled, then each step appends ``q`` tokens at cache slots ``[L, L + q)`` with explicit
``position_ids`` and a 4-D additive float mask of shape ``[1, 1, q, max_cache_len]`` (visible:
the ``L`` cached slots, plus, among the new tokens, what ``step_mask`` allows — causal for a
chain, ancestors-only for a Medusa tree). Transformers returns such a mask as-is
(``masking_utils._preprocess_mask_arguments``) and ``StaticCache`` writes the new keys/values at
its ``cumulative_length``; rolling back is ``crop`` and keeping a tree path is an index copy
inside each layer's ``keys``/``values``.

Static shapes are what CUDA graphs need: on a CUDA device, :meth:`ModelRunner.capture` records
one ``torch.cuda.CUDAGraph`` per step length ``q`` (the decode step, the K+1 verification, the
tree verification); the inputs are copied into the graph's static buffers and the graph is
replayed. The prefill always runs eagerly. The same static-cache path runs on CPU (without
graphs), so CPU tests exercise the code that the graphs replay.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, StaticCache

logger = logging.getLogger(__name__)


@dataclass
class _Graph:
    """A captured step of fixed length ``q``: static input buffers and output views."""

    graph: torch.cuda.CUDAGraph
    ids: torch.Tensor  # [1, q] int64
    positions: torch.Tensor  # [1, q] int64
    mask: torch.Tensor  # [1, 1, q, max_cache_len] model dtype
    logits: torch.Tensor  # [q, vocab]
    hidden: torch.Tensor  # [q, hidden]


class ModelRunner:
    """A Hugging Face causal LM, its static KV cache and (on CUDA) captured decode graphs.

    Args:
        model: a ``*ForCausalLM`` already on its device and dtype (put in eval mode here).
        max_cache_len: cache slots; at least the longest sequence plus the widest step.

    Attributes:
        length: cached tokens (slots ``[0, length)`` hold the sequence so far).
    """

    def __init__(self, model: PreTrainedModel, max_cache_len: int) -> None:
        self.model = model.eval()
        self.decoder = model.get_decoder()
        self.lm_head = model.get_output_embeddings()
        self.device = model.device
        self.dtype = model.dtype
        self.max_cache_len = max_cache_len
        self.cache = StaticCache(config=model.config, max_cache_len=max_cache_len)
        self.length = 0
        self._graphs: dict[int, _Graph] = {}
        self._min = torch.finfo(self.dtype).min

    @property
    def graph_lengths(self) -> tuple[int, ...]:
        """Step lengths ``q`` that replay a captured CUDA graph (empty when eager)."""
        return tuple(sorted(self._graphs))

    def reset(self) -> None:
        """Forget the cached sequence (the buffers stay where they are)."""
        self.crop(0)

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` cached tokens (``length <= self.length``)."""
        if length < self.length:
            self.cache.crop(length - self.length)  # transformers 5: negative = remove
            self.length = length

    def keep(self, start: int, offsets: Sequence[int]) -> None:
        """Keep the step tokens at slots ``start + offsets`` (ascending) and drop the rest.

        After a tree verification that wrote slots ``[start, start + q)``, the accepted
        path's entries move to ``[start, start + len(offsets))`` and the cache ends there.
        """
        src = torch.tensor(offsets, device=self.device) + start
        dst = torch.arange(len(offsets), device=self.device) + start
        if not torch.equal(src, dst):
            for layer in self.cache.layers:
                layer.keys.index_copy_(2, dst, layer.keys.index_select(2, src))
                layer.values.index_copy_(2, dst, layer.values.index_select(2, src))
        self.crop(start + len(offsets))

    def step_mask(self, step_mask: torch.Tensor) -> torch.Tensor:
        """The additive mask ``[1, 1, q, max_cache_len]`` for a step at the current length.

        Args:
            step_mask: ``[q, q]`` bool, True where new token ``i`` may see new token ``j``.
        """
        q, start = step_mask.shape[0], self.length
        allowed = torch.zeros(q, self.max_cache_len, dtype=torch.bool)
        allowed[:, :start] = True
        allowed[:, start : start + q] = step_mask
        mask = torch.zeros(allowed.shape, dtype=self.dtype)
        mask.masked_fill_(~allowed, self._min)
        return mask.view(1, 1, q, self.max_cache_len).to(self.device)

    def forward(
        self,
        tokens: Sequence[int],
        offsets: Sequence[int] | None = None,
        step_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``tokens`` to the cache and return their logits and last hidden states.

        Args:
            tokens: q token ids, written at slots ``[length, length + q)``.
            offsets: position of each token relative to ``length`` (default ``0..q-1``;
                a Medusa tree gives each node its depth).
            step_mask: ``[q, q]`` bool visibility among the new tokens (default causal).

        Returns:
            ``(logits [q, vocab], hidden [q, hidden])``. With a CUDA graph these are the
            graph's output buffers: use them before the next call.

        Raises:
            ValueError: the step would run past ``max_cache_len`` (callers check limits).
        """
        q = len(tokens)
        if self.length + q > self.max_cache_len:
            raise ValueError(
                f"{q} tokens at length {self.length} exceed the cache of "
                f"{self.max_cache_len} slots"
            )
        if step_mask is None:
            step_mask = torch.ones(q, q, dtype=torch.bool).tril_()
        offs = range(q) if offsets is None else offsets
        positions = torch.tensor([[self.length + o for o in offs]], device=self.device)
        ids = torch.tensor([list(tokens)], device=self.device)
        mask = self.step_mask(step_mask)
        graph = self._graphs.get(q)
        if graph is None:
            logits, hidden = self._eager(ids, positions, mask)
        else:
            graph.ids.copy_(ids)
            graph.positions.copy_(positions)
            graph.mask.copy_(mask)
            graph.graph.replay()
            logits, hidden = graph.logits, graph.hidden
        self.length += q
        return logits, hidden

    def prefill(self, tokens: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Reset, run the prompt eagerly; ``(logits [1, vocab], hidden [1, hidden])`` of its
        last token only (no LM head over the whole prompt)."""
        self.reset()
        q = len(tokens)
        if q > self.max_cache_len:
            raise ValueError(
                f"{q} prompt tokens exceed the cache of {self.max_cache_len}"
            )
        ids = torch.tensor([list(tokens)], device=self.device)
        positions = torch.arange(q, device=self.device).view(1, q)
        mask = self.step_mask(torch.ones(q, q, dtype=torch.bool).tril_())
        logits, hidden = self._eager(ids, positions, mask, last_only=True)
        self.length = q
        return logits, hidden

    @torch.inference_mode()
    def _eager(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor,
        last_only: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.decoder(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            cache=self.cache,
            use_cache=True,
        )
        hidden = (
            out.last_hidden_state[0, -1:] if last_only else out.last_hidden_state[0]
        )
        return self.lm_head(hidden), hidden

    @torch.inference_mode()
    def capture(self, lengths: Sequence[int], warmup: int = 2) -> None:
        """Capture one CUDA graph per step length in ``lengths`` (CUDA devices only).

        Warm-up runs write scratch entries past the current length and are cropped away,
        so the cache content is unchanged. Afterwards :meth:`forward` replays the graph for
        those lengths.

        Raises:
            RuntimeError: the device is not CUDA, or capture fails (the caller records why).
        """
        if self.device.type != "cuda":
            raise RuntimeError(f"CUDA graphs need a CUDA device, not {self.device}")
        if not self.cache.layers[0].is_initialized:  # buffers come with the 1st update
            self._eager(*self._scratch(1))
            self.cache.crop(-1)
        for q in sorted(set(lengths)):
            self._graphs[q] = self._capture_one(q, warmup)

    def _scratch(self, q: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ids = torch.zeros(1, q, dtype=torch.long, device=self.device)
        positions = torch.arange(q, device=self.device).view(1, q) + self.length
        mask = self.step_mask(torch.ones(q, q, dtype=torch.bool).tril_())
        return ids, positions, mask

    def _capture_one(self, q: int, warmup: int) -> _Graph:
        ids, positions, mask = self._scratch(q)
        stream = torch.cuda.Stream(device=self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                self._eager(ids, positions, mask)
                self.cache.crop(-q)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits, hidden = self._eager(ids, positions, mask)
        # Capture records kernels without running them: the cache length is unchanged.
        logger.debug("captured a CUDA graph for %d-token steps", q)
        return _Graph(graph, ids, positions, mask, logits, hidden)
