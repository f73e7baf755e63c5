"""One request's response records held as columns, made into records only when read.

A request of N streamed responses has N :class:`~trtbench.core.records.ResponseRecord` rows
that differ only in position, receive time, tokens, final flag and speculative counts.
Making each a frozen dataclass costs about 2 µs on the load generator's event loop, where that
time delays the receive stamps of the requests still in flight, and the CSV sink takes the
fields straight back out of it. :class:`ResponseRows` keeps the columns; it is a sequence of
``ResponseRecord`` (each made when indexed or iterated: equal to one built directly), and
:meth:`ResponseRows.cells` gives the CSV rows without making any
(:class:`~trtbench.profiling.loadtest.records.record_sink.CsvRecordSink`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import Any, overload

from trtbench.core.records import ResponseRecord


class ResponseRows(Sequence[ResponseRecord]):
    """The response records of one request (``variant``, ``tier``, ``request_id`` shared;
    ``index`` 0, 1, …), as columns of equal length.

    Args:
        variant, tier, request_id: as in every record.
        received_ns: each response's receive time (``perf_counter_ns``).
        tokens: output tokens each carried.
        finals: the ``triton_final_response`` flags.
        drafts, accepted: speculative counts (None: not reported).

    Raises:
        ValueError: the columns differ in length.
    """

    __slots__ = ("_head", "_columns")

    def __init__(
        self,
        variant: str,
        tier: str,
        request_id: str,
        received_ns: Sequence[int],
        tokens: Sequence[int],
        finals: Sequence[bool],
        drafts: Sequence[int | None],
        accepted: Sequence[int | None],
    ) -> None:
        columns = (received_ns, tokens, finals, drafts, accepted)
        if len({len(c) for c in columns}) > 1:
            raise ValueError(f"columns of unequal length: {[len(c) for c in columns]}")
        self._head = (variant, tier, request_id)
        self._columns = columns

    def __len__(self) -> int:
        return len(self._columns[0])

    @overload
    def __getitem__(self, i: int) -> ResponseRecord: ...

    @overload
    def __getitem__(self, i: slice) -> list[ResponseRecord]: ...

    def __getitem__(self, i: int | slice) -> ResponseRecord | list[ResponseRecord]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        i %= n
        return ResponseRecord(*self._head, i, *(c[i] for c in self._columns))

    def __iter__(self) -> Iterator[ResponseRecord]:
        head = self._head
        for i, row in enumerate(zip(*self._columns, strict=True)):
            yield ResponseRecord(*head, i, *row)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(
            a == b for a, b in zip(self, other, strict=True)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable columns, as a list's

    def __repr__(self) -> str:
        return f"ResponseRows({list(self)!r})"

    def cells(self) -> Iterator[tuple[Any, ...]]:
        """One CSV row per record, in ``ResponseRecord``'s field order, None as ``""``
        (what the sink writes for a record, without making it)."""
        received, tokens, finals, drafts, accepted = self._columns
        drafts = ["" if d is None else d for d in drafts]
        accepted = ["" if a is None else a for a in accepted]
        n = len(received)
        variant, tier, request_id = self._head
        return zip(
            repeat(variant, n),
            repeat(tier, n),
            repeat(request_id, n),
            range(n),
            received,
            tokens,
            finals,
            drafts,
            accepted,
            strict=True,
        )
