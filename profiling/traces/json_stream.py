"""One array member of a JSON file's top-level object, read in chunks of raw text (bounded memory).

A PyTorch profiler trace is one JSON object whose ``traceEvents`` array holds every event (a
few hundred bytes each; gigabytes per rank for a few hundred decode steps at batch).
:class:`ArrayMemberStream` reads the file (plain or gzip, decompressed in a thread: ``zlib``
releases the GIL) block by block and hands out the array's elements as chunks, each the text of
a JSON array (``[e1, e2, ...]``) of consecutive elements, about ``block_bytes`` long, for a fast
whole-text decoder (``msgspec``) to parse; the other top-level members are parsed with the
standard library (:data:`members`, numbers with a fraction as :class:`decimal.Decimal`, as
``json.load(parse_float=Decimal)`` gives them).

Where a chunk ends: at the last ``}`` followed by ``,`` and ``{`` (white space between) in the
block, a guess that holds for any trace whose events are objects, unless that text lies inside a
string or a nested object. A guess is never trusted on its own: the consumer decodes the chunk,
and a decoder that accepts ``[`` + text + ``]`` as complete JSON proves the cut (the text parses
to the same tokens in the file, and it ends with ``}``, which no token continues); one that
refuses it calls :meth:`ArrayMemberStream.reject`, and the same text is cut again by an exact scan
(:func:`exact_cut`: quotes not escaped, then the depth of brackets outside strings), whose
chunks are marked :attr:`Chunk.exact` (a decoder refusing one of those means the JSON itself is
bad or beyond that decoder: the consumer falls back to the standard library).

UTF-8 is checked as the blocks arrive (ASCII blocks at C speed), as reading the file as text
would. Errors (not JSON, truncated, unreadable, not UTF-8) raise :class:`JsonStreamError`.
"""

from __future__ import annotations

import codecs
import gzip
import json
import queue
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

BLOCK_BYTES = 8 << 20  # decompressed bytes read at once, about one chunk
GZIP_MAGIC = b"\x1f\x8b"
_WS = b" \t\n\r"
_DECODER = json.JSONDecoder(parse_float=Decimal)
_MARKS = np.zeros(256, dtype=bool)  # { } [ ] ,
_MARKS[[0x7B, 0x7D, 0x5B, 0x5D, 0x2C]] = True
_GUESSES = 64  # candidate "}" tried per block before the exact scan


class JsonStreamError(ValueError):
    """The file is not JSON, is truncated, cannot be read, or is not UTF-8."""


@dataclass(frozen=True)
class Chunk:
    """The text of a JSON array of consecutive elements; ``exact``: cut by the exact scan."""

    text: bytes | bytearray
    exact: bool


class _Blocks:
    """The file's (decompressed) bytes in blocks, read by a thread; UTF-8 checked."""

    def __init__(self, path: Path, block_bytes: int) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=2)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._read, args=(path, block_bytes), daemon=True
        )
        self._thread.start()

    def _read(self, path: Path, block_bytes: int) -> None:
        utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        try:
            with path.open("rb") as raw:
                gz = raw.read(2) == GZIP_MAGIC
            with (gzip.open if gz else open)(path, "rb") as fh:
                while not self._stop.is_set():
                    block = fh.read(block_bytes)
                    if not block:
                        utf8.decode(b"", final=True)
                        self._put(None)
                        return
                    if utf8.getstate()[0] or not block.isascii():
                        utf8.decode(block)
                    self._put(block)
        except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
            self._put(JsonStreamError(str(exc)))

    def _put(self, item: object) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def next(self) -> bytes | None:
        """The next block; None at the end of the file."""
        item = self._queue.get()
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        """Stop the thread (what it still reads is dropped)."""
        self._stop.set()
        self._thread.join()


def _escaped(a: np.ndarray) -> np.ndarray:
    """Positions of the characters escaped by a backslash (an odd run of them before)."""
    slashes = np.flatnonzero(a == 0x5C)
    if not len(slashes):
        return slashes
    opens = np.r_[True, np.diff(slashes) != 1]
    first = slashes[opens]
    runs = np.diff(np.r_[np.flatnonzero(opens), len(slashes)])
    return (first + runs)[runs % 2 == 1]


def exact_cut(data: bytes | memoryview) -> tuple[str, int] | None:
    """Where ``data`` (the inside of a JSON array, from an element's start or a separator,
    outside any string) can be cut: ``("end", i)``, the ``]`` that closes the array, when it
    is in ``data``; else ``("split", i)``, the last ``,`` between two of its elements; None
    when ``data`` holds neither (an element runs past its end).

    Strings are found by their quotes (a quote after an odd run of backslashes is part of the
    string); brackets and commas inside strings do not count.
    """
    a = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(a == 0x22)
    escaped = _escaped(a)
    if len(escaped):
        quotes = quotes[~np.isin(quotes, escaped)]
    marks = np.flatnonzero(_MARKS[a])
    marks = marks[(np.searchsorted(quotes, marks) & 1) == 0]  # outside strings
    ch = a[marks]
    opens = (ch == 0x7B) | (ch == 0x5B)
    closes = (ch == 0x7D) | (ch == 0x5D)
    depth = 1 + np.cumsum(opens.astype(np.int64) - closes)
    ends = np.flatnonzero(depth <= 0)
    if len(ends):
        return "end", int(marks[ends[0]])
    commas = np.flatnonzero((ch == 0x2C) & (depth == 1))
    return ("split", int(marks[commas[-1]])) if len(commas) else None


class ArrayMemberStream:
    """The elements of the top-level member ``key`` of a JSON file, in chunks (see the
    module docstring); iterate once.

    Attributes:
        members: the other top-level members (complete once iteration ends; a member seen
            twice keeps its last value, as ``json.load`` does).
        found: ``key`` held an array (its elements were the chunks).

    Raises (while iterating):
        JsonStreamError: not JSON, truncated, unreadable, not UTF-8, the top level is not an
            object, or ``key`` occurs twice.
    """

    def __init__(self, path: Path, key: str, block_bytes: int = BLOCK_BYTES) -> None:
        self.path, self.key, self.block_bytes = Path(path), key, block_bytes
        self.members: dict[str, Any] = {}
        self.found = False
        self._buf, self._eof, self._rejected = bytearray(), False, False
        self._blocks: _Blocks | None = None

    def reject(self) -> None:
        """The chunk just handed out is not trusted: cut its text again, exactly."""
        self._rejected = True

    def __iter__(self) -> Iterator[Chunk]:
        self._blocks = _Blocks(self.path, self.block_bytes)
        try:
            at = self._skip(0)
            self._expect(at, b"{")
            at = self._members(self._skip(at + 1), first=True)
            if at is not None:  # inside the array
                at = yield from self._chunks(at)
                at = self._members(self._skip(at + 1), first=False)
                if at is not None:
                    raise JsonStreamError(f"the member {self.key!r} occurs twice")
        finally:
            self._blocks.close()

    # -- the buffer ------------------------------------------------------------------------

    def _fill(self, end: int) -> bool:
        """Read until the buffer holds ``end`` bytes or the file ends; whether it does."""
        while len(self._buf) < end and not self._eof:
            block = self._blocks.next()
            if block is None:
                self._eof = True
            else:
                self._buf += block
        return len(self._buf) >= end

    def _drop(self, at: int) -> int:
        """Forget the bytes before ``at``; returns ``at``'s new offset (0)."""
        del self._buf[:at]
        return 0

    def _skip(self, at: int) -> int:
        """The offset of the first byte at or after ``at`` that is not white space."""
        while True:
            if not self._fill(at + 1):
                return at
            if self._buf[at] not in _WS:
                return at
            at += 1

    def _expect(self, at: int, chars: bytes) -> bytes:
        if not self._fill(at + 1):
            raise JsonStreamError(f"the text ends where one of {chars!r} should follow")
        got = bytes(self._buf[at : at + 1])
        if got not in [chars[i : i + 1] for i in range(len(chars))]:
            raise JsonStreamError(
                f"expected one of {chars!r} at byte {at}, got {got!r}"
            )
        return got

    def _value(self, at: int) -> tuple[Any, int]:
        """Parse the JSON value at ``at`` with the standard library; returns it and the
        offset after it."""
        size = 1 << 16
        while True:
            complete = not self._fill(at + size)
            window = self._buf[at : at + size]
            try:
                text = codecs.utf_8_decode(window, "strict", complete)[0]
            except UnicodeDecodeError as exc:
                raise JsonStreamError(str(exc)) from None
            try:
                value, end = _DECODER.raw_decode(text)
                if (
                    end < len(text) or complete
                ):  # a number cut short would end the window
                    return value, at + len(text[:end].encode("utf-8"))
            except json.JSONDecodeError as exc:
                if complete:
                    raise JsonStreamError(str(exc)) from None
            size *= 4

    # -- the object and the array ---------------------------------------------------------

    def _members(self, at: int, *, first: bool) -> int | None:
        """Parse top-level members from ``at`` (after ``{``, or after the array); stop at the
        array of ``key`` (returns the offset of its first element) or after the closing
        ``}`` (returns None: only white space may follow)."""
        if not first:
            if self._expect(at, b",}") == b"}":
                return self._close(at)
            at = self._skip(at + 1)
        elif self._expect(at, b'"}') == b"}":
            return self._close(at)
        while True:
            at = self._drop(at)
            name, at = self._value(at)
            if not isinstance(name, str):
                raise JsonStreamError(f"a member name is {name!r}, not a string")
            at = self._skip(at)
            self._expect(at, b":")
            at = self._skip(at + 1)
            if name == self.key and self._fill(at + 1) and self._buf[at] == 0x5B:
                if self.found:
                    raise JsonStreamError(f"the member {self.key!r} occurs twice")
                self.found = True
                self.members.pop(name, None)
                return self._skip(at + 1)
            self.members[name], at = self._value(at)
            if name == self.key:
                self.found = False
            at = self._skip(at)
            if self._expect(at, b",}") == b"}":
                return self._close(at)
            at = self._skip(at + 1)

    def _close(self, at: int) -> None:
        at = self._skip(at + 1)
        if self._fill(at + 1):
            raise JsonStreamError(f"extra data after the top-level object at byte {at}")
        return None

    def _chunks(self, at: int) -> Iterator[Chunk]:
        """Hand out the array's elements from ``at``, a chunk from about the first
        ``block_bytes`` of the buffer at a time (more when one element is longer); returns
        the offset of the array's ``]``."""
        if self._fill(at + 1) and self._buf[at] == 0x5D:
            return at
        exact, limit = False, self.block_bytes
        while True:
            at = self._drop(at)
            self._fill(limit + 1)
            cut = None if exact else self._guess(limit)
            if cut is None:
                found = exact_cut(memoryview(self._buf)[:limit])
                if found is None:
                    if self._eof and len(self._buf) <= limit:
                        raise JsonStreamError("the file ends inside the array")
                    limit *= 2  # an element longer than the limit
                    continue
                kind, cut = found
                if kind == "end":
                    if self._buf[:cut].strip(_WS):
                        yield Chunk(self._text(cut), True)
                    return cut
                yield Chunk(self._text(cut), True)
                at, exact, limit = cut + 1, False, self.block_bytes
                continue
            end, after = cut
            self._rejected = False
            yield Chunk(self._text(end + 1), False)
            exact = self._rejected
            at, limit = (0, limit) if exact else (after, self.block_bytes)

    def _text(self, n: int) -> bytearray:
        """``[`` + the buffer's first ``n`` bytes + ``]`` (one copy)."""
        text = bytearray(n + 2)
        text[0], text[-1] = 0x5B, 0x5D
        text[1:-1] = memoryview(self._buf)[:n]
        return text

    def _guess(self, limit: int) -> tuple[int, int] | None:
        """The last ``}`` before ``limit`` followed by ``,`` and ``{``: (its offset, the
        ``{``'s offset); None when none is found among the last candidates."""
        buf = self._buf
        end = min(limit, len(buf))
        for _ in range(_GUESSES):
            end = buf.rfind(b"}", 0, end)
            if end < 0:
                return None
            at = end + 1
            while at < len(buf) and buf[at] in _WS:
                at += 1
            if at < len(buf) and buf[at] == 0x2C:
                at += 1
                while at < len(buf) and buf[at] in _WS:
                    at += 1
                if at < len(buf) and buf[at] == 0x7B:
                    return end, at
        return None
