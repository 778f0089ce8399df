"""Consumer lag (pure): how far a group's committed offset is behind the partition's high
watermark, as `kafka-consumer-groups.sh --describe` shows it."""

from __future__ import annotations

from collections.abc import Mapping

from riverlog.common.types import TopicPartition


def consumer_lag(committed: int, high_watermark: int) -> int:
    """`high_watermark - committed`, never negative: an offset committed past the high
    watermark (the log was truncated, or the watermark read is older than the commit) is no
    lag, not a credit."""
    return max(high_watermark - committed, 0)


def group_lags(
    committed: Mapping[str, Mapping[TopicPartition, int]],
    high_watermarks: Mapping[TopicPartition, int],
) -> dict[tuple[str, TopicPartition], int]:
    """Lag per (group, partition) for every committed offset whose partition's high watermark
    is known; partitions without a known watermark are left out rather than guessed."""
    return {
        (group, tp): consumer_lag(offset, high_watermarks[tp])
        for group, offsets in committed.items()
        for tp, offset in offsets.items()
        if tp in high_watermarks and offset >= 0
    }
