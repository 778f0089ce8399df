"""Retention of a log with `remote.storage.enable`, split in two (KIP-405), as pure functions:

- *local*: a leading segment may leave the local disk only once its copy in the remote store
  has finished (its next offset <= the offset after the last finished copy), and only when
  `local.retention.ms` / `local.retention.bytes` (or the total retention, which is never
  smaller in effect) say it may go. Deleting it moves the *local* log start offset, not the
  log start offset: its records are still readable from the remote store.
- *total*: `retention.ms` / `retention.bytes` bound the whole log, remote and local. Remote
  segments expire from the oldest by the time of their newest record, by the size of the whole
  log (remote bytes + the local bytes not yet copied), and when every offset in them is below
  the log start offset (DeleteRecords). Expiring them moves the log start offset.

And which segments the leader copies next: closed segments from the offset after the last
finished copy, each wholly below the bound (the high watermark, and the last stable offset: an
open transaction's records are not copied before it ends).

`segments` are local segments oldest first, the last one active (never copied nor deleted).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from .config import LogConfig
from .segment import LogSegment


class RemoteSegment(Protocol):
    """What retention reads of a finished remote segment (RemoteLogSegmentMetadata)."""

    @property
    def start_offset(self) -> int: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def max_timestamp_ms(self) -> int: ...
    @property
    def segment_size_bytes(self) -> int: ...


def segments_to_copy(
    segments: Sequence[LogSegment], copied_next_offset: int, bound: int
) -> list[LogSegment]:
    """The closed segments not yet copied, oldest first, stopping at the first that holds an
    offset at or past `bound` (min(high watermark, last stable offset)): copies go in order,
    so the remote log never has a hole."""
    out: list[LogSegment] = []
    for i in range(len(segments) - 1):
        segment, upper = segments[i], segments[i + 1].base_offset
        if upper <= copied_next_offset:
            continue  # copied already
        if upper > bound:
            break
        out.append(segment)
    return out


class LocalDeletion(NamedTuple):
    """How many leading local segments go, and how many of those were never copied (the
    total retention took them while the store was down: their records are gone for good)."""

    deleted: int
    uncopied: int


def local_deletable_segments(
    segments: Sequence[LogSegment],
    config: LogConfig,
    now_ms: int,
    copied_next_offset: int,
    log_start_offset: int,
    remote_size_bytes: int,
) -> LocalDeletion:
    """Which leading local segments may go. A copied one: by the local retention (time or
    size) or when wholly below the log start offset. One not yet copied is kept past the local
    retention until its copy finishes, unless the total retention takes it: retention.ms, or
    retention.bytes over the whole log once no remote segment is left to expire before it.
    Never the active segment."""
    local_ms = config.effective_local_retention_ms
    local_bytes = config.effective_local_retention_bytes
    local_total = sum(s.size for s in segments)
    local_excess = local_total - local_bytes if local_bytes >= 0 else None
    total_excess = None
    if config.retention_bytes >= 0 and remote_size_bytes == 0:
        total_excess = local_total - config.retention_bytes
    count = uncopied = 0
    for i in range(len(segments) - 1):
        segment, upper = segments[i], segments[i + 1].base_offset
        age = now_ms - segment.largest_timestamp
        if upper <= copied_next_offset:
            go = upper <= log_start_offset or (
                config.delete_enabled
                and (
                    (local_ms >= 0 and age > local_ms)
                    or (local_excess is not None and local_excess - segment.size >= 0)
                )
            )
        else:
            go = config.delete_enabled and (
                (config.retention_ms >= 0 and age > config.retention_ms)
                or (total_excess is not None and total_excess - segment.size >= 0)
            )
            uncopied += go
        if not go:
            break
        if local_excess is not None:
            local_excess -= segment.size
        if total_excess is not None:
            total_excess -= segment.size
        count += 1
    return LocalDeletion(count, uncopied)


def remote_expired_segments(
    remote: Sequence[RemoteSegment],
    local_segments: Sequence[LogSegment],
    config: LogConfig,
    now_ms: int,
    log_start_offset: int,
) -> int:
    """How many leading remote segments (finished copies, oldest first) expire by the total
    retention: retention.ms by their newest record, retention.bytes over the whole log, or
    wholly below the log start offset."""
    if not remote:
        return 0
    copied_next = max(s.end_offset + 1 for s in remote)
    local_only = sum(
        s.size for i, s in enumerate(local_segments) if _upper(local_segments, i) > copied_next
    )
    excess = -1
    if config.delete_enabled and config.retention_bytes >= 0:
        excess = sum(s.segment_size_bytes for s in remote) + local_only - config.retention_bytes
    count = 0
    for segment in remote:
        by_time = (
            config.delete_enabled
            and config.retention_ms >= 0
            and now_ms - segment.max_timestamp_ms > config.retention_ms
        )
        by_size = excess >= 0 and excess - segment.segment_size_bytes >= 0
        below_start = segment.end_offset < log_start_offset
        if not (by_time or by_size or below_start):
            break
        excess -= segment.segment_size_bytes
        count += 1
    return count


def _upper(segments: Sequence[LogSegment], i: int) -> int:
    """The offset after segment i (the next one's base; the active segment's next offset)."""
    return segments[i + 1].base_offset if i + 1 < len(segments) else segments[i].next_offset
