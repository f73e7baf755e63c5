"""Exact incremental detokenization for streamed responses (copied next to each model.py).

Pure Python: needs only a tokenizer with ``decode(ids, skip_special_tokens=...,
clean_up_tokenization_spaces=...)`` (Hugging Face ``PreTrainedTokenizerFast``).
"""

from __future__ import annotations

import os

REPLACEMENT_CHAR = "\ufffd"


class IncrementalDecoder:
    """Detokenize a growing id sequence piece by piece, exactly.

    Each :meth:`push` decodes all ids so far and returns the text not returned before,
    except trailing U+FFFD: those mean the last ids hold part of a multi-byte character,
    which is held back until it completes. So the pieces plus :meth:`flush` concatenate to
    ``tokenizer.decode(all_ids)`` (as long as decoding more ids never rewrites earlier text,
    true for byte-level BPE with ``clean_up_tokenization_spaces=False``; if it does, the
    tail after the common prefix is sent).
    """

    def __init__(self, tokenizer, skip_special_tokens: bool = True) -> None:
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._sent = ""

    def _decode(self) -> str:
        return self._tokenizer.decode(
            self._ids,
            skip_special_tokens=self._skip,
            clean_up_tokenization_spaces=False,
        )

    def push(self, ids) -> str:
        """Add ``ids``; return the newly completed text ('' while only a partial character
        is new)."""
        self._ids.extend(int(i) for i in ids)
        return self._take(self._decode().rstrip(REPLACEMENT_CHAR))

    def flush(self) -> str:
        """Return all text not yet returned, a dangling partial character included."""
        return self._take(self._decode())

    def _take(self, text: str) -> str:
        piece = text[len(os.path.commonprefix([text, self._sent])) :]
        self._sent = text
        return piece
