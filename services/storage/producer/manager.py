"""Kafka's ProducerStateManager for one partition replica: producer id → epoch and last five
batches, kept in step with the log, checked by the leader before each append, snapshotted to
the partition directory and rebuilt from snapshot + log on load and after truncation.

The state always describes the log below `map_end_offset`. Appends move it forward (the leader
through `check_leader_append` / `on_leader_append`, a follower through `on_follower_append`);
loading and truncation rebuild it from the latest snapshot at or below the log end offset, then
replay the batch headers from there (never records). A snapshot is taken when the log rolls a
segment and when it closes cleanly; snapshots below the log's first segment are deleted then.
Producers whose last batch is older than producer.id.expiration.ms are forgotten, checked at
most every producer.id.expiration.check.interval.ms on the append path.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Final

from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.records.header import HEADER_SIZE, BatchHeader, parse_header

from ..log import AppendInfo, PartitionLog
from ..log.file_records import FileRecords
from .append_check import Duplicate, LeaderCheck, Payload, check_leader_append, read_headers
from .entry import BatchMetadata, ProducerStateEntry
from .snapshot import (
    CorruptSnapshotError,
    delete_snapshot,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_ID_EXPIRATION_MS: Final = 86_400_000  # Kafka's producer.id.expiration.ms
DEFAULT_EXPIRATION_CHECK_INTERVAL_MS: Final = 600_000
_SCAN_CHUNK = 64 * 1024


class ProducerStateManager:
    """One partition's producer state. Lifecycle: built with the partition's open log, which
    it loads from at once and whose roll/close hooks it registers; then appends, truncations
    and snapshots; dropped with the partition. Event-loop thread only."""

    def __init__(
        self,
        partition_log: PartitionLog,
        clock: Clock = SYSTEM_CLOCK,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        expiration_check_interval_ms: int = DEFAULT_EXPIRATION_CHECK_INTERVAL_MS,
    ) -> None:
        self._log = partition_log
        self._dir = partition_log.dir
        self._tp = partition_log.tp
        self._clock = clock
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._check_interval_ms = expiration_check_interval_ms
        self._next_expiration_check = clock.time_ms() + expiration_check_interval_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self.rebuild()
        # One manager per log: a replica stopped and hosted again gets a new one.
        partition_log.on_roll[:] = [h for h in partition_log.on_roll if not _ours(h)]
        partition_log.on_close[:] = [h for h in partition_log.on_close if not _ours(h)]
        partition_log.on_roll.append(self._on_roll)
        partition_log.on_close.append(self._on_close)

    # --- reading ------------------------------------------------------------------------------

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    # --- the append paths ---------------------------------------------------------------------

    def check_leader_append(self, payload: Payload) -> LeaderCheck:
        """Check a produce payload before the log appends it: raises INVALID_PRODUCER_EPOCH,
        OUT_OF_ORDER_SEQUENCE_NUMBER or DUPLICATE_SEQUENCE_NUMBER; `.duplicate` set means
        answer with it and append nothing. Nothing changes until `on_leader_append`."""
        now = self._clock.time_ms()
        if now >= self._next_expiration_check:
            self._next_expiration_check = now + self._check_interval_ms
            self.remove_expired(now)
        return check_leader_append(self._tp, payload, self._producers)

    def on_leader_append(self, check: LeaderCheck, info: AppendInfo) -> None:
        """The log appended the checked payload at `info.first_offset` onwards."""
        offset = info.first_offset
        for header in check.headers:
            last = offset + header.last_offset_delta
            if header.producer_id >= 0:
                timestamp = (
                    info.log_append_time_ms
                    if info.log_append_time_ms >= 0
                    else header.max_timestamp
                )
                self._update(header, offset, last, timestamp)
            offset = last + 1
        self.map_end_offset = max(self.map_end_offset, info.last_offset + 1)

    def on_follower_append(self, payload: Payload) -> None:
        """A follower appended `payload` (offsets assigned by the leader): update the state
        from its headers, unchecked (Kafka's replication origin)."""
        headers = read_headers(payload)
        if not headers:
            return
        for header in headers:
            self._apply(header)
        self.map_end_offset = max(self.map_end_offset, headers[-1].next_offset)

    @staticmethod
    def duplicate_info(duplicate: Duplicate) -> AppendInfo:
        """The AppendInfo to answer a duplicate with: the original offsets, nothing written."""
        return AppendInfo(
            first_offset=duplicate.first_offset,
            last_offset=duplicate.last_offset,
            log_append_time_ms=-1,
            max_timestamp=duplicate.max_timestamp,
            offset_of_max_timestamp=duplicate.last_offset,
            record_count=duplicate.record_count,
            batch_count=duplicate.batch_count,
            valid_bytes=0,
        )

    def _apply(self, header: BatchHeader) -> None:
        if header.producer_id >= 0:
            self._update(header, header.base_offset, header.last_offset, header.max_timestamp)

    def _update(self, header: BatchHeader, first: int, last: int, timestamp: int) -> None:
        pid = header.producer_id
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = ProducerStateEntry(pid)
        meta = BatchMetadata(header.base_sequence, header.last_sequence, first, last, timestamp)
        entry.add_batch(header.producer_epoch, meta)

    # --- expiry -------------------------------------------------------------------------------

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers whose last batch is older than producer.id.expiration.ms."""
        limit = now_ms - self.producer_id_expiration_ms
        doomed = [pid for pid, e in self._producers.items() if e.last_timestamp <= limit]
        for pid in doomed:
            del self._producers[pid]
        if doomed:
            log.info("%s: expired %d producer id(s)", self._tp, len(doomed))
        return len(doomed)

    # --- snapshots, loading, truncation -------------------------------------------------------

    def take_snapshot(self) -> int | None:
        """Write the state at `map_end_offset` (when it matches the log end offset, i.e. the
        state is complete) and delete snapshots below the log's first segment. Returns the
        snapshot's offset, or None when none was written."""
        offset = self.map_end_offset
        if offset != self._log.log_end_offset:
            log.warning(
                "%s: producer state at %d behind the log end %d; no snapshot",
                self._tp,
                offset,
                self._log.log_end_offset,
            )
            return None
        write_snapshot(self._dir, offset, self._producers.values())
        self.delete_snapshots_before(self._log.segments[0].base_offset)
        return offset

    def delete_snapshots_before(self, offset: int) -> None:
        for old in list_snapshots(self._dir):
            if old < offset:
                delete_snapshot(self._dir, old)

    def _on_roll(self, new_base_offset: int) -> None:
        if self.map_end_offset == new_base_offset:
            try:
                self.take_snapshot()
            except OSError as exc:
                log.error("%s: producer snapshot at %d failed: %s", self._tp, new_base_offset, exc)

    def _on_close(self) -> None:
        try:
            self.take_snapshot()
        except OSError as exc:
            log.error("%s: producer snapshot at close failed: %s", self._tp, exc)

    def rebuild(self) -> None:
        """Load the state for the log as it is: the latest intact snapshot at or below the log
        end offset (later or corrupt ones are deleted), then the batch headers from there."""
        end = self._log.log_end_offset
        self._producers = {}
        start = self._log.segments[0].base_offset
        for offset in reversed(list_snapshots(self._dir)):
            if offset > end:
                delete_snapshot(self._dir, offset)
                continue
            try:
                entries = read_snapshot(self._dir, offset)
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("%s: snapshot %d not used (%s); deleting it", self._tp, offset, exc)
                delete_snapshot(self._dir, offset)
                continue
            self._producers = {e.producer_id: e for e in entries}
            start = max(offset, start)
            break
        replayed = 0
        for header in self._headers_from(start):
            self._apply(header)
            replayed += 1
        self.map_end_offset = end
        if self._producers or replayed:
            log.info(
                "%s: producer state of %d producer(s) loaded (replayed %d batch(es) from %d)",
                self._tp,
                len(self._producers),
                replayed,
                start,
            )

    def truncate_to(self, offset: int) -> None:
        """After the log was truncated to `offset` (a follower diverging from its leader):
        drop the snapshots above it and rebuild from the nearest one at or below it."""
        for old in list_snapshots(self._dir):
            if old > offset:
                delete_snapshot(self._dir, old)
        self.rebuild()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """After the log restarted empty at `offset`: no producer is known any more."""
        for old in list_snapshots(self._dir):
            delete_snapshot(self._dir, old)
        self._producers = {}
        self.map_end_offset = offset

    def _headers_from(self, start: int) -> Iterator[BatchHeader]:
        """Headers of the stored batches whose last offset is >= `start`."""
        for segment in self._log.segments:
            if segment.next_offset <= start:
                continue
            position = 0
            if start > segment.base_offset:
                found = segment.translate_offset(start)
                if found is None:
                    continue
                position = found.position
            yield from _scan_headers(segment.log, position)


def _ours(hook: object) -> bool:
    """Whether `hook` is a bound method of a ProducerStateManager."""
    return isinstance(getattr(hook, "__self__", None), ProducerStateManager)


def _scan_headers(records: FileRecords, position: int) -> Iterator[BatchHeader]:
    """Full headers of the batches of a segment file from `position`, read in chunks."""
    end = records.size
    buf, buf_start = b"", position
    while position + HEADER_SIZE <= end:
        rel = position - buf_start
        if rel + HEADER_SIZE > len(buf):
            buf, buf_start, rel = records.read(position, _SCAN_CHUNK), position, 0
            if len(buf) < HEADER_SIZE:
                return
        header = parse_header(buf, rel)
        if header.size < HEADER_SIZE or position + header.size > end:
            return
        yield header
        position += header.size
