"""Tiered retention as pure functions (log/tiered_retention.py): which segments the leader
copies, which local segments may go (only copied ones, by the local retention; uncopied ones
only by the total), and which remote segments expire by the total retention."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from riverlog.services.storage.log.config import LogConfig
from riverlog.services.storage.log.segment import LogSegment
from riverlog.services.storage.log.tiered_retention import (
    LocalDeletion,
    local_deletable_segments,
    remote_expired_segments,
    segments_to_copy,
)

NOW = 1_000_000


@dataclass
class Seg:
    """The four attributes retention reads of a LogSegment."""

    base_offset: int
    next_offset: int
    size: int
    largest_timestamp: int


@dataclass
class Remote:
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    segment_size_bytes: int


def log(*sizes: int, age_ms: int = 0, per_segment: int = 10) -> list[LogSegment]:
    """Segments of `per_segment` offsets each; the last one is the active segment."""
    out = [
        Seg(i * per_segment, (i + 1) * per_segment, size, NOW - age_ms)
        for i, size in enumerate(sizes)
    ]
    return cast(list[LogSegment], out)


def cfg(**overrides: Any) -> LogConfig:
    return LogConfig.from_overrides(
        {
            "remote.storage.enable": "true",
            **{k.replace("_", "."): str(v) for k, v in overrides.items()},
        }
    )


def test_copies_go_in_order_below_the_bound() -> None:
    segments = log(100, 100, 100, 100)  # [0,10) [10,20) [20,30) active [30,40)
    assert [s.base_offset for s in segments_to_copy(segments, 0, 40)] == [0, 10, 20]
    assert [s.base_offset for s in segments_to_copy(segments, 10, 40)] == [10, 20]
    assert [s.base_offset for s in segments_to_copy(segments, 0, 25)] == [0, 10]  # hw / LSO
    assert segments_to_copy(segments, 30, 40) == []  # the active segment never
    assert segments_to_copy(segments, 0, 9) == []


def test_local_retention_deletes_only_copied_segments() -> None:
    segments = log(100, 100, 100, 100)
    config = cfg(local_retention_bytes=50)
    # The local retention would take three (leaving 100 >= 50), but only [0,10) and [10,20)
    # are copied.
    assert local_deletable_segments(segments, config, NOW, 20, 0, 200) == LocalDeletion(2, 0)
    assert local_deletable_segments(segments, config, NOW, 0, 0, 0) == LocalDeletion(0, 0)
    assert local_deletable_segments(segments, config, NOW, 30, 0, 300) == LocalDeletion(3, 0)
    # At least local.retention.bytes stays: 150 keeps two of the four.
    assert local_deletable_segments(segments, cfg(local_retention_bytes=150), NOW, 30, 0, 1) == (
        2,
        0,
    )


def test_local_retention_by_time_and_its_default_from_retention_ms() -> None:
    old = log(100, 100, 100, age_ms=5_000)
    assert local_deletable_segments(old, cfg(local_retention_ms=1_000), NOW, 30, 0, 1) == (2, 0)
    assert local_deletable_segments(old, cfg(local_retention_ms=9_000), NOW, 30, 0, 1) == (0, 0)
    # -2: local.retention.ms follows retention.ms.
    assert local_deletable_segments(old, cfg(retention_ms=1_000), NOW, 30, 0, 1) == (2, 0)


def test_below_the_log_start_offset_copied_segments_go_whatever_the_retention() -> None:
    segments = log(100, 100, 100)
    assert local_deletable_segments(segments, cfg(), NOW, 20, 15, 1) == (1, 0)


def test_uncopied_segments_stay_past_local_retention_but_not_past_total_retention() -> None:
    segments = log(100, 100, 100, 100)
    # The store is down: nothing copied. local.retention.bytes=0 takes nothing.
    assert local_deletable_segments(segments, cfg(local_retention_bytes=0), NOW, 0, 0, 0) == (0, 0)
    # retention.bytes=250 over the whole log (no remote bytes left) takes the oldest one.
    config = cfg(local_retention_bytes=0, retention_bytes=250)
    assert local_deletable_segments(segments, config, NOW, 0, 0, 0) == (1, 1)
    # While remote segments remain, they expire first (remote_expired_segments).
    assert local_deletable_segments(segments, config, NOW, 0, 0, 500) == (0, 0)
    old = log(100, 100, 100, age_ms=5_000)
    assert local_deletable_segments(old, cfg(retention_ms=1_000), NOW, 10, 0, 1) == (2, 1)


def test_nothing_goes_without_the_delete_policy() -> None:
    segments = log(100, 100, 100, age_ms=5_000)
    config = cfg(local_retention_bytes=0, cleanup_policy="compact")
    assert local_deletable_segments(segments, config, NOW, 30, 0, 1) == (0, 0)


def test_remote_segments_expire_by_total_retention() -> None:
    remote = [Remote(0, 9, NOW - 9_000, 100), Remote(10, 19, NOW - 5_000, 100)]
    local = log(100, 100, 100, per_segment=10)  # [0,10) [10,20) copied, [20,30) active
    assert remote_expired_segments(remote, local, cfg(retention_ms=6_000), NOW, 0) == 1
    assert remote_expired_segments(remote, local, cfg(retention_ms=1_000), NOW, 0) == 2
    # retention.bytes: 200 remote + 100 local-only (the active segment) = 300.
    assert remote_expired_segments(remote, local, cfg(retention_bytes=200), NOW, 0) == 1
    assert remote_expired_segments(remote, local, cfg(retention_bytes=100), NOW, 0) == 2
    assert remote_expired_segments(remote, local, cfg(retention_bytes=300), NOW, 0) == 0
    # DeleteRecords moved the log start past the first one.
    assert remote_expired_segments(remote, local, cfg(), NOW, 10) == 1
    assert remote_expired_segments(remote, local, cfg(), NOW, 9) == 0
    assert remote_expired_segments([], local, cfg(retention_ms=0), NOW, 100) == 0


def test_local_retention_keys_default_to_the_total_ones() -> None:
    config = LogConfig.from_overrides({"retention.ms": "5", "retention.bytes": "7"})
    assert (config.local_retention_ms, config.local_retention_bytes) == (-2, -2)
    assert (config.effective_local_retention_ms, config.effective_local_retention_bytes) == (5, 7)
    assert not config.remote_storage_enable
