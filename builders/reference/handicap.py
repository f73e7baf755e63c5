"""A known slowdown of the reference engine: the variant field ``handicap``.

:class:`HandicappedBatcher` sleeps, after each iteration of the in-flight batching loop
(admit, one decode step, deliver), ``handicap`` × that iteration's own duration: a handicap
of 0.1 makes every step 10 % longer (about 9 % fewer tokens/s) while the tokens stay the
same. It exists to check a comparison's power: a check meant to catch a 10 % loss must fail
against a variant with ``handicap: 0.1`` (``docs/aa_check.md``).
"""

from __future__ import annotations

import time

from trtbench.builders.reference.batcher import InflightBatcher
from trtbench.builders.reference.decoding import BaselineDecoder
from trtbench.builders.reference.kv_blocks import KvBlockPool


class HandicappedBatcher(InflightBatcher):
    """An :class:`InflightBatcher` whose every iteration takes ``1 + handicap`` times as
    long (``handicap`` ≥ 0)."""

    def __init__(
        self, decoder: BaselineDecoder, kv: KvBlockPool | None, handicap: float
    ) -> None:
        super().__init__(decoder, kv)
        self.handicap = max(0.0, float(handicap))

    def iterate(self) -> bool:
        """One loop iteration, then a sleep of ``handicap`` × its duration."""
        start = time.perf_counter()
        more = super().iterate()
        time.sleep(self.handicap * (time.perf_counter() - start))
        return more
