"""Property: after any number of cleaning passes, a reader from the start sees, for every key,
the latest value of the uncompacted log, at its original offset, with offsets increasing."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from log_cleaner_testkit import (
    append,
    clean,
    compact_config,
    latest_by_key,
    open_compacted,
    records,
)
from storage_log_testkit import TS

from riverlog.common.clock import ManualClock
from riverlog.common.records import CompressionType
from riverlog.services.storage.log.cleaner import CleanerManager

keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e"])
values = st.one_of(st.none(), st.binary(min_size=0, max_size=40))
batches = st.lists(
    st.lists(st.tuples(keys, values), min_size=1, max_size=6), min_size=1, max_size=60
)


@settings(max_examples=40, deadline=None)
@given(
    batches=batches,
    segment_bytes=st.sampled_from([300, 700, 2000]),
    codec=st.sampled_from([CompressionType.NONE, CompressionType.LZ4]),
    passes=st.integers(1, 3),
)
def test_cleaning_keeps_the_latest_value_of_every_key(
    batches: list[list[tuple[bytes, bytes | None]]],
    segment_bytes: int,
    codec: CompressionType,
    passes: int,
) -> None:
    clock = ManualClock(TS)
    with tempfile.TemporaryDirectory() as tmp:
        log = open_compacted(Path(tmp), clock, compact_config(segment_bytes=segment_bytes))
        manager = CleanerManager([])
        expected = {}
        per_pass = max(len(batches) // passes, 1)
        for start in range(0, len(batches), per_pass):
            for batch in batches[start : start + per_pass]:
                append(log, batch, clock, compression=codec)
                clock.advance(1)
            expected = latest_by_key(records(log))
            clean(log, clock, manager=manager, buffer_bytes=24 * 4)
            got = records(log)
            assert latest_by_key(got) == expected
            offsets = [r.offset for r in got]
            assert offsets == sorted(set(offsets))
        log.close()
