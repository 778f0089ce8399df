"""PartitionLog appends (leader and follower), rolling, bad input, flush and lifecycle."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from storage_log_testkit import (
    TS,
    all_batches,
    config,
    fill,
    headers,
    log_dir,
    make_batch,
    offsets_in,
    open_log,
    read_bytes,
)

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records import CompressionType, iter_batches_records
from riverlog.common.records.header import TIMESTAMP_TYPE_MASK, crc32c, validate_batch


def test_append_assigns_offsets_and_stamps_epoch(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    first = make_batch(3)
    info = log.append_as_leader(first, leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    assert info.valid_bytes == len(first)
    assert info.log_append_time_ms == -1
    assert info.max_timestamp == TS + 2
    payload = make_batch(2, ts=TS + 10) + make_batch(
        4, ts=TS + 20, compression=CompressionType.GZIP
    )
    info = log.append_as_leader(payload, leader_epoch=8)
    assert (info.first_offset, info.last_offset, info.record_count, info.batch_count) == (
        3,
        8,
        6,
        2,
    )
    assert log.log_end_offset == 9
    stored = read_bytes(log, 0)
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers(stored)] == [
        (0, 7),
        (3, 8),
        (5, 8),
    ]
    assert offsets_in(stored) == list(range(9))
    # The CRC still holds: only fields outside it changed.
    assert [validate_batch(stored, pos).crc for pos in (0, len(first))] == [
        struct.unpack_from(">I", first, 17)[0],
        struct.unpack_from(">I", payload, 17)[0],
    ]


def test_stored_bytes_differ_from_payload_only_in_offset_and_epoch(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(1), 0)
    payload = make_batch(5, ts=TS + 100)
    log.append_as_leader(payload, 3)
    stored = all_batches(log)[1]
    assert len(stored) == len(payload)
    assert stored[:8] == (1).to_bytes(8, "big")
    assert stored[8:12] == payload[8:12]
    assert stored[12:16] == (3).to_bytes(4, "big")
    assert stored[16:] == payload[16:]


def test_log_append_time_restamps_and_recomputes_crc(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config(message_timestamp_type="LogAppendTime"))
    clock.advance(5_000)
    info = log.append_as_leader(make_batch(3, ts=TS), 0)
    assert info.log_append_time_ms == clock.time_ms()
    assert info.max_timestamp == clock.time_ms()
    stored = read_bytes(log, 0)
    header = validate_batch(stored)  # the CRC was recomputed
    assert header.attributes & TIMESTAMP_TYPE_MASK
    assert header.max_timestamp == clock.time_ms()
    assert {r.timestamp for r in iter_batches_records(stored)} == {clock.time_ms()}


def test_create_time_topic_clears_a_log_append_time_bit(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    batch = bytearray(make_batch(2))
    batch[22] |= TIMESTAMP_TYPE_MASK
    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")
    log.append_as_leader(bytes(batch), 0)
    header = validate_batch(read_bytes(log, 0))
    assert not header.attributes & TIMESTAMP_TYPE_MASK
    assert header.max_timestamp == TS + 1


def corrupt_crc(batch: bytes) -> bytes:
    return batch[:-1] + bytes([batch[-1] ^ 0xFF])


def wrong_magic(batch: bytes) -> bytes:
    return batch[:16] + b"\x01" + batch[17:]


def zero_records(batch: bytes) -> bytes:
    out = bytearray(batch)
    out[57:61] = (0).to_bytes(4, "big")
    out[17:21] = crc32c(bytes(out[21:])).to_bytes(4, "big")
    return bytes(out)


def control_batch(batch: bytes) -> bytes:
    out = bytearray(batch)
    out[22] |= 0x20
    out[17:21] = crc32c(bytes(out[21:])).to_bytes(4, "big")
    return bytes(out)


BAD_PAYLOADS = {
    "corrupt crc": (lambda: corrupt_crc(make_batch(3)), ErrorCode.CORRUPT_MESSAGE, "CRC"),
    "torn batch": (lambda: make_batch(3)[:-5], ErrorCode.CORRUPT_MESSAGE, "torn"),
    "torn header": (lambda: make_batch(1)[:40], ErrorCode.CORRUPT_MESSAGE, "truncated"),
    "wrong magic": (lambda: wrong_magic(make_batch(1)), ErrorCode.CORRUPT_MESSAGE, "magic"),
    "garbage": (lambda: b"\x07" * 200, ErrorCode.CORRUPT_MESSAGE, "batch 0"),
    "empty": (lambda: b"", ErrorCode.INVALID_RECORD, "no record batch"),
    "oversize": (
        lambda: make_batch(1, value_size=3000),
        ErrorCode.MESSAGE_TOO_LARGE,
        "max.message",
    ),
    "no records": (lambda: zero_records(make_batch(1)), ErrorCode.INVALID_RECORD, "at least one"),
    "control": (lambda: control_batch(make_batch(1)), ErrorCode.INVALID_RECORD, "control"),
    "good then bad": (
        lambda: make_batch(2) + corrupt_crc(make_batch(2)),
        ErrorCode.CORRUPT_MESSAGE,
        "batch 1 at byte",
    ),
    "too big for a segment": (
        lambda: make_batch(1, value_size=1000) * 5,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        "segment.bytes",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_PAYLOADS))
def test_bad_append_is_rejected_and_changes_nothing(
    tmp_path: Path, clock: ManualClock, case: str
) -> None:
    make, code, message = BAD_PAYLOADS[case]
    log = open_log(tmp_path, clock, config(max_message_bytes=2000, segment_bytes=4000))
    fill(log, 3)
    before = (log.log_end_offset, log.size_bytes, log.segment_count, read_bytes(log, 0))
    with pytest.raises(RiverlogError) as caught:
        log.append_as_leader(make(), 0)
    assert caught.value.code == code
    assert message in caught.value.message
    assert (log.log_end_offset, log.size_bytes, log.segment_count, read_bytes(log, 0)) == before
    log.append_as_leader(make_batch(1), 0)  # the log still works
    assert log.log_end_offset == before[0] + 1


def test_follower_append_keeps_leader_offsets(tmp_path: Path, clock: ManualClock) -> None:
    leader = open_log(tmp_path / "leader", clock)
    fill(leader, 5, count=2)
    follower = open_log(tmp_path / "follower", clock)
    data = read_bytes(leader, 0)
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 9, 10)
    assert follower.log_end_offset == 10
    assert read_bytes(follower, 0) == data
    with pytest.raises(RiverlogError) as caught:
        follower.append_as_follower(data)  # offsets before the log end
    assert caught.value.code == ErrorCode.INVALID_RECORD
    assert "before the log end offset 10" in caught.value.message
    assert follower.log_end_offset == 10


def test_a_follower_fetch_larger_than_a_segment_is_appended_across_segments(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A follower behind on a topic with small segments fetches more than segment.bytes at
    once; it must take it (in runs of whole batches, rolling between them), not refuse it
    forever (it then never caught up and acks=all never completed)."""
    small = config(segment_bytes=len(make_batch(2)) * 3)
    leader = open_log(tmp_path / "leader", clock, small)
    fill(leader, 20, count=2)
    data = read_bytes(leader, 0)
    assert len(data) > small.segment_bytes * 5
    follower = open_log(tmp_path / "follower", clock, small)
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset, info.record_count, info.batch_count) == (
        0,
        39,
        40,
        20,
    )
    assert read_bytes(follower, 0) == data
    assert follower.segment_count > 5
    assert all(s.size <= small.segment_bytes for s in follower.segments)


def test_follower_append_rejects_offsets_going_backwards(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader = open_log(tmp_path / "leader", clock)
    fill(leader, 3)
    batches = all_batches(leader)
    follower = open_log(tmp_path / "follower", clock)
    with pytest.raises(RiverlogError, match="end of the previous batch"):
        follower.append_as_follower(batches[0] + batches[2] + batches[1])
    assert follower.log_end_offset == 0
    assert follower.size_bytes == 0


def test_roll_by_segment_bytes(tmp_path: Path, clock: ManualClock) -> None:
    batch_size = len(make_batch(1))
    log = open_log(tmp_path, clock, config(segment_bytes=batch_size * 3))
    fill(log, 10)
    assert log.segment_count == 4
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert all(s.size <= batch_size * 3 for s in log.segments)
    files = sorted(p.name for p in log.dir.iterdir())
    assert "00000000000000000003.log" in files
    assert "00000000000000000003.index" in files
    assert "00000000000000000003.timeindex" in files
    assert offsets_in(read_bytes(log, 0)) == list(range(10))


def test_a_batch_that_does_not_fit_rolls_first(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config(segment_bytes=300))
    log.append_as_leader(make_batch(1), 0)
    log.append_as_leader(make_batch(1, value_size=200), 0)
    log.append_as_leader(make_batch(1), 0)
    assert [s.base_offset for s in log.segments] == [0, 1, 2]


def test_roll_by_segment_ms(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config(segment_ms=1000))
    fill(log, 3, clock=clock, advance_ms=400)  # timestamps 0, 400, 800 after the first
    assert log.segment_count == 1
    clock.advance(400)  # the next batch is 1200 ms after the segment's first
    fill(log, 1, clock=clock)
    assert log.segment_count == 2
    assert log.active_segment.base_offset == 3


def test_empty_segment_never_rolls(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config(segment_ms=1))
    clock.advance(10_000)
    assert log.roll() is log.active_segment
    assert log.segment_count == 1
    fill(log, 1, clock=clock)
    assert log.segment_count == 1


def test_roll_when_the_index_is_full(tmp_path: Path, clock: ManualClock) -> None:
    # 24 bytes: 3 offset-index entries, 1 usable time-index entry (one slot kept for roll).
    log = open_log(tmp_path, clock, config(segment_index_bytes=24, index_interval_bytes=0))
    fill(log, 10, clock=clock, advance_ms=1)
    assert log.segment_count > 1
    assert offsets_in(read_bytes(log, 0)) == list(range(10))
    for segment in log.segments[:-1]:
        assert segment.offset_index.path.stat().st_size == segment.offset_index.entries * 8
        assert segment.time_index.path.stat().st_size == segment.time_index.entries * 12


def test_manual_roll_seals_indexes(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config(index_interval_bytes=0))
    fill(log, 5, clock=clock, advance_ms=10)
    old = log.active_segment
    new = log.roll()
    assert new.base_offset == 5
    assert old.offset_index.path.stat().st_size == old.offset_index.entries * 8 > 0
    assert old.time_index.last_entry.timestamp == old.max_timestamp == TS + 40
    assert new.offset_index.path.stat().st_size == log.config.segment_index_bytes


def test_flush_moves_the_recovery_point(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config(segment_bytes=500))
    fill(log, 10)
    assert log.recovery_point == 0
    log.flush(4)
    assert log.recovery_point == 4
    log.flush()
    assert log.recovery_point == log.log_end_offset == 10


def test_flush_messages_flushes_on_append(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config(flush_messages=3))
    fill(log, 2)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 3


def test_close_and_reopen_clean(tmp_path: Path, clock: ManualClock) -> None:
    cfg = config(segment_bytes=400, index_interval_bytes=0)
    log = open_log(tmp_path, clock, cfg)
    fill(log, 20, count=2, clock=clock, advance_ms=5)
    before = read_bytes(log, 0)
    segments = log.segment_count
    log.close()
    with pytest.raises(RiverlogError):
        log.append_as_leader(make_batch(), 0)
    reopened = open_log(tmp_path, clock, cfg, recovery_point=40, clean_shutdown=True)
    assert reopened.log_end_offset == 40
    assert reopened.recovery_point == 40
    assert reopened.segment_count == segments
    assert read_bytes(reopened, 0) == before
    assert reopened.active_segment.offset_index.file_size == cfg.segment_index_bytes
    reopened.append_as_leader(make_batch(2), 0)
    assert reopened.log_end_offset == 42
    reopened.close()


def test_update_config_applies_to_next_append(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 2)
    log.update_config(config(max_message_bytes=50))
    assert log.config.max_message_bytes == 50
    with pytest.raises(RiverlogError) as caught:
        log.append_as_leader(make_batch(1), 0)
    assert caught.value.code == ErrorCode.MESSAGE_TOO_LARGE


def test_delete_removes_the_directory(tmp_path: Path, clock: ManualClock) -> None:
    """The directory is renamed away at once; its files go in the background."""
    log = open_log(tmp_path, clock)
    fill(log, 3)
    log.delete()
    assert not log_dir(tmp_path).exists()
    assert all(p.name.endswith("-delete") for p in tmp_path.iterdir())
    deadline = time.monotonic() + 10
    while list(tmp_path.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list(tmp_path.iterdir()) == []


def test_high_watermark_bounds(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 3)
    with pytest.raises(ValueError):
        log.high_watermark = 4
    log.high_watermark = 1
    assert log.high_watermark == 1
    assert log.update_high_watermark(99) == 3
    assert log.update_high_watermark(-5) == 0


@pytest.mark.parametrize("append_time", [False, True])
def test_writable_view_is_stamped_in_place_and_others_are_copied(
    tmp_path: Path, clock: ManualClock, append_time: bool
) -> None:
    """A writable memoryview (the zero-copy channel's own frame) gets its offsets, epoch and
    (LogAppendTime) timestamps in place; bytes, bytearray and read-only views are left as
    they were. The log holds the same bytes either way."""
    cfg = config(message_timestamp_type="LogAppendTime") if append_time else None
    payload = make_batch(3) + make_batch(2, ts=TS + 10)
    stored = []
    for form in ("bytes", "bytearray", "readonly", "writable"):
        path = tmp_path / form
        path.mkdir()
        log = open_log(path, clock, cfg)
        log.append_as_leader(make_batch(1), leader_epoch=5)
        given: bytes | bytearray | memoryview
        if form == "bytes":
            given = bytes(payload)
        elif form == "bytearray":
            given = bytearray(payload)
        elif form == "readonly":
            given = memoryview(bytes(payload))
        else:
            given = memoryview(bytearray(payload))
        info = log.append_as_leader(given, leader_epoch=5)
        assert (info.first_offset, info.last_offset) == (1, 5)
        data = read_bytes(log, 1)
        stored.append(data)
        validate_batch(data)
        if form == "writable":
            assert bytes(given) == data  # stamped in place
        else:
            assert bytes(given) == payload  # untouched
    assert stored[0] == stored[1] == stored[2] == stored[3]
