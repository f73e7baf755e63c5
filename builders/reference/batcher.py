"""In-flight (continuous) batching for the reference engine.

TensorRT-LLM serves with ``batching_strategy: inflight_fused_batching``: new requests join
the running batch between decode steps and finished ones leave it, instead of waiting for the
whole batch to drain. :class:`InflightBatcher` does the same over a batched decoder
(``decoding.py``): one loop iteration

1. retires rows whose request was cancelled, then admits waiting requests, first come
   first served, while the decoder has free slots (``max_batch_size``); each admitted
   prompt is prefilled ALONE (one forward per new request: prompts of different lengths
   are not padded into one forward; the range ``prefill`` in a profile) and its first
   token is delivered at once;
2. reserves the KV blocks of the step (``kv_blocks.py``: running rows first, then admission,
   FIFO; a preempted request re-queues at the front and is recomputed from its prompt +
   delivered output, nothing re-sent; a row short of verification blocks drafts nothing),
   then runs ONE batched decode step over every active row (range ``decode_step#{i}``);
3. delivers each row's :class:`Step` (cut at ``max_tokens`` and after the end token) and
   retires rows that finished or were cancelled, freeing their slots for the next iteration.

Deliveries go to a per-request callback ``deliver(step, final, error)`` (called on the loop
thread) or, by default, to the :class:`RequestHandle`'s queue, which iterates the steps. The
loop runs on its own thread once :meth:`InflightBatcher.start` is called, or in the caller's
thread with :meth:`InflightBatcher.run_until_idle` (profiling: torch's profiler records the
thread that enabled it only).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from trtbench.builders.reference.decoding import BaselineDecoder, Greedy, Proposal
from trtbench.builders.reference.kv_blocks import KvBlockPool, SeqNeed
from trtbench.builders.reference.tracing import step_range

logger = logging.getLogger(__name__)

# deliver(step, final, error): step is None on the closing call of a request that ended
# without a last step (cancelled, closed) and with an error.
Deliver = Callable[[object, bool, BaseException | None], None]


@dataclass(frozen=True)
class Step:
    """One decode step of one request, as streamed to a client.

    Attributes:
        token_ids: tokens emitted by this step (1..K+1; the prefill step: 1), cut at
            ``max_tokens`` and after the end token; throughput and OSL count these.
        draft_proposed: draft tokens proposed this step (0 for baseline and the prefill).
        draft_accepted: of those, how many verification accepted (<= draft_proposed), as
            the engine counts them: NOT reduced when the step is cut, so
            ``len(token_ids)`` may be below ``draft_accepted + 1`` on the last step
            (vLLM counts accepted drafts the same way; acceptance figures use this).
    """

    token_ids: tuple[int, ...]
    draft_proposed: int
    draft_accepted: int


def clip_step(proposal: Proposal, room: int, eos_id: int | None) -> tuple[Step, bool]:
    """Cut a proposal at ``room`` tokens and after ``eos_id``; True when generation ends.

    The tokens are cut; the draft counts are not (``draft_accepted`` stays what verification
    accepted, see :class:`Step`).
    """
    tokens = proposal.tokens[:room]
    done = len(tokens) >= room
    if eos_id is not None and eos_id in tokens:
        tokens, done = tokens[: tokens.index(eos_id) + 1], True
    return Step(tokens, proposal.proposed, proposal.accepted), done


@dataclass(eq=False)  # hashed by identity: the KV pool's key
class _Request:
    input_ids: list[int]
    max_tokens: int
    greedy: Greedy
    deliver: Deliver
    emitted: int = 0
    cancelled: bool = False
    admitted_ns: int = 0
    order: int = 0  # admission sequence number (higher: younger)
    generated: list[int] = field(default_factory=list)  # delivered before a preemption
    finished: threading.Event = field(default_factory=threading.Event)


class RequestHandle:
    """A submitted request. Iterate it for its steps (default delivery) or cancel it.

    Attributes:
        admitted_ns: ``time.time_ns()`` when the request got a slot (0 while waiting).
    """

    def __init__(
        self,
        request: _Request,
        steps: queue.Queue | None,
        cancel_hook: Callable[[], None] = lambda: None,
    ) -> None:
        self._request = request
        self._steps = steps
        self._cancel_hook = cancel_hook

    @property
    def admitted_ns(self) -> int:
        return self._request.admitted_ns

    @property
    def done(self) -> bool:
        """Whether the request has ended (its final delivery was made)."""
        return self._request.finished.is_set()

    def cancel(self) -> None:
        """Stop generating for this request; its slot is freed after the current step."""
        self._request.cancelled = True
        self._cancel_hook()

    def __iter__(self) -> Iterator[Step]:
        """The request's steps, in order, until the last one.

        Raises:
            RuntimeError: the handle was submitted with a ``deliver`` callback.
            Exception: whatever failed in the decode loop for this request.
        """
        if self._steps is None:
            raise RuntimeError("this request delivers to its callback; it has no queue")
        while True:
            step, final, error = self._steps.get()
            if error is not None:
                raise error
            if step is not None:
                yield step
            if final:
                return


class InflightBatcher:
    """The in-flight batching loop over one batched decoder (see the module docstring).

    Args:
        decoder: a batched decoder; its ``slots`` are the batch size.
        kv: the engine's KV block pool (None: one as large as the slot cache, never short).

    Attributes (counters for metrics): ``steps_run``; ``scheduled`` / ``context``: rows in
    the latest step / requests prefilled in the latest iteration; ``draft_proposed`` /
    ``draft_accepted``: totals over decode steps.
    """

    def __init__(self, decoder: BaselineDecoder, kv: KvBlockPool | None = None) -> None:
        self.decoder = decoder
        self.max_batch_size = decoder.slots
        self.kv = kv or KvBlockPool(decoder.slots * decoder.target.max_cache_len, 1)
        self._widest = decoder.verify_tokens(1)  # the widest step (kv admission)
        self.steps_run = self.scheduled = self.context = self._admitted = 0
        self.draft_proposed = self.draft_accepted = 0
        self._cond = threading.Condition()
        self._waiting: deque[_Request] = deque()
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def running(self) -> bool:
        """Whether the loop thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def submit(
        self,
        input_ids: Sequence[int],
        max_tokens: int,
        greedy: Greedy,
        deliver: Deliver | None = None,
    ) -> RequestHandle:
        """Queue a request (checked by the caller); FIFO behind those already waiting.

        Args:
            input_ids: prompt token ids.
            max_tokens: tokens to generate at most.
            greedy: end token and min_tokens rule.
            deliver: ``deliver(step, final, error)`` called on the loop thread for each
                step (``final`` on the last) and once with ``step=None, final=True`` if the
                request ends otherwise (``error`` set on failure). None: iterate the handle.

        Raises:
            RuntimeError: the batcher was closed.
        """
        steps: queue.Queue | None = None
        if deliver is None:
            steps = queue.Queue()
            deliver = lambda *item: steps.put(item)  # noqa: E731
        request = _Request([int(t) for t in input_ids], max_tokens, greedy, deliver)
        handle = RequestHandle(request, steps, cancel_hook=self._wake)
        with self._cond:
            if self._closed:
                raise RuntimeError("the batcher is closed; load the engine again")
            self._waiting.append(request)
            self._cond.notify()
        return handle

    def queue_counts(self) -> tuple[int, int]:
        """(requests waiting, of which preempted ones), for metrics."""
        with self._cond:
            return len(self._waiting), sum(bool(r.generated) for r in self._waiting)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def start(self) -> None:
        """Run the loop on a daemon thread (idempotent)."""
        with self._cond:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._loop, name="trtbench-inflight-batcher", daemon=True
                )
                self._thread.start()

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the loop; requests still waiting or running end with an error."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
        closed = RuntimeError("the reference engine was closed during the request")
        with self._cond:
            pending = list(self._waiting)
            self._waiting.clear()
        for row in list(self.decoder.rows):
            pending.append(row.tag)
        self.decoder.clear()
        for request in pending:
            self._finish(request, None, closed)

    def run_until_idle(self) -> None:
        """Run iterations in the calling thread until nothing is waiting or active.

        Raises:
            RuntimeError: the loop thread is running.
        """
        if self.running:
            raise RuntimeError("the batcher loop runs on its thread; close it first")
        while self.iterate():
            pass

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._closed or self._waiting or self.decoder.rows):
                    self._cond.wait()
                if self._closed:
                    return
            try:
                self.iterate()
            except Exception:  # noqa: BLE001 - iterate delivers errors; never die silently
                logger.exception("in-flight batcher iteration failed")

    def iterate(self) -> bool:
        """One loop iteration (admit, one batched decode step, deliver, retire).

        Returns:
            True while requests remain waiting or active.
        """
        self._drop_cancelled()
        self._sync_kv()
        allow = self._reserve(list(self.decoder.rows))  # running rows come first
        self.context = self._admit()
        rows = self.decoder.rows
        allow.update(self._reserve([r for r in rows if r.tag not in allow]))
        self.kv.account_step()
        self.scheduled = len(rows)
        if rows:
            try:
                with step_range(f"decode_step#{self.steps_run}"):
                    proposals = self.decoder.step([allow[r.tag] for r in rows])
            except Exception as exc:  # noqa: BLE001 - every request in the step hears it
                logger.exception("decode step failed for %d requests", len(rows))
                failed = [row.tag for row in rows]
                self.decoder.clear()
                for request in failed:
                    self._finish(request, None, exc)
            else:
                self.steps_run += 1
                self.draft_proposed += sum(p.proposed for p in proposals)
                self.draft_accepted += sum(p.accepted for p in proposals)
                ended = [
                    i
                    for i, (row, proposal) in enumerate(
                        zip(rows, proposals, strict=True)
                    )
                    if not self._deliver(row.tag, proposal)
                ]
                for index in reversed(ended):  # highest first: lower indices stay valid
                    self.decoder.retire(index)
        self._sync_kv()
        with self._cond:
            return bool(self._waiting or self.decoder.rows)

    def _drop_cancelled(self) -> None:
        """Retire rows whose request was cancelled, so their slots serve waiting ones."""
        for index in reversed(range(len(self.decoder.rows))):
            request = self.decoder.rows[index].tag
            if request.cancelled:
                self._finish(request, None, None)
                self.decoder.retire(index)

    def _sync_kv(self) -> None:
        """Free the KV blocks of retired rows; trim the others to their cached tokens."""
        self.kv.sync({r.tag: len(r.seq) - 1 for r in self.decoder.rows})

    def _reserve(self, rows: list) -> dict[_Request, bool]:
        """Reserve the step's KV blocks of ``rows`` (the running ones before admission,
        then the admitted ones): preempt the youngest rows if a plain step does not fit,
        then per request whether its verification fits (``kv_blocks.py``)."""
        needs = [SeqNeed(r.tag, len(r.seq) - 1, r.tag.order) for r in rows]
        victims = self.kv.reserve_plain(needs)
        for request in victims:  # youngest first
            index = next(i for i, r in enumerate(self.decoder.rows) if r.tag is request)
            request.generated = self.decoder.rows[index].seq[len(request.input_ids) :]
            self.decoder.retire(index)
            with self._cond:
                self._waiting.appendleft(request)  # the oldest victim ends up first
        needs = [n for n in needs if n.key not in victims]
        q = self.decoder.verify_tokens(len(self.decoder.rows))
        ok = self.kv.reserve_speculative(needs, q)
        return {n.key: a for n, a in zip(needs, ok, strict=True)}

    def _admit(self) -> int:
        """Admit waiting requests FIFO while a slot and their KV blocks are free."""
        admitted = 0
        while len(self.decoder.rows) < self.max_batch_size:
            with self._cond:
                if not self._waiting:
                    return admitted
                request = self._waiting[0]
                context = len(request.input_ids) + len(request.generated)
                left = request.max_tokens - request.emitted
                tokens = self.kv.admission_tokens(context, left, self._widest)
                if not request.cancelled and not self.kv.can_admit(tokens, request):
                    return admitted
                self._waiting.popleft()
            if request.cancelled:
                self._finish(request, None, None)
                continue
            request.admitted_ns = request.admitted_ns or time.time_ns()
            self._admitted += 1
            request.order, admitted = self._admitted, admitted + 1
            try:
                with step_range("prefill"):
                    proposal = self.decoder.admit(
                        request, request.input_ids, request.greedy, request.generated
                    )
            except Exception as exc:  # noqa: BLE001 - delivered to the request
                logger.exception("prefill failed")
                self._finish(request, None, exc)
                continue
            self.kv.admit(request, tokens)
            if not self._deliver(request, proposal):
                self.decoder.retire(len(self.decoder.rows) - 1)
        return admitted

    def _deliver(self, request: _Request, proposal: Proposal) -> bool:
        """Deliver one step; False when the request is over (its row should retire)."""
        if request.cancelled:
            self._finish(request, None, None)
            return False
        step, done = clip_step(
            proposal, request.max_tokens - request.emitted, request.greedy.eos_id
        )
        request.emitted += len(step.token_ids)
        if done:
            self._finish(request, step, None)
            return False
        try:
            request.deliver(step, False, None)
        except Exception:  # noqa: BLE001 - a broken consumer ends its own request only
            logger.exception("delivering a step failed; cancelling the request")
            request.cancelled = True
            self._finish(request, None, None)
            return False
        return True

    @staticmethod
    def _finish(
        request: _Request, step: Step | None, error: BaseException | None
    ) -> None:
        """The request's final delivery (exactly once)."""
        if request.finished.is_set():
            return
        request.finished.set()
        try:
            request.deliver(step, True, error)
        except Exception:  # noqa: BLE001 - nothing more to tell this consumer
            logger.exception("final delivery failed")
