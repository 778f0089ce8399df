"""The remote log metadata of every partition, kept durably in the remote store next to the
segments it describes (Kafka's RemoteLogMetadataManager; decision 0039 says why there and not in
etcd or an internal topic).

Layout: `<topic>-<partition>/metadata/<sequence, 20 digits>.json`, one record per object
(`metadata_log.py`), created with `put_if_absent` so each sequence number has exactly one
record, and `metadata/snapshot-<sequence>.json`, the compacted state below a sequence number
(`metadata_compaction.py`). A replica loads a partition's log once (listing it, starting from
the newest snapshot) and then reads forward from its next sequence number. A write that finds
its sequence number taken reads what was written there and tries again on the new state, unless
a newer leader epoch wrote it: then it raises FENCED_LEADER_EPOCH and the caller stops acting
as leader for that partition. A write that succeeds below a snapshot (the name was free only
because a compaction had deleted the record there) is void: it is dropped and the log replayed
anew, so an old leader cannot slip a record in behind the compaction. A log whose beginning
the store lost (records gone that no snapshot covers: a bucket emptied or recreated) is a
clear error, RemoteLogMetadataLostError, both to a replica loading it and to a leader about to
write on from memory: nothing is built on a log no one could load again.
"""

from __future__ import annotations

import logging
import time

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from .metadata_compaction import (
    SNAPSHOT_PREFIX,
    MetadataObject,
    compaction_due,
    latest_snapshot,
    parse_names,
    snapshot_from_bytes,
    snapshot_to_bytes,
    superseded,
)
from .metadata_log import MetadataRecord, RemotePartitionMetadata
from .segment_metadata import IllegalStateTransition, RemoteLogSegmentMetadata
from .storage import RemoteStorageError, RemoteStorageManager

log = logging.getLogger(__name__)

METADATA_DIR = "metadata"
# How many times a write re-reads and retries after losing its sequence number to another
# writer of the same or an older epoch before giving up (each loss means progress elsewhere).
MAX_RACES = 100
# How often a replica that only reads forward also lists, to notice a compaction that deleted
# the record it waits for (the remote log manager passes ten task intervals).
DEFAULT_RELIST_INTERVAL_S = 300.0


def metadata_prefix(tp: TopicPartition) -> str:
    return f"{tp}/{METADATA_DIR}/"


def record_name(tp: TopicPartition, seq: int) -> str:
    return f"{metadata_prefix(tp)}{seq:020d}.json"


def snapshot_name(tp: TopicPartition, seq: int) -> str:
    return f"{metadata_prefix(tp)}{SNAPSHOT_PREFIX}{seq:020d}.json"


class RemoteLogMetadataManager:
    """Owns the replayed metadata of the partitions this node has loaded. Lifecycle: construct
    with the node's store → `load` a partition when this node becomes its leader or needs its
    remote segments → `start_epoch` (leaders) → `add` / `update` segment changes → `forget`
    when the replica goes, `delete_partition` when the topic goes.

    Coroutines on the storage node's event loop; calls for one partition must not overlap
    (the remote log manager runs one task per partition), calls for different partitions may.
    """

    def __init__(
        self, store: RemoteStorageManager, relist_interval_s: float = DEFAULT_RELIST_INTERVAL_S
    ) -> None:
        self._store = store
        self._states: dict[TopicPartition, RemotePartitionMetadata] = {}
        # The sequence number of the newest snapshot known per partition (0: none), and when
        # `refresh` last listed the partition's metadata (a compaction may have skipped it).
        self._snapshot_seq: dict[TopicPartition, int] = {}
        self._listed_at: dict[TopicPartition, float] = {}
        self._relist_interval_s = relist_interval_s

    def state(self, tp: TopicPartition) -> RemotePartitionMetadata | None:
        """The last replayed state (None: not loaded). Cheap: for reads on the fetch path."""
        return self._states.get(tp)

    async def load(self, tp: TopicPartition) -> RemotePartitionMetadata:
        """Replay the partition's metadata log from its newest snapshot (from the listing),
        then anything written since; replaces what was loaded before. A compaction deleting
        what the listing showed makes it list again."""
        previous: list[MetadataObject] | None = None
        for _ in range(MAX_RACES):
            objects = parse_names(
                metadata_prefix(tp), await self._store.list_objects(metadata_prefix(tp))
            )
            self._listed_at[tp] = time.monotonic()
            state = RemotePartitionMetadata()
            snapshot = latest_snapshot(objects)
            if snapshot is not None:
                data = await self._store.get_object(snapshot.name)
                if data is None:
                    continue  # a newer compaction removed it: list again
                state = snapshot_from_bytes(data)
            state = await self._read_forward(tp, state)
            if any(not o.snapshot and o.seq >= state.next_seq for o in objects):
                if objects == previous:
                    raise _lost(tp, state.next_seq, objects)
                previous = objects
                continue  # a record listed was deleted before it was read: list again
            self._states[tp] = state
            self._snapshot_seq[tp] = snapshot.seq if snapshot is not None else 0
            return state
        raise RiverlogError(
            f"{tp}: the metadata log changed under {MAX_RACES} listings",
            ErrorCode.KAFKA_STORAGE_ERROR,
        )

    async def refresh(self, tp: TopicPartition) -> RemotePartitionMetadata:
        """Read the records written since the last load or refresh (followers and readers);
        at most every relist interval, also list, and reload when a compaction went past
        where this replica had read (the next record would never appear)."""
        state = self._states.get(tp)
        if state is None:
            return await self.load(tp)
        state = await self._read_forward(tp, state)
        self._states[tp] = state
        if time.monotonic() - self._listed_at.get(tp, 0.0) >= self._relist_interval_s:
            objects = parse_names(
                metadata_prefix(tp), await self._store.list_objects(metadata_prefix(tp))
            )
            self._listed_at[tp] = time.monotonic()
            snapshot = latest_snapshot(objects)
            if snapshot is not None and snapshot.seq > state.next_seq:
                return await self.load(tp)
        return state

    async def compact(self, tp: TopicPartition, leader_epoch: int, interval_records: int) -> int:
        """As the leader of `leader_epoch`: once `interval_records` records were written since
        the last snapshot, write the state as a snapshot, then delete the records and
        snapshots below it (`metadata_compaction.py`). Returns how many objects went."""
        state = self._states.get(tp)
        if state is None or state.leader_epoch != leader_epoch:
            return 0
        done = self._snapshot_seq.get(tp, 0)
        if not compaction_due(state.next_seq, done, interval_records):
            return 0
        seq = state.next_seq
        await self._store.put_if_absent(
            snapshot_name(tp, seq), snapshot_to_bytes(state, leader_epoch)
        )
        self._snapshot_seq[tp] = seq
        objects = parse_names(
            metadata_prefix(tp), await self._store.list_objects(metadata_prefix(tp))
        )
        doomed = superseded(objects, seq)
        await self._store.delete_objects(doomed)
        log.info("%s: remote log metadata compacted at %d (%d objects)", tp, seq, len(doomed))
        return len(doomed)

    async def _read_forward(
        self, tp: TopicPartition, state: RemotePartitionMetadata
    ) -> RemotePartitionMetadata:
        while True:
            data = await self._store.get_object(record_name(tp, state.next_seq))
            if data is None:
                return state
            state = state.apply(MetadataRecord.from_bytes(data))

    async def start_epoch(self, tp: TopicPartition, leader_epoch: int) -> RemotePartitionMetadata:
        """Record that the leader of `leader_epoch` took over: from now on no older leader's
        record counts (nothing is written when the log already has this epoch). Then remove
        what a writer killed mid-write left in the partition's metadata (the directory store's
        temporary files): every earlier writer is fenced now, so none of it is still wanted."""
        state = self._states.get(tp) or await self.load(tp)
        if state.leader_epoch != leader_epoch:
            state = await self._append(tp, MetadataRecord(leader_epoch))
        removed = await self._store.delete_incomplete_objects(metadata_prefix(tp))
        if removed:
            log.info("%s: removed %d metadata writes a killed writer left unfinished", tp, removed)
        return state

    async def add(self, metadata: RemoteLogSegmentMetadata) -> RemotePartitionMetadata:
        """Record a new segment (COPY_SEGMENT_STARTED) or a change of a known one, as the
        leader of `metadata.event_leader_epoch`. Raises FENCED_LEADER_EPOCH when a newer leader
        has written, and IllegalStateTransition for a move the state machine refuses."""
        return await self._append(
            metadata.segment_id.tp, MetadataRecord(metadata.event_leader_epoch, metadata)
        )

    update = add

    async def _append(self, tp: TopicPartition, record: MetadataRecord) -> RemotePartitionMetadata:
        state = self._states.get(tp) or await self.load(tp)
        for _ in range(MAX_RACES):
            if record.leader_epoch < state.leader_epoch:
                raise RiverlogError(
                    f"{tp}: remote log metadata is written by leader epoch {state.leader_epoch}; "
                    f"epoch {record.leader_epoch} is fenced",
                    ErrorCode.FENCED_LEADER_EPOCH,
                )
            reason = state.rejection(record)
            if reason is not None:
                raise IllegalStateTransition(f"{tp}: {reason}")
            name = record_name(tp, state.next_seq)
            if await self._store.put_if_absent(name, record.to_bytes()):
                objects = parse_names(
                    metadata_prefix(tp), await self._store.list_objects(metadata_prefix(tp))
                )
                newest = latest_snapshot(objects)
                if newest is not None and newest.seq > state.next_seq:
                    # The name was free because a compaction had deleted the record there:
                    # ours is below a snapshot, read by no one. Drop it and replay anew (an
                    # older leader is fenced by the snapshot's epoch). (A snapshot is written
                    # before the records below it are deleted, so one listing after the
                    # create tells; one LIST per write, a few writes per copied segment.)
                    await self._store.delete_objects([name])
                    state = await self.load(tp)
                    continue
                if not self._intact(tp, objects):
                    # What this replica replayed is gone from the store (a bucket emptied or
                    # recreated): a record here would start a log no one can load. Nothing is
                    # written until someone repairs the store; the caller keeps local data.
                    await self._store.delete_objects([name])
                    first = min(o.seq for o in objects)
                    raise RemoteLogMetadataLostError(
                        f"{tp}: the remote log metadata lost its records below {first} (the "
                        "store no longer has them and no snapshot covers them); nothing more "
                        "is written to it"
                    )
                state = state.apply(record)
                self._states[tp] = state
                return state
            state = await self._read_forward(tp, state)
            self._states[tp] = state
        raise RiverlogError(
            f"{tp}: lost the race for the metadata log {MAX_RACES} times",
            ErrorCode.KAFKA_STORAGE_ERROR,
        )

    def _intact(self, tp: TopicPartition, objects: list[MetadataObject]) -> bool:
        """Whether the listing still holds where this replica's replay began: the snapshot
        it loaded (or a newer one), or, with none, the first record."""
        known = self._snapshot_seq.get(tp, 0)
        if any(o.snapshot and o.seq >= known for o in objects):
            return True
        return known == 0 and any(o.seq == 0 for o in objects)

    def forget(self, tp: TopicPartition) -> None:
        self._states.pop(tp, None)
        self._snapshot_seq.pop(tp, None)
        self._listed_at.pop(tp, None)

    async def delete_partition(self, tp: TopicPartition) -> int:
        """Remove every object of the partition, data and metadata (topic deletion); returns
        how many. The data goes first, so a crash half-way leaves metadata naming missing
        segments (readers get a clear error) rather than data that no metadata names."""
        names = await self._store.list_objects(f"{tp}/")
        data = [n for n in names if not n.startswith(metadata_prefix(tp))]
        await self._store.delete_objects(data)
        await self._store.delete_objects([n for n in names if n.startswith(metadata_prefix(tp))])
        self.forget(tp)
        return len(names)


class RemoteLogMetadataLostError(RemoteStorageError):
    """The partition's metadata log lost records no snapshot covers: the store lost objects
    (a bucket emptied or recreated). Readers of the remote tier get it as KAFKA_STORAGE_ERROR;
    the leader's copy task backs off and keeps local data, as for a store that is down."""


def _lost(
    tp: TopicPartition, missing: int, objects: list[MetadataObject]
) -> RemoteLogMetadataLostError:
    """The metadata log has a hole that no compaction explains: two listings alike show records
    after `missing` but neither it nor a snapshot above it (a compaction writes its snapshot
    before deleting below it). The store lost objects, e.g. a bucket emptied or recreated:
    the segments those records named cannot be found, so the partition's remote tier is not
    served (a clear error, never a guess at what the lost records said)."""
    after = min(o.seq for o in objects if not o.snapshot and o.seq >= missing)
    return RemoteLogMetadataLostError(
        f"{tp}: the remote log metadata lost records {missing}..{after - 1} (the store no "
        f"longer has them and no snapshot covers them); its remote segments are unreadable"
    )
