"""The log of one partition replica: segments in a directory `<topic>-<partition>`, the API
the storage service codes against (Kafka's UnifiedLog and LocalLog).

Offsets a caller sees:

    log_start_offset <= high_watermark <= log_end_offset
    (first readable)    (committed: consumers read below it)    (next offset to assign)

and the recovery point, below which everything has been fsynced. With `remote.storage.enable`
(tiered storage) the log start offset may be below the *local* log start offset (the first
local segment's base): the records between them are in the remote store only, the leader's
remote log manager having copied them (`copied_next_offset`) before local retention removed
them (`tiered_retention.py`). Appends go to the last
(active) segment, rolling first when it is full or old; reads find the segment by binary search
over base offsets and the position by its sparse offset index, and return byte ranges of the
stored files; nothing on these paths decodes records.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from . import retention, tiered_retention
from .checkpoint import fsync_dir, remove_log_dir
from .config import LogConfig
from .file_records import FetchSlice
from .leader_epoch_cache import LeaderEpochFileCache
from .loader import LogLoader
from .log_validator import (
    AppendInfo,
    AppendOrigin,
    Payload,
    ValidatedAppend,
    merge_append_infos,
    split_batches,
    validate_follower_append,
    validate_leader_append,
)
from .segment import LogSegment
from .segment_swap import discard_cleaned, install_cleaned
from .segments import LogSegments
from .txn_index import AbortedTxn

logger = logging.getLogger(__name__)

# An offset above any: `log_start_offset_breached` with it counts every segment below a bound.
LONG = 2**63 - 1


class PartitionLog:
    """One partition's log. Lifecycle: `open` (loads and recovers the directory) → appends,
    reads and maintenance → `close` (flushes) or `delete` (removes the directory).

    Threading: not thread-safe. Every method is called from the storage node's one event-loop
    thread; nothing blocks for long except `flush` (fsync) and `open` (recovery).

    The high watermark is kept here but owned by the caller: a single-replica leader sets it to
    `log_end_offset` after each append (`log.high_watermark = log.log_end_offset`); with
    replication, the partition layer moves it to the ISR's minimum log end offset. Reads for
    consumers pass it as `max_offset`; retention and DeleteRecords never go past it.
    """

    def __init__(
        self,
        dir: Path,
        tp: TopicPartition,
        config: LogConfig,
        clock: Clock,
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
        txn_index_rebuild_from: int | None = None,
    ) -> None:
        self._dir = dir
        self._tp = tp
        self._config = config
        self._clock = clock
        self._segments = LogSegments(segments)
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._high_watermark = log_start_offset
        self._dir_dirty = False
        self._closed = False
        self.last_flush_ms = clock.time_ms()
        # Hooks of the partition's producer state: called with the new segment's base offset
        # after a roll, and before a clean close (producer-state snapshots).
        self.on_roll: list[Callable[[int], None]] = []
        self.on_close: list[Callable[[], None]] = []
        # Called with the new log start offset after DeleteRecords moved it (tiered storage:
        # the remote log manager deletes the remote segments below it at once).
        self.on_log_start_moved: list[Callable[[int], None]] = []
        # The producer state's first unstable offset (None: none), which retention never
        # passes: an open transaction's data stays until the transaction ends.
        self.first_unstable_offset: Callable[[], int | None] = lambda: None
        # Set once the producer state has loaded (its open transactions are known, and the
        # .txnindex rebuilt): the cleaner never cleans a log before that.
        self.producer_state_loaded = False
        # Set by recovery: the .txnindex files from this offset on are to be rebuilt by the
        # producer state's replay of the log, which then clears it.
        self.txn_index_rebuild_from = txn_index_rebuild_from
        # Tiered storage, set by the remote log manager: the offset after the last finished
        # remote copy (None: unknown yet, so nothing is taken for copied) and the bytes held
        # remotely (the total retention counts them).
        self.copied_next_offset: int | None = None
        # The log start offset the checkpoint gave at load: a log loaded before its topic's
        # configs were known (with remote.storage.enable unknown) takes it back when they say
        # it is tiered, as the records below its first local segment are in the remote store.
        self._checkpointed_log_start: int | None = None
        self.remote_size_bytes = 0
        self.leader_epoch_cache = LeaderEpochFileCache.in_dir(dir)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(log_start_offset)

    @classmethod
    def open(
        cls,
        dir: Path,
        tp: TopicPartition,
        config: LogConfig,
        clock: Clock,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        compacted_below: int = 0,
    ) -> PartitionLog:
        """Load (creating if needed) the log in `dir`, recovering it unless `clean_shutdown`.
        The high watermark starts at the log start offset; the caller restores it."""
        where = (dir, tp, config, clock)
        state = (recovery_point, log_start_offset, clean_shutdown, compacted_below)
        loaded = LogLoader(*where, *state).load()
        log = cls(
            *where,
            loaded.segments,
            loaded.log_start_offset,
            loaded.recovery_point,
            loaded.txn_index_rebuild_from,
        )
        log._checkpointed_log_start = log_start_offset
        return log

    # -- properties -------------------------------------------------------------------------

    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def tp(self) -> TopicPartition:
        return self._tp

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        """The first offset held on local disk (Kafka's localLogStartOffset): the log start
        offset unless tiered storage removed older local segments."""
        return max(self._log_start_offset, self._segments.first_base_offset)

    @property
    def remote_storage_enabled(self) -> bool:
        return self._config.remote_storage_enable

    @property
    def log_end_offset(self) -> int:
        return self._segments.active.next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        if not self._log_start_offset <= offset <= self.log_end_offset:
            raise ValueError(
                f"{self._tp}: high watermark {offset} outside [{self._log_start_offset}, "
                f"{self.log_end_offset}]"
            )
        self._high_watermark = offset

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark clamped to [log start, log end] (Kafka's rule, for values
        from elsewhere: a checkpoint, a leader); returns the value set."""
        self._high_watermark = min(max(offset, self._log_start_offset), self.log_end_offset)
        return self._high_watermark

    @property
    def size_bytes(self) -> int:
        return self._segments.size_bytes

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments.as_tuple()

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active

    # -- appends ----------------------------------------------------------------------------

    def append_as_leader(
        self, payload: Payload, leader_epoch: int, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> AppendInfo:
        """Validate every batch, assign offsets from the log end offset, stamp the leader
        epoch (and the append time with LogAppendTime), and append. Nothing is written when
        any batch is invalid: RiverlogError CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
        RECORD_LIST_TOO_LARGE or INVALID_RECORD says which and where."""
        now = self._clock.time_ms()
        validated = validate_leader_append(
            payload, self._config, self.log_end_offset, leader_epoch, now, origin
        )
        self.leader_epoch_cache.assign(leader_epoch, validated.info.first_offset)
        self._append(validated, now)
        return validated.info

    def append_as_follower(self, payload: Payload) -> AppendInfo:
        """Append batches whose offsets the leader assigned; they must start at or after the
        log end offset and increase (else INVALID_RECORD). A fetch may bring more than
        segment.bytes (a follower behind on a topic with small segments): it is appended in
        runs of whole batches that each fit a segment, rolling between them, instead of being
        refused forever (the follower would never catch up)."""
        chunks = split_batches(payload, self._config.segment_bytes)
        infos = [self._append_follower_chunk(chunk) for chunk in chunks]
        return merge_append_infos(infos)

    def _append_follower_chunk(self, payload: Payload) -> AppendInfo:
        validated = validate_follower_append(payload, self._config, self.log_end_offset)
        for epoch, start in validated.epoch_starts:
            if epoch > self.leader_epoch_cache.latest_epoch:
                self.leader_epoch_cache.assign(epoch, start)
        self._append(validated, self._clock.time_ms())
        return validated.info

    def _append(self, validated: ValidatedAppend, now_ms: int) -> None:
        self._check_open()
        info = validated.info
        segment = self._segments.active
        if self._segments.should_roll(info, now_ms, self._config):
            segment = self.roll()
        try:
            segment.append(validated.data, validated.batches)
        except OSError as exc:
            raise RiverlogError(
                f"{self._tp}: write to {segment.log.path} failed: {exc}",
                ErrorCode.KAFKA_STORAGE_ERROR,
            ) from exc
        if self.log_end_offset - self._recovery_point >= self._config.flush_messages:
            self.flush()

    def roll(self) -> LogSegment:
        """Seal the active segment and start a new one at the log end offset. A no-op when
        the active segment is empty. Returns the active segment."""
        self._check_open()
        active = self._segments.active
        if active.size == 0:
            return active
        base = active.next_offset
        active.on_become_inactive()
        segment = self._new_segment(base)
        self._segments.add(segment)
        for hook in self.on_roll:
            hook(base)
        return segment

    def _new_segment(self, base: int) -> LogSegment:
        cfg = self._config
        segment = LogSegment.create(
            self._dir, base, cfg.segment_index_bytes, cfg.index_interval_bytes, self._clock
        )
        self._dir_dirty = True
        return segment

    # -- reads ------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchSlice:
        """Whole stored batches from the one holding `fetch_offset`: at most `max_bytes`
        (but the first batch whole, however big, when `min_one_message`), and none holding an
        offset at or beyond `max_offset` (the high watermark for consumers; None for the log
        end). May span segments. Raises OFFSET_OUT_OF_RANGE unless log start <= fetch_offset
        <= log end. Close the returned slice when its bytes are sent. Below the local log
        start (tiered storage): OFFSET_MOVED_TO_TIERED_STORAGE, the cue to read remotely."""
        self._check_open()
        local_start = self.local_log_start_offset
        if self._log_start_offset <= fetch_offset < local_start:
            raise RiverlogError(
                f"{self._tp}: offset {fetch_offset} is below the local log start {local_start}",
                ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE,
            )
        return self._segments.read_checked(
            self._tp, self._log_start_offset, fetch_offset, max_bytes, max_offset, min_one_message
        )

    def collect_aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions that meet [start_offset, upper_bound_offset), from the
        .txnindex of the segment holding `start_offset` onward, in marker order (Kafka's
        UnifiedLog.collectAbortedTransactions): a transaction is indexed in its marker's
        segment, so later segments are searched until an entry's last stable offset shows
        that no later marker can name data below the bound."""
        self._check_open()
        found: list[AbortedTxn] = []
        for segment in self._segments.from_offset(start_offset):
            result = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            found.extend(result.aborted)
            if result.complete:
                break
        return found

    def append_aborted_txn(self, aborted: AbortedTxn) -> None:
        """Index an aborted transaction in the segment holding its ABORT marker."""
        self._segments.segment_for(aborted.last_offset).update_txn_index(aborted)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record at or after the log start offset whose
        timestamp is >= `timestamp`, or None when there is none. Uses the time and offset
        indexes, then decodes the timestamps of one batch. Latest and earliest are the caller's
        (`log_end_offset` / `high_watermark`, `log_start_offset`)."""
        self._check_open()
        return self._segments.find_offset_by_timestamp(timestamp, self._log_start_offset)

    # -- deletion and retention -------------------------------------------------------------

    def delete_records(self, offset: int) -> int:
        """Move the log start offset up to `offset` (DeleteRecords) and delete the segments
        wholly below it; returns the new log start offset. The offset must be within
        [0, high watermark], else OFFSET_OUT_OF_RANGE."""
        self._check_open()
        retention.check_delete_records(self._tp, offset, self._high_watermark)
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            if offset == self.log_end_offset:
                self.roll()  # the active segment is wholly below the new start
            self._delete_prefix(
                retention.log_start_offset_breached(self.segments, self._high_watermark, offset)
            )
            for hook in self.on_log_start_moved:
                hook(self._log_start_offset)
        return self._log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete the segments that retention.ms, retention.bytes or the log start offset
        allow (never the active one, never past the high watermark nor the first unstable
        offset: an open transaction's first offset stays); returns how many."""
        self._check_open()
        bound = self._high_watermark
        unstable = self.first_unstable_offset()
        if unstable is not None:
            bound = min(bound, unstable)
        if self._config.remote_storage_enable:
            return self._apply_local_retention(now_ms, bound)
        return self._delete_prefix(
            retention.deletable_segments(
                self.segments, bound, self._config, now_ms, self._log_start_offset
            )
        )

    def _apply_local_retention(self, now_ms: int, bound: int) -> int:
        """Tiered retention of the local segments (`tiered_retention.py`): copied segments go
        by the local retention and leave the log start offset where it is; segments never
        copied go only by the total retention, which does move it."""
        segments = self.segments
        deletion = tiered_retention.local_deletable_segments(
            segments,
            self._config,
            now_ms,
            self.copied_next_offset if self.copied_next_offset is not None else -1,
            self._log_start_offset,
            self.remote_size_bytes,
        )
        count = min(deletion.deleted, retention.log_start_offset_breached(segments, bound, LONG))
        if deletion.uncopied:
            logger.warning(
                "%s: deleting %d local segments never copied to the remote store: the total "
                "retention (retention.ms / retention.bytes) took them while copies failed",
                self._tp,
                deletion.uncopied,
            )
        doomed = self._segments.remove_prefix(count)
        if not doomed:
            return 0
        if deletion.uncopied:
            self._log_start_offset = max(self._log_start_offset, self._segments.first_base_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self._recovery_point = max(self._recovery_point, self.local_log_start_offset)
        self._segments.delete_segments(doomed, self._tp)
        return len(doomed)

    def advance_log_start_from_remote(self, offset: int) -> int:
        """Move the log start offset up to `offset` (remote segments expired by the total
        retention); never past the high watermark. Returns the log start offset."""
        new_start = min(offset, self._high_watermark)
        if new_start > self._log_start_offset:
            self._log_start_offset = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)
        return self._log_start_offset

    def lower_tiered_log_start(self, offset: int) -> None:
        """A tiered follower that started at its leader's local log start takes the leader's
        lower log start offset (the records between are in the remote store). A no-op for
        logs without remote.storage.enable."""
        if self._config.remote_storage_enable and 0 <= offset < self._log_start_offset:
            self._log_start_offset = offset

    def _delete_prefix(self, count: int) -> int:
        """Delete the `count` oldest segments (never the active one) and move the log start
        offset to the new first segment if it was below it."""
        doomed = self._segments.remove_prefix(count)
        if not doomed:
            return 0
        self._log_start_offset = max(self._log_start_offset, self._segments.first_base_offset)
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self._high_watermark = max(self._high_watermark, self._log_start_offset)
        self._recovery_point = max(self._recovery_point, self._log_start_offset)
        self._segments.delete_segments(doomed, self._tp)
        return len(doomed)

    def replace_segments(self, old: Sequence[LogSegment], sizes: Sequence[int]) -> bool:
        """Swap in the cleaned segment the log cleaner wrote for `old` (`segment_swap.py`).
        False, and the cleaned files discarded, when `old` changed meanwhile: no longer
        consecutive inactive segments of this log, or a size not in `sizes` (truncated)."""
        if self._closed or not self._segments.can_replace(old, sizes):
            discard_cleaned(self._dir, old[0].base_offset)
            return False
        new = install_cleaned(self._dir, old, self._config, self._clock.time_ms())
        self._segments.replace(old, new)
        return True

    # -- truncation (replication) -----------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding an offset >= `offset` (a follower diverging from its
        leader). Whole batches only, so the log end offset may end up below `offset` if it
        falls inside a batch. Returns False when there was nothing to remove."""
        self._check_open()
        if offset < 0:
            raise RiverlogError(f"cannot truncate to {offset}", ErrorCode.INVALID_OFFSET)
        if offset >= self.log_end_offset:
            return False
        if offset <= self._segments.first_base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self._segments.truncate_to(offset, self._config.segment_index_bytes)
        log_end = self.log_end_offset
        self.leader_epoch_cache.truncate_from_end(log_end)
        self._log_start_offset = min(self._log_start_offset, log_end)
        self._high_watermark = min(self._high_watermark, log_end)
        self._recovery_point = min(self._recovery_point, log_end)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at `offset` (a follower far behind or ahead of
        its leader's log start)."""
        self._check_open()
        if offset < 0:
            raise RiverlogError(f"cannot start at {offset}", ErrorCode.INVALID_OFFSET)
        self._segments.delete_all()  # first: the new segment may reuse the file names
        self._segments.replace_all(self._new_segment(offset))
        self.leader_epoch_cache.clear()
        self._log_start_offset = offset
        self._high_watermark = offset
        self._recovery_point = min(self._recovery_point, offset)

    # -- durability and lifecycle -----------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets from the recovery point up to `offset` (the
        log end when None), and the directory when segments were created; then move the
        recovery point there. Between flushes the page cache and recovery protect the data."""
        self._check_open()
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        self._segments.flush_range(self._recovery_point, target)
        if self._dir_dirty:
            fsync_dir(self._dir)
            self._dir_dirty = False
        self._recovery_point = max(self._recovery_point, target)
        self.last_flush_ms = self._clock.time_ms()

    def update_config(self, config: LogConfig) -> None:
        """Use `config` from now on; index sizes and intervals apply to new segments."""
        self._config = config
        restored, self._checkpointed_log_start = self._checkpointed_log_start, None
        if config.remote_storage_enable and restored is not None:
            self._log_start_offset = min(self._log_start_offset, max(restored, 0))

    def close(self) -> None:
        """Flush, seal the indexes and release the files. Idempotent."""
        if self._closed:
            return
        for close_hook in self.on_close:
            close_hook()
        self.flush()
        for segment in self._segments:
            segment.close()
        self._closed = True

    def delete(self) -> None:
        """Remove the log and its directory (see `remove_log_dir`)."""
        if not self._closed:
            for segment in self._segments:
                segment.close()
            self._closed = True
        remove_log_dir(self._dir)

    def _check_open(self) -> None:
        if self._closed:
            raise RiverlogError(f"{self._tp}: the log is closed", ErrorCode.KAFKA_STORAGE_ERROR)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self._tp}, start={self._log_start_offset}, "
            f"hw={self._high_watermark}, end={self.log_end_offset}, "
            f"segments={len(self._segments)})"
        )
