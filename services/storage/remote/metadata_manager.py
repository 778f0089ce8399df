"""The remote log metadata of every partition, kept durably in the remote store next to the
segments it describes (Kafka's RemoteLogMetadataManager; decision 0039 says why there and not in
etcd or an internal topic).

Layout: `<topic>-<partition>/metadata/<sequence, 20 digits>.json`, one record per object
(`metadata_log.py`), created with `put_if_absent` so each sequence number has exactly one
record. A replica loads a partition's log once (listing it) and then only reads forward from
its next sequence number. A write that finds its sequence number taken reads what was written
there and tries again on the new state, unless a newer leader epoch wrote it: then it raises
FENCED_LEADER_EPOCH and the caller stops acting as leader for that partition.
"""

from __future__ import annotations

import logging

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from .metadata_log import MetadataRecord, RemotePartitionMetadata
from .segment_metadata import IllegalStateTransition, RemoteLogSegmentMetadata
from .storage import RemoteStorageManager

log = logging.getLogger(__name__)

METADATA_DIR = "metadata"
# How many times a write re-reads and retries after losing its sequence number to another
# writer of the same or an older epoch before giving up (each loss means progress elsewhere).
MAX_RACES = 100


def metadata_prefix(tp: TopicPartition) -> str:
    return f"{tp}/{METADATA_DIR}/"


def record_name(tp: TopicPartition, seq: int) -> str:
    return f"{metadata_prefix(tp)}{seq:020d}.json"


class RemoteLogMetadataManager:
    """Owns the replayed metadata of the partitions this node has loaded. Lifecycle: construct
    with the node's store → `load` a partition when this node becomes its leader or needs its
    remote segments → `start_epoch` (leaders) → `add` / `update` segment changes → `forget`
    when the replica goes, `delete_partition` when the topic goes.

    Coroutines on the storage node's event loop; calls for one partition must not overlap
    (the remote log manager runs one task per partition), calls for different partitions may.
    """

    def __init__(self, store: RemoteStorageManager) -> None:
        self._store = store
        self._states: dict[TopicPartition, RemotePartitionMetadata] = {}

    def state(self, tp: TopicPartition) -> RemotePartitionMetadata | None:
        """The last replayed state (None: not loaded). Cheap: for reads on the fetch path."""
        return self._states.get(tp)

    async def load(self, tp: TopicPartition) -> RemotePartitionMetadata:
        """Replay the partition's whole metadata log (from the listing), then anything written
        since; replaces what was loaded before."""
        names = await self._store.list_objects(metadata_prefix(tp))
        state = RemotePartitionMetadata()
        for name in names:
            expected = record_name(tp, state.next_seq)
            if name != expected:
                log.warning("%s: unexpected metadata object %s (expected %s)", tp, name, expected)
                break
            data = await self._store.get_object(name)
            if data is None:  # deleted under us: the partition is being deleted
                break
            state = state.apply(MetadataRecord.from_bytes(data))
        state = await self._read_forward(tp, state)
        self._states[tp] = state
        return state

    async def refresh(self, tp: TopicPartition) -> RemotePartitionMetadata:
        """Read the records written since the last load or refresh (followers and readers)."""
        state = self._states.get(tp)
        if state is None:
            return await self.load(tp)
        state = await self._read_forward(tp, state)
        self._states[tp] = state
        return state

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
        record counts. A no-op when the log already has this epoch."""
        state = self._states.get(tp) or await self.load(tp)
        if state.leader_epoch == leader_epoch:
            return state
        return await self._append(tp, MetadataRecord(leader_epoch))

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
            if await self._store.put_if_absent(record_name(tp, state.next_seq), record.to_bytes()):
                state = state.apply(record)
                self._states[tp] = state
                return state
            state = await self._read_forward(tp, state)
            self._states[tp] = state
        raise RiverlogError(
            f"{tp}: lost the race for the metadata log {MAX_RACES} times",
            ErrorCode.KAFKA_STORAGE_ERROR,
        )

    def forget(self, tp: TopicPartition) -> None:
        self._states.pop(tp, None)

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
