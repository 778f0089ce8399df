"""The benchmarks' shared arithmetic (`bench/bench_common.py`): sizes given on the command line
(`--partition-bytes 1GB`) and MB/s, which the README's figures rest on."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_common import mb_per_s, parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1GB", 10**9),
        ("256MB", 256 * 10**6),
        ("64MiB", 64 << 20),
        ("1GiB", 1 << 30),
        ("1.5 kb", 1500),
        ("4096", 4096),
        ("10B", 10),
    ],
)
def test_sizes_are_decimal_or_binary_by_their_unit(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "GB", "1 TB", "-1MB", "1 MB 2"])
def test_a_size_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


def test_mb_per_s_counts_megabytes_of_ten_to_the_six() -> None:
    assert mb_per_s(256 * 10**6, 2.0) == 128.0
    assert math.isnan(mb_per_s(1, 0.0))
