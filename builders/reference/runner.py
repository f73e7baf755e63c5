"""One causal LM with a static KV cache of batch slots, run on explicit positions and masks.

The reference engine drives every decoding mode through :class:`ModelRunner`. The cache has
``slots`` rows (the engine's ``max_batch_size``); row ``r`` holds one sequence of
``lengths[r]`` tokens at cache positions ``[0, lengths[r])``. A step feeds the rows
``0..b-1`` together (the batch is kept dense: a retired row is replaced by the last one,
:meth:`ModelRunner.move`): row ``r`` appends its ``q`` tokens at ``[lengths[r],
lengths[r] + q)`` with explicit ``position_ids`` and a 4-D additive float mask of shape
``[b, 1, q, max_cache_len]`` (visible: the row's cached slots, plus, among the new tokens,
what ``step_mask`` allows — causal for a chain, ancestors-only for a Medusa tree). Rows have
different lengths; everything past a row's length is masked, so stale or padding entries
there are never seen and are overwritten by the row's next step. Transformers returns a 4-D
mask as-is (``masking_utils._preprocess_mask_arguments``) and calls the cache's ``update``
once per layer (:class:`SlotCache` writes each row at its own positions).

Rolling back is setting a row's length (``crop``); keeping a tree path is an index copy
inside the row (``keep``). Static shapes are what CUDA graphs need: on a CUDA device,
:meth:`ModelRunner.capture` records one ``torch.cuda.CUDAGraph`` per (rows, step length)
pair; the inputs are copied into the graph's static buffers and the graph is replayed. The
prefill (one row) always runs eagerly. The same path runs on CPU without graphs.

EAGLE-3 (``eagle_decoding.py``) needs intermediate states of the target: with ``aux_layers``
the runner keeps, after every forward, :attr:`ModelRunner.aux` ``[b, q, n * hidden]``: the
residual stream after ``L`` decoder layers for each id ``L`` (0 = the embeddings), in
ascending order (vLLM 0.32's ``_maybe_add_hidden_state`` semantics, see ``eagle3.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from trtbench.builders.reference.hf_load import cache_keyword

logger = logging.getLogger(__name__)


class SlotCache:
    """Key/value buffers ``[slots, kv_heads, max_len, head_dim]`` per layer.

    Duck-types the part of transformers' ``Cache`` that a decoder with a ready 4-D mask
    uses: ``update(key_states, value_states, layer_idx)``. Before a forward the runner sets
    :attr:`first` (the first slot of the batch), :attr:`rows` (``[b, 1]`` = ``0..b-1``) and
    :attr:`positions` (``[b, q]``, where each new token is written); ``update`` writes the
    new states there and returns the batch's full buffers (views, no copy).
    """

    def __init__(self, config, slots: int, max_len: int, dtype, device) -> None:
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        shape = (slots, kv_heads, max_len, head_dim)
        layers = config.num_hidden_layers
        self.keys = [
            torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)
        ]
        self.values = [torch.zeros_like(k) for k in self.keys]
        self.first = 0
        self.rows = torch.zeros(1, 1, dtype=torch.long, device=device)
        self.positions = torch.zeros(1, 1, dtype=torch.long, device=device)

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        """Write ``[b, kv_heads, q, head_dim]`` states at :attr:`positions` of the batch's
        slots; return that layer's ``[b, kv_heads, max_len, head_dim]`` keys and values."""
        b = key_states.shape[0]
        keys = self.keys[layer_idx][self.first : self.first + b]
        values = self.values[layer_idx][self.first : self.first + b]
        # [b, H, q, D] -> [b, q, H, D]: the shape of keys[rows, :, positions].
        keys[self.rows, :, self.positions] = key_states.transpose(1, 2)
        values[self.rows, :, self.positions] = value_states.transpose(1, 2)
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Unused with explicit positions; 0 so that nothing derives positions from it."""
        return 0


@dataclass
class CapturedGraph:
    """A captured step of ``b`` rows × ``q`` tokens: static input buffers, output views."""

    graph: torch.cuda.CUDAGraph
    ids: torch.Tensor  # [b, q] int64
    positions: torch.Tensor  # [b, q] int64 (rotary positions)
    slots: torch.Tensor  # [b, q] int64 (cache write positions)
    mask: torch.Tensor  # [b, 1, q, max_cache_len] model dtype
    logits: torch.Tensor  # [b, q, vocab]
    hidden: torch.Tensor  # [b, q, hidden]
    aux: torch.Tensor | None  # [b, q, n * hidden] (aux_layers) or None
    extra: torch.Tensor | None = None  # a further input (ModelRunner._static_extra)


class ModelRunner:
    """A Hugging Face causal LM, its batch-slot KV cache and (on CUDA) captured graphs.

    Args:
        model: a ``*ForCausalLM`` already on its device and dtype (put in eval mode here).
        max_cache_len: cache positions per row; at least the longest sequence plus the
            widest step.
        slots: rows of the cache (sequences decoded together at most).
        aux_layers: layer ids whose residual-stream states :attr:`aux` keeps (EAGLE-3).

    Attributes:
        lengths: cached tokens per row (row ``r`` holds positions ``[0, lengths[r])``).
        aux: after a forward or prefill with ``aux_layers``, ``[b, q, n * hidden]`` for every
            token fed (all prompt tokens after a prefill); None without ``aux_layers``.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        max_cache_len: int,
        slots: int = 1,
        aux_layers: Sequence[int] = (),
    ) -> None:
        self.model = model.eval()
        self.decoder = model.get_decoder()
        self._cache_keyword: str | None = None  # looked up at the first eager forward
        self.lm_head = model.get_output_embeddings()
        self.device = model.device
        self.dtype = model.dtype
        self.max_cache_len = max_cache_len
        self.slots = slots
        self.cache = SlotCache(
            model.config, slots, max_cache_len, self.dtype, self.device
        )
        self.lengths = [0] * slots
        self._graphs: dict[tuple[int, int], CapturedGraph] = {}
        self._templates: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        self._min = torch.finfo(self.dtype).min
        self.aux: torch.Tensor | None = None
        self._aux_layers = tuple(sorted(set(aux_layers)))
        self._aux_parts: dict[int, torch.Tensor] = {}

    def _keeper(self, layer_id: int):
        """A forward hook keeping a module's output as the state after ``layer_id`` layers."""

        def keep(module, args, output) -> None:
            self._aux_parts[layer_id] = (
                output[0] if isinstance(output, tuple) else output
            )

        return keep

    def _hooks(self) -> list:
        """Forward hooks on the aux layers for one forward (the model may be shared by
        several runners: hooks live only while this runner's forward runs)."""
        decoder = self.decoder
        return [
            (
                decoder.embed_tokens if i == 0 else decoder.layers[i - 1]
            ).register_forward_hook(self._keeper(i))
            for i in self._aux_layers
        ]

    @property
    def graph_shapes(self) -> tuple[tuple[int, int], ...]:
        """(rows, step length) pairs that replay a captured CUDA graph (empty when eager)."""
        return tuple(sorted(self._graphs))

    def drop_graphs(self) -> None:
        """Forget every captured CUDA graph: the decode step runs eagerly from now on."""
        self._graphs.clear()

    def crop(self, row: int, length: int) -> None:
        """Keep only the first ``length`` cached tokens of ``row`` (``<= lengths[row]``)."""
        self.lengths[row] = min(self.lengths[row], length)

    def keep(self, row: int, start: int, offsets: Sequence[int]) -> None:
        """Keep the step tokens of ``row`` at ``start + offsets`` (ascending), drop the rest.

        After a tree verification that wrote positions ``[start, start + q)``, the accepted
        path's entries move to ``[start, start + len(offsets))`` and the row ends there.
        """
        src = torch.tensor(offsets, device=self.device) + start
        dst = torch.arange(len(offsets), device=self.device) + start
        if not torch.equal(src, dst):
            for buffers in (self.cache.keys, self.cache.values):
                for layer in buffers:
                    layer[row].index_copy_(1, dst, layer[row].index_select(1, src))
        self.lengths[row] = start + len(offsets)

    def move(self, src: int, dst: int) -> None:
        """Copy row ``src`` (its cached tokens) into row ``dst``; ``src`` becomes free."""
        n = self.lengths[src]
        for buffers in (self.cache.keys, self.cache.values):
            for layer in buffers:
                layer[dst, :, :n] = layer[src, :, :n]
        self.lengths[dst], self.lengths[src] = n, 0

    def keep_paths(self, starts: Sequence[int], paths: torch.Tensor) -> None:
        """:meth:`keep` for rows ``0..b-1`` at once (one copy per layer, none per row).

        Args:
            starts: per row, its length before the step (host ints).
            paths: ``[b, w]`` int64 on the device: the step offsets row ``r`` keeps,
                ascending from 0 (the root), padded on the right by repeating its last
                offset. Row ``r``'s entries move to ``[starts[r], starts[r] + w)``; the
                padded copies land past the row's new length (never seen). The caller sets
                the rows' lengths (:meth:`crop` cannot grow a row: ``lengths[r]`` already
                holds the whole step).
        """
        b, w = paths.shape
        begin = torch.tensor(list(starts[:b]), device=self.device).view(b, 1)
        src = begin + paths
        dst = begin + torch.arange(w, device=self.device)
        rows = torch.arange(b, device=self.device).view(b, 1)
        for buffers in (self.cache.keys, self.cache.values):
            for layer in buffers:
                layer[rows, :, dst] = layer[rows, :, src]

    def _mask(self, starts: Sequence[int], step_mask: torch.Tensor) -> torch.Tensor:
        """Additive mask ``[b, 1, q, max_cache_len]``: row r sees its ``starts[r]`` cached
        positions and, among its new tokens at ``starts[r]..``, what ``step_mask`` allows.

        Built for all rows at once by one gather from a template over the offset ``d`` of
        a cache position from the row's start (visible for ``d < 0``, ``step_mask[:, d]``
        for ``0 <= d < q``, hidden beyond), kept per step mask: a few host operations
        whatever the batch, none per row."""
        q, length = step_mask.shape[0], self.max_cache_len
        key = (q, step_mask.numpy().tobytes())
        found = self._templates.get(key)
        if found is None:
            template = torch.full((q, 2 * length), self._min, dtype=self.dtype)
            template[:, :length] = 0
            template[:, length : length + q].masked_fill_(step_mask, 0)
            rows = torch.arange(q).view(q, 1) * (2 * length)
            found = (template.flatten(), rows + torch.arange(length) + length)
            self._templates[key] = found
        flat, index = found  # index [q, max_cache_len]: the offset-0 positions
        shift = torch.tensor(list(starts)).view(-1, 1, 1)
        return flat[index - shift].unsqueeze(1).to(self.device)

    def forward(
        self,
        rows: Sequence[Sequence[int]] | torch.Tensor,
        offsets: Sequence[int] | None = None,
        step_mask: torch.Tensor | None = None,
        counts: Sequence[int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append tokens to rows ``0..b-1`` and return their logits and last hidden states.

        Args:
            rows: per row, the tokens to append (``b = len(rows)``), or an int64 tensor
                ``[b, q]`` (on any device: tokens a previous step chose stay where they
                are). Rows may differ in length only with the default causal chain:
                shorter rows are padded at the end (padding is written past the row's
                length, never seen) and each row advances by its own count.
            offsets: position of each token relative to the row's length (default
                ``0..q-1``; a Medusa tree gives each node its depth).
            step_mask: ``[q, q]`` bool visibility among the new tokens (default causal).
            counts: with a tensor ``rows``, the real tokens of each row (the rest is
                padding); default ``q`` each.

        Returns:
            ``(logits [b, q, vocab], hidden [b, q, hidden])``. With a CUDA graph these are
            the graph's output buffers: use them before the next call.

        Raises:
            ValueError: ragged rows with offsets or a mask, or a step past ``max_cache_len``.
        """
        if isinstance(rows, torch.Tensor):
            (b, q), ids = rows.shape, rows
            counts = [q] * b if counts is None else list(counts)
        else:
            b, q = len(rows), max(len(t) for t in rows)
            counts = [len(t) for t in rows]
            ids = torch.tensor([[*t] + [0] * (q - len(t)) for t in rows])
        starts = self.lengths[:b]
        if (offsets is not None or step_mask is not None) and min(counts) != q:
            raise ValueError("rows of different lengths need the default causal chain")
        if max(starts) + q > self.max_cache_len:
            raise ValueError(
                f"{q} tokens at length {max(starts)} exceed the cache of "
                f"{self.max_cache_len} positions"
            )
        if step_mask is None:
            step_mask = torch.ones(q, q, dtype=torch.bool).tril_()
        offs = torch.tensor(range(q) if offsets is None else offsets)
        begin = torch.tensor(starts).view(b, 1)
        inputs = (
            ids,
            begin + offs,
            begin + torch.arange(q),
            self._mask(starts, step_mask),
        )
        graph = self._graphs.get((b, q))
        if graph is None:
            logits, hidden = self._eager(*(t.to(self.device) for t in inputs), first=0)
            self.aux = self._gather_aux()
        else:
            # The static buffers were made under inference mode (capture): writing them
            # outside it is refused ("Inplace update to inference tensor").
            with torch.inference_mode():
                for buffer, value in zip(
                    (graph.ids, graph.positions, graph.slots, graph.mask),
                    inputs,
                    strict=True,
                ):
                    buffer.copy_(value)
                if graph.extra is not None:
                    graph.extra.copy_(self._extra_input())
                graph.graph.replay()
            logits, hidden, self.aux = graph.logits, graph.hidden, graph.aux
        for r, n in enumerate(counts):
            self.lengths[r] += n
        return logits, hidden

    def _static_extra(self, b: int, q: int) -> torch.Tensor | None:
        """A further static input of a captured ``b x q`` step that :meth:`_eager` reads
        (None: none; the EAGLE-3 draft's hidden states)."""
        return None

    def _extra_input(self) -> torch.Tensor:
        """The value a replay copies into :attr:`CapturedGraph.extra`."""
        raise NotImplementedError

    def prefill(
        self, row: int, tokens: Sequence[int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run a prompt into ``row`` (replacing what it held), eagerly and alone.

        Returns:
            ``(logits [vocab], hidden [hidden])`` of the prompt's last token only (no LM
            head over the whole prompt).
        """
        q = len(tokens)
        if q > self.max_cache_len:
            raise ValueError(
                f"{q} prompt tokens exceed the cache of {self.max_cache_len}"
            )
        self.lengths[row] = 0
        ids = torch.tensor([list(tokens)], device=self.device)
        positions = torch.arange(q, device=self.device).view(1, q)
        mask = self._mask([0], torch.ones(q, q, dtype=torch.bool).tril_())
        logits, hidden = self._eager(
            ids, positions, positions, mask, first=row, last=True
        )
        self.aux = self._gather_aux()
        self.lengths[row] = q
        return logits[0, 0], hidden[0, 0]

    def _gather_aux(self) -> torch.Tensor | None:
        """The kept states of the last forward, concatenated (None without aux_layers)."""
        if not self._aux_layers:
            return None
        return torch.cat([self._aux_parts[i] for i in self._aux_layers], dim=-1)

    @torch.inference_mode()
    def _eager(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        mask: torch.Tensor,
        *,
        first: int,
        last: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One forward of ``ids [b, q]`` for slots ``first..first+b-1``."""
        cache = self.cache
        if self._cache_keyword is None:
            self._cache_keyword = cache_keyword(self.decoder)
        cache.first, cache.positions = first, slots
        cache.rows = torch.arange(ids.shape[0], device=self.device).view(-1, 1)
        hooks = self._hooks()
        try:
            out = self.decoder(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                **{self._cache_keyword: cache},
            )
        finally:
            for hook in hooks:
                hook.remove()
        hidden = out.last_hidden_state[:, -1:] if last else out.last_hidden_state
        return self.lm_head(hidden), hidden

    @torch.inference_mode()
    def capture(
        self,
        lengths: Sequence[int],
        warmup: int = 2,
        batches: Sequence[int] | None = None,
    ) -> None:
        """Capture one CUDA graph per (rows 1..slots, step length in ``lengths``); with
        ``batches``, for those row counts only (a measurement of a few batch sizes).

        Call before any sequence is cached: warm-up and capture write scratch entries at
        positions ``[0, q)`` of every row. Afterwards :meth:`forward` replays the graph for
        those shapes.

        Raises:
            RuntimeError: the device is not CUDA, or capture fails (the caller records why).
        """
        if self.device.type != "cuda":
            raise RuntimeError(f"CUDA graphs need a CUDA device, not {self.device}")
        for b in range(1, self.slots + 1) if batches is None else sorted(set(batches)):
            for q in sorted(set(lengths)):
                self._graphs[(b, q)] = self._capture_one(b, q, warmup)

    def _capture_one(self, b: int, q: int, warmup: int) -> CapturedGraph:
        ids = torch.zeros(b, q, dtype=torch.long, device=self.device)
        positions = torch.arange(q, device=self.device).expand(b, q).contiguous()
        slots = positions.clone()
        mask = self._mask([0] * b, torch.ones(q, q, dtype=torch.bool).tril_())
        extra = self._static_extra(b, q)
        stream = torch.cuda.Stream(device=self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                self._eager(ids, positions, slots, mask, first=0)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits, hidden = self._eager(ids, positions, slots, mask, first=0)
            aux = self._gather_aux()
        logger.debug("captured a CUDA graph for %d rows x %d tokens", b, q)
        return CapturedGraph(
            graph, ids, positions, slots, mask, logits, hidden, aux, extra
        )
