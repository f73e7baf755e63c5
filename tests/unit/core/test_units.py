"""``format_bytes`` / ``byte_unit``: every expected string worked by hand from
1 KiB = 2**10, 1 MiB = 2**20, 1 GiB = 2**30 bytes (never from the function's own output)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trtbench.core.units import GIB, KIB, MIB, byte_unit, format_bytes


def test_the_constants_are_binary():
    assert (KIB, MIB, GIB) == (1024, 1_048_576, 1_073_741_824)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (1536, "1.5 KiB"),  # 1536 / 1024 = 1.5
        (5 * 2**20, "5.0 MiB"),
        (3 * 2**30 + 2**29, "3.50 GiB"),  # 3 GiB + 0.5 GiB
        (0, "0.0 MiB"),  # zero is not "tiny": no KiB for it
        (-0.0, "0.0 MiB"),
        (2**20, "1.0 MiB"),  # the MiB threshold is inclusive
        (2**30, "1.00 GiB"),  # and so is the GiB one
        (2**20 - 2**10, "1023.0 KiB"),  # 1 KiB below 1 MiB stays in KiB
        (1_000_000, "976.6 KiB"),  # a decimal MB is 976.5625 KiB, not 1 MiB
        (1e9, "953.7 MiB"),  # a decimal GB is 953.674... MiB (0.93 GiB)
        (2_500_000, "2.4 MiB"),  # 2.5e6 / 1,048,576 = 2.384...
        (80e9, "74.51 GiB"),  # 80e9 / 1,073,741,824 = 74.5058...
        (-(3 * 2**29), "-1.50 GiB"),  # unsigned: negatives still carry "-"
    ],
)
def test_format_bytes_picks_the_unit_by_magnitude(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (-(3 * 2**29), "-1.50 GiB"),
        (-(2**21), "-2.0 MiB"),
        (-512, "-0.5 KiB"),
        (0, "+0.0 MiB"),
        (2**20, "+1.0 MiB"),
        (3 * 2**30 + 2**29, "+3.50 GiB"),
    ],
)
def test_signed_puts_plus_before_non_negative_values(n, text):
    assert format_bytes(n, signed=True) == text


@pytest.mark.parametrize("missing", [None, math.nan, np.float64("nan")])
def test_missing_is_a_dash(missing):
    assert format_bytes(missing) == "-"
    assert format_bytes(missing, signed=True) == "-"


def test_digits_and_a_fixed_unit():
    assert format_bytes(5 * 2**20, digits=0) == "5 MiB"
    assert format_bytes(3 * 2**30 + 2**29, digits=3) == "3.500 GiB"
    assert format_bytes(1536, digits=2) == "1.50 KiB"
    assert format_bytes(3 * 2**29, unit="MiB") == "1536.0 MiB"  # 1.5 GiB = 1536 MiB
    assert format_bytes(2**29, unit="GiB", digits=1) == "0.5 GiB"
    assert format_bytes(2**20, unit="KiB") == "1024.0 KiB"


def test_numpy_scalars_are_numbers():
    assert format_bytes(np.int64(1536)) == "1.5 KiB"
    assert format_bytes(np.float64(5 * 2**20)) == "5.0 MiB"


def test_unknown_units_are_refused():
    with pytest.raises(ValueError, match="MB"):
        format_bytes(1, unit="MB")
    with pytest.raises(ValueError, match="GB"):
        byte_unit(1, smallest="GB")


@pytest.mark.parametrize(
    ("n", "smallest", "unit"),
    [
        (512, "KiB", "KiB"),
        (512, "MiB", "MiB"),  # an axis that never goes below MiB
        (0, "KiB", "MiB"),
        (2**20, "KiB", "MiB"),
        (2**30 - 1, "MiB", "MiB"),
        (2**30, "MiB", "GiB"),
        (-(2**31), "KiB", "GiB"),
        (2**20, "GiB", "GiB"),
    ],
)
def test_byte_unit(n, smallest, unit):
    assert byte_unit(n, smallest=smallest) == unit
