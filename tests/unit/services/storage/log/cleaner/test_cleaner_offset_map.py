"""The cleaner's bounded key -> latest offset map."""

from __future__ import annotations

import pytest

from riverlog.services.storage.log.cleaner import OffsetMap
from riverlog.services.storage.log.cleaner.offset_map import ENTRY_BYTES


def test_latest_offset_per_key_wins() -> None:
    m = OffsetMap(1024)
    m.put(b"a", 1)
    m.put(b"b", 2)
    m.put(b"a", 7)
    assert (m.get(b"a"), m.get(b"b"), m.get(b"zz")) == (7, 2, -1)
    assert m.size == 2 and m.latest_offset == 7
    m.update_latest_offset(9)
    assert m.latest_offset == 9
    m.clear()
    assert m.size == 0 and m.latest_offset == -1 and b"a" not in m


def test_capacity_follows_the_buffer_size_at_the_load_factor() -> None:
    m = OffsetMap(ENTRY_BYTES * 10)
    assert m.slots == 10 and m.max_entries == 9
    for i in range(9):
        assert not m.is_full
        m.put(b"%d" % i, i)
    assert m.is_full and m.utilization == pytest.approx(0.9)


def test_a_buffer_too_small_for_one_entry_is_refused() -> None:
    with pytest.raises(ValueError):
        OffsetMap(ENTRY_BYTES - 1)
