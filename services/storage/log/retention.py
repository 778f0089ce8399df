"""Which old segments may go: Kafka's deletion rules as pure functions over the segment list.

A segment is deletable only as part of a prefix of the log (oldest first, stopping at the
first one that must stay), only when every offset in it is below the high watermark (its
successor's base offset <= high watermark: never delete what consumers cannot read yet), and
never when it is the active segment. Three reasons make a segment go:

- `retention.ms`: now - the segment's largest timestamp > retention.ms (-1: never);
- `retention.bytes`: the log is larger than retention.bytes, and removing this segment still
  leaves it at least retention.bytes (-1: never);
- the log start offset: every offset in it is below the log start offset (after
  DeleteRecords, or on a follower that follows its leader's start offset).

The first two apply only when `cleanup.policy` contains `delete`; the third always does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from riverlog.common.errors import ErrorCode, RiverlogError

from .config import LogConfig
from .segment import LogSegment


def _deletable_prefix(
    segments: Sequence[LogSegment],
    high_watermark: int,
    predicate: Callable[[LogSegment, int], bool],
) -> int:
    """How many segments from the start satisfy `predicate(segment, upper_bound)`, where the
    upper bound is the next segment's base offset; the active segment is never counted."""
    count = 0
    for i in range(len(segments) - 1):
        upper = segments[i + 1].base_offset
        if upper > high_watermark or not predicate(segments[i], upper):
            break
        count += 1
    return count


def retention_ms_breached(
    segments: Sequence[LogSegment], high_watermark: int, config: LogConfig, now_ms: int
) -> int:
    """How many leading segments are older than retention.ms."""
    if not config.delete_enabled or config.retention_ms < 0:
        return 0
    limit = config.retention_ms
    return _deletable_prefix(
        segments, high_watermark, lambda s, _: now_ms - s.largest_timestamp > limit
    )


def retention_bytes_breached(
    segments: Sequence[LogSegment], high_watermark: int, config: LogConfig
) -> int:
    """How many leading segments can go while keeping at least retention.bytes."""
    if not config.delete_enabled or config.retention_bytes < 0:
        return 0
    excess = sum(s.size for s in segments) - config.retention_bytes
    if excess <= 0:
        return 0

    def fits(segment: LogSegment, _: int) -> bool:
        nonlocal excess
        if excess - segment.size < 0:
            return False
        excess -= segment.size
        return True

    return _deletable_prefix(segments, high_watermark, fits)


def log_start_offset_breached(
    segments: Sequence[LogSegment], high_watermark: int, log_start_offset: int
) -> int:
    """How many leading segments hold only offsets below the log start offset."""
    return _deletable_prefix(segments, high_watermark, lambda _, upper: upper <= log_start_offset)


def deletable_segments(
    segments: Sequence[LogSegment],
    high_watermark: int,
    config: LogConfig,
    now_ms: int,
    log_start_offset: int,
) -> int:
    """How many leading segments retention removes: by time, then by size among the rest,
    then those below the log start offset among what is left."""
    count = retention_ms_breached(segments, high_watermark, config, now_ms)
    count += retention_bytes_breached(segments[count:], high_watermark, config)
    return count + log_start_offset_breached(segments[count:], high_watermark, log_start_offset)


def check_delete_records(what: object, offset: int, high_watermark: int) -> None:
    """DeleteRecords may move the log start offset within [0, high watermark] only; raises
    OFFSET_OUT_OF_RANGE otherwise."""
    if not 0 <= offset <= high_watermark:
        raise RiverlogError(
            f"{what}: cannot delete records before {offset}: the high watermark is "
            f"{high_watermark}",
            ErrorCode.OFFSET_OUT_OF_RANGE,
        )
