"""Byte sizes as people read them: one unit family everywhere, binary (1 MiB = 2**20 bytes).

Every size a user sees (``plan``, ``build``, ``inspect``, ``report.md``, the memory plot) goes
through :func:`format_bytes`: GiB from 1 GiB up, MiB from 1 MiB up (and for zero), KiB for
the tiny sizes between (so a few hundred bytes never read as ``0.0 MiB``). Decimal units
(MB, GB) are not used for sizes. Rates from datasheets (TB/s, TFLOP/s) and parameter counts
are not sizes and stay as they are.
"""

from __future__ import annotations

import math

KIB = 1024
MIB = 1024**2
GIB = 1024**3
UNITS = {"KiB": KIB, "MiB": MIB, "GiB": GIB}
DIGITS = {"KiB": 1, "MiB": 1, "GiB": 2}  # decimals per unit unless the caller says


def byte_unit(n: float, *, smallest: str = "KiB") -> str:
    """The unit :func:`format_bytes` picks for ``n`` bytes (by magnitude): ``GiB`` from
    1 GiB, ``MiB`` from 1 MiB and for zero, else ``KiB``; never below ``smallest``.

    Use it to pick one unit for many values (an axis, a column), e.g. from their maximum.
    """
    if smallest not in UNITS:
        raise ValueError(f"unknown unit {smallest!r}; expected one of {sorted(UNITS)}")
    x = abs(n)
    if x >= GIB:
        unit = "GiB"
    elif x >= MIB or x == 0:
        unit = "MiB"
    else:
        unit = "KiB"
    return unit if UNITS[unit] >= UNITS[smallest] else smallest


def format_bytes(
    n: float | None,
    *,
    signed: bool = False,
    digits: int | None = None,
    unit: str | None = None,
) -> str:
    """``n`` bytes as text in binary units, e.g. ``1.5 KiB``, ``5.0 MiB``, ``3.50 GiB``.

    ``-`` when ``n`` is None or NaN. The unit is :func:`byte_unit`'s choice unless ``unit``
    (``KiB``, ``MiB`` or ``GiB``) fixes it; ``digits`` decimals, by default 2 for GiB and 1
    for MiB and KiB. ``signed`` puts ``+`` before values >= 0 (for differences).
    """
    if n is None or math.isnan(n):
        return "-"
    x = float(n) or 0.0  # -0.0 -> 0.0
    chosen = byte_unit(x) if unit is None else unit
    if chosen not in UNITS:
        raise ValueError(f"unknown unit {chosen!r}; expected one of {sorted(UNITS)}")
    places = DIGITS[chosen] if digits is None else digits
    sign = "+" if signed and x >= 0 else ""
    return f"{sign}{x / UNITS[chosen]:.{places}f} {chosen}"
