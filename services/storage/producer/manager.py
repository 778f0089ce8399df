"""Kafka's ProducerStateManager for one partition replica: producer id → epoch and last five
batches, kept in step with the log, checked by the leader before each append, snapshotted to
the partition directory and rebuilt from snapshot + log on load and after truncation.

The state always describes the log below `map_end_offset`. Appends move it forward (the leader
through `check_leader_append` / `on_leader_append`, a follower through `on_follower_append`);
loading and truncation rebuild it from the latest snapshot at or below the log end offset, then
replay the batch headers from there (never records). A snapshot is taken when the log rolls a
segment and when it closes cleanly; snapshots below the log's first segment are deleted then.
Producers whose last batch is older than producer.id.expiration.ms are forgotten, checked at
most every producer.id.expiration.check.interval.ms on the append path, unless a transaction
of theirs is open.

Transactions (KIP-98): a producer's first transactional batch opens its transaction, its
marker completes it (`transactions.py` keeps the open ones and the first unstable offset); an
ABORT marker adds the transaction to the .txnindex of the marker's segment. The open
transaction's first offset is in the snapshot, so a restart finds it; after recovery the
replay also rebuilds the .txnindex entries of the recovered segments (`txn_index_rebuild_from`
of the log), replaying from a snapshot at or below that point.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Final

from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.control import ControlRecordType, EndTxnMarker
from riverlog.common.records.header import HEADER_SIZE, BatchHeader, parse_header

from ..log import AppendInfo, PartitionLog
from ..log.file_records import FileRecords
from ..log.txn_index import AbortedTxn
from .append_check import (
    Duplicate,
    LeaderCheck,
    Payload,
    check_leader_append,
    read_headers,
    read_marker,
)
from .entry import NO_OFFSET, BatchMetadata, ProducerStateEntry
from .snapshot import (
    CorruptSnapshotError,
    decode,
    delete_snapshot,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)
from .transactions import OngoingTxns
from .verification import (
    VerificationGuard,
    VerificationNeeded,
    guard_valid,
    verification_needed,
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
        self._txns = OngoingTxns()
        # KIP-890: the verification in flight per producer (Kafka's VerificationGuard); a
        # marker for the producer, or its transaction starting here, removes it.
        self._guards: dict[int, VerificationGuard] = {}
        # Aborted transactions whose marker is at or after this offset are indexed as they are
        # applied: every one on the append paths, the recovered segments' ones on a replay.
        self._index_from: int | None = 0
        self.map_end_offset = 0
        self.rebuild()
        # One manager per log: a replica stopped and hosted again gets a new one.
        partition_log.on_roll[:] = [h for h in partition_log.on_roll if not _ours(h)]
        partition_log.on_close[:] = [h for h in partition_log.on_close if not _ours(h)]
        partition_log.on_roll.append(self._on_roll)
        partition_log.on_close.append(self._on_close)
        partition_log.first_unstable_offset = self._first_unstable_for_retention
        partition_log.producer_state_loaded = True

    def _first_unstable_for_retention(self) -> int | None:
        return self._txns.first_unstable_offset(self._log.high_watermark)

    # --- reading ------------------------------------------------------------------------------

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        return self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def ongoing_txns(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction."""
        return self._txns.ongoing

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction not yet stable (open, or its marker not
        below `high_watermark`); None when every transaction is stable."""
        return self._txns.first_unstable_offset(high_watermark)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: min(first unstable offset, high watermark)."""
        return self._txns.last_stable_offset(high_watermark)

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

    # --- KIP-890 verification -----------------------------------------------------------------

    def verification_needed(self, payload: Payload) -> VerificationNeeded | None:
        """The producer whose transactional batch needs the coordinator's verification
        before this payload is appended (no transaction open here at that epoch), or None."""
        headers = read_headers(payload)
        return verification_needed(headers, self._producers) if headers else None

    def verification_guard(self, needed: VerificationNeeded) -> VerificationGuard:
        """The guard a verification starts with: the producer's current one if it is for the
        same epoch (verifications of one producer share it), else a new one."""
        guard = self._guards.get(needed.producer_id)
        if guard is None or guard.producer_epoch != needed.producer_epoch:
            guard = self._guards[needed.producer_id] = VerificationGuard(
                needed.producer_id, needed.producer_epoch
            )
        return guard

    def check_verified(self, check: LeaderCheck, guard: VerificationGuard | None) -> None:
        """Raise INVALID_TXN_STATE when the checked payload still needs a verification and
        `guard` is not the producer's current one (never verified, or a marker arrived while
        the verification was in flight)."""
        needed = verification_needed(check.headers, self._producers)
        current = self._guards.get(needed.producer_id) if needed is not None else None
        if not guard_valid(needed, guard, current):
            assert needed is not None
            raise RiverlogError(
                f"{self._tp}: producer {needed.producer_id} (epoch {needed.producer_epoch}) has "
                "no verified ongoing transaction at this partition",
                ErrorCode.INVALID_TXN_STATE,
            )

    def on_leader_append(self, check: LeaderCheck, info: AppendInfo) -> None:
        """The log appended the checked payload at `info.first_offset` onwards."""
        offset = info.first_offset
        for i, header in enumerate(check.headers):
            last = offset + header.last_offset_delta
            if header.producer_id >= 0:
                timestamp = (
                    info.log_append_time_ms
                    if info.log_append_time_ms >= 0
                    else header.max_timestamp
                )
                self._update(header, offset, last, timestamp, check.markers.get(i))
            offset = last + 1
        self.map_end_offset = max(self.map_end_offset, info.last_offset + 1)

    def on_follower_append(self, payload: Payload) -> None:
        """A follower appended `payload` (offsets assigned by the leader): update the state
        from its headers, unchecked (Kafka's replication origin)."""
        headers = read_headers(payload)
        if not headers:
            return
        position = 0
        for header in headers:
            marker = read_marker(payload, position) if header.is_control else None
            self._apply(header, marker)
            position += header.size
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

    def _apply(self, header: BatchHeader, marker: EndTxnMarker | None) -> None:
        if header.producer_id >= 0:
            self._update(
                header, header.base_offset, header.last_offset, header.max_timestamp, marker
            )

    def _update(
        self,
        header: BatchHeader,
        first: int,
        last: int,
        timestamp: int,
        marker: EndTxnMarker | None,
    ) -> None:
        pid = header.producer_id
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = ProducerStateEntry(pid)
        if header.is_control:
            self._guards.pop(pid, None)
            if marker is not None:
                self._complete_txn(entry, first, marker)
        elif header.is_transactional and entry.current_txn_first_offset == NO_OFFSET:
            self._guards.pop(pid, None)
            entry.current_txn_first_offset = first
            self._txns.begin(pid, first)
        meta = BatchMetadata(header.base_sequence, header.last_sequence, first, last, timestamp)
        entry.add_batch(header.producer_epoch, meta)

    def _complete_txn(self, entry: ProducerStateEntry, offset: int, marker: EndTxnMarker) -> None:
        """The marker at `offset` ends the producer's open transaction (if any); an abort is
        indexed in the marker's segment (Kafka's UnifiedLog.append → updateTxnIndex)."""
        aborted = marker.control_type is ControlRecordType.ABORT
        done = self._txns.complete(entry.producer_id, offset, aborted)
        entry.current_txn_first_offset = NO_OFFSET
        entry.coordinator_epoch = marker.coordinator_epoch
        if done is None or not done.is_aborted:
            return
        if self._index_from is not None and offset >= self._index_from:
            self._log.append_aborted_txn(
                AbortedTxn(done.producer_id, done.first_offset, offset, done.last_stable_offset)
            )

    # --- expiry -------------------------------------------------------------------------------

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers whose last batch is older than producer.id.expiration.ms."""
        limit = now_ms - self.producer_id_expiration_ms
        doomed = [
            pid
            for pid, e in self._producers.items()
            if e.last_timestamp <= limit and e.current_txn_first_offset == NO_OFFSET
        ]
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
        self._txns.clear()
        self._guards.clear()
        start = self._log.segments[0].base_offset
        # Recovery emptied the .txnindex from here on: replay from a snapshot at or below it.
        rebuild_from = self._log.txn_index_rebuild_from
        self._index_from = rebuild_from
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
            if rebuild_from is not None and offset > rebuild_from:
                continue  # intact, but the replay must start below the recovered segments
            self._producers = {e.producer_id: e for e in entries}
            for e in entries:
                if e.current_txn_first_offset != NO_OFFSET:
                    self._txns.begin(e.producer_id, e.current_txn_first_offset)
            start = max(offset, start)
            break
        replayed = 0
        for header, marker in self._headers_from(start):
            self._apply(header, marker)
            replayed += 1
        self._index_from = 0
        self._log.txn_index_rebuild_from = None
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

    def install_snapshot(self, offset: int, data: bytes) -> None:
        """Tiered storage: the follower's log restarted empty at `offset`; take the producer
        state its leader snapshotted there, downloaded from the remote tier (`data`, a snapshot
        file's bytes), so that as leader it still knows every producer's sequences and open
        transaction. Raises CorruptSnapshotError (the state stays empty)."""
        entries = decode(data)
        write_snapshot(self._dir, offset, entries)
        self.rebuild()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """After the log restarted empty at `offset`: no producer is known any more."""
        for old in list_snapshots(self._dir):
            delete_snapshot(self._dir, old)
        self._producers = {}
        self._txns.clear()
        self._guards.clear()
        self.map_end_offset = offset

    def _headers_from(self, start: int) -> Iterator[tuple[BatchHeader, EndTxnMarker | None]]:
        """Headers of the stored batches whose last offset is >= `start`, each marker's with
        what it says."""
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


def _scan_headers(
    records: FileRecords, position: int
) -> Iterator[tuple[BatchHeader, EndTxnMarker | None]]:
    """Full headers of the batches of a segment file from `position`, read in chunks; a
    marker's batch (a few dozen bytes) is read whole for its type."""
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
        marker = None
        if header.is_control and header.producer_id >= 0:
            marker = read_marker(records.read(position, header.size), 0)
        yield header, marker
        position += header.size
