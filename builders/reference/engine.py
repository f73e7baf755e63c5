"""The PyTorch reference engine: greedy generation in baseline, draft_target or medusa mode.

An engine directory holds only ``build.json`` (written by ``trtbench build``); it points at
the Hugging Face target / draft dirs and the Medusa heads dir. :func:`load_engine` reads it
and returns a :class:`ReferenceEngine`, whose :meth:`~ReferenceEngine.generate` yields one
:class:`Step` per decode step — the tokens it emitted and the draft tokens it proposed and
accepted — which is what a Triton streaming response carries.

One engine serves one request at a time (batch 1): ``generate`` holds a lock from its first
step until the iterator is exhausted or closed, so concurrent callers queue.

Counting (TensorRT-LLM's ``total_draft_tokens`` / ``total_accepted_draft_tokens``,
research/loadtest.md §3): ``draft_proposed`` is K for a draft_target step and the number of
tree nodes for a Medusa step (0 for baseline and for the prefill step); ``draft_accepted``
counts the emitted tokens that came from the draft. A step emits ``accepted + 1`` tokens
unless it is cut at ``max_tokens`` or after the end token; then only the emitted draft tokens
count as accepted (``draft_accepted = min(accepted, len(token_ids))``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from trtbench.builders.manifest import CudaGraphs
from trtbench.builders.reference.decoding import BaselineDecoder, Greedy, Proposal
from trtbench.errors import ConfigError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Step:
    """One decode step as streamed to a client.

    Attributes:
        token_ids: tokens emitted by this step (1..K+1; the first step after prefill: 1).
        draft_proposed: draft tokens proposed this step (0 for baseline and the prefill).
        draft_accepted: of those, how many were emitted (<= draft_proposed).
    """

    token_ids: tuple[int, ...]
    draft_proposed: int
    draft_accepted: int


def _clip(
    proposal: Proposal, room: int, eos_id: int | None
) -> tuple[tuple[int, ...], bool]:
    """Cut a step's tokens at ``room`` tokens and after ``eos_id``; True when generation ends."""
    tokens = proposal.tokens[:room]
    if eos_id is not None and eos_id in tokens:
        tokens = tokens[: tokens.index(eos_id) + 1]
        return tokens, True
    return tokens, len(tokens) >= room


class ReferenceEngine:
    """A loaded reference engine (models on their device, caches allocated).

    Args:
        mode: ``baseline``, ``draft_target`` or ``medusa``.
        decoder: the decoding strategy over its model runners (``decoding.py``).
        tokenizer: the target's tokenizer (``PreTrainedTokenizerFast``).
        max_seq_len: prompt + generated tokens allowed per request.
        max_input_len: prompt tokens allowed per request.
        cuda_graphs: what was asked for and what this engine does (with the reason).

    Attributes:
        eos_token_id: the tokenizer's end token (None if it has none).
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
        self._lock = threading.Lock()

    @property
    def draft_len(self) -> int:
        """Draft tokens proposed per step: K, the tree's node count, or 0."""
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

    def generate(
        self,
        input_ids: Sequence[int],
        max_tokens: int,
        *,
        end_id: int | None = None,
        min_tokens: int = 0,
    ) -> Iterator[Step]:
        """Greedy generation, one :class:`Step` per decode step.

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
        self._check_request(input_ids, max_tokens, min_tokens)
        eos = self.eos_token_id if end_id is None else (None if end_id < 0 else end_id)
        if eos is not None and eos >= self.vocab_size:
            raise ConfigError(
                f"end_id {eos} is outside the vocabulary [0, {self.vocab_size}); use a "
                "token id of the engine's tokenizer, or -1 to never stop early"
            )
        greedy = Greedy(eos_id=eos, min_tokens=min_tokens)
        return self._run([int(t) for t in input_ids], max_tokens, greedy)

    def _run(
        self, prompt: list[int], max_tokens: int, greedy: Greedy
    ) -> Iterator[Step]:
        # Inference mode only around the model work: a suspended generator must not leave
        # the caller's code in it.
        with self._lock:
            with torch.inference_mode():
                proposal = self.decoder.start(prompt, greedy)
            emitted = 0
            while True:
                tokens, done = _clip(proposal, max_tokens - emitted, greedy.eos_id)
                emitted += len(tokens)
                accepted = min(proposal.accepted, len(tokens))
                yield Step(tokens, proposal.proposed, accepted)
                if done:
                    return
                with torch.inference_mode():
                    proposal = self.decoder.step(greedy)

    def generate_ids(
        self, input_ids: Sequence[int], max_tokens: int, **kw
    ) -> list[int]:
        """All generated tokens of :meth:`generate` as one list (tests, scripts)."""
        return [
            t
            for step in self.generate(input_ids, max_tokens, **kw)
            for t in step.token_ids
        ]


def load_engine(engine_dir: Path, device: str = "auto") -> ReferenceEngine:
    """Load the engine described by ``engine_dir/build.json`` (a reference build).

    Args:
        engine_dir: ``RUN_DIR/engines/<variant>``.
        device: ``auto`` (CUDA if available, else CPU), ``cpu``, ``cuda`` or ``cuda:N``.

    Raises:
        BuildError: no or invalid build.json, a trtllm build, or model files that changed.
        NotAvailableError: ``device`` asks for CUDA on a machine without it.
    """
    from trtbench.builders.manifest import read_manifest
    from trtbench.builders.reference.loading import engine_from_manifest

    return engine_from_manifest(read_manifest(Path(engine_dir)), device)
