"""What a follower needs from the remote tier before it starts its log at the leader's local
log start (Kafka's ReplicaFetcherTierStateMachine / buildRemoteLogAuxState, KIP-405).

A follower told OFFSET_MOVED_TO_TIERED_STORAGE copies only the leader's local tail; the
records below are in the remote store. Had it started empty, it would know no producer (a
retried batch of an idempotent producer would be written twice once it leads, and a sequence
gap accepted) and no leader epoch below its start (OffsetsForLeaderEpoch for an older epoch
would answer wrong). So first it reads the remote segment holding the offset just below the
leader's local start, downloads that segment's producer snapshot and leader-epoch checkpoint,
and starts its log at that segment's next offset with both installed. The next offset is at
or below the leader's local start (local retention deletes only copied segments), so the
fetch from there is served locally by the leader.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from riverlog.common.types import TopicPartition

from ..log.checkpoint import CorruptCheckpointError
from ..log.leader_epoch_cache import epoch_checkpoint
from .metadata_manager import RemoteLogMetadataManager
from .segment_metadata import RemoteLogSegmentMetadata
from .storage import IndexType, RemoteResourceNotFoundError, RemoteStorageManager

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RemoteLogAuxState:
    """Where the follower's log starts, the leader epochs (epoch, start offset) of everything
    below it, and the producer snapshot bytes as of that offset (None: the segment was copied
    without one, so no producer is known)."""

    next_offset: int
    epochs: tuple[tuple[int, int], ...]
    producer_snapshot: bytes | None


def parse_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """The entries of a remote segment's `leader-epoch-checkpoint` object, parsed as the
    local file is (leader_epoch_cache.py); ValueError for anything else."""
    checkpoint = epoch_checkpoint(Path(IndexType.LEADER_EPOCH.value))
    try:
        return [(e.epoch, e.start_offset) for e in checkpoint.parse(data)]
    except CorruptCheckpointError as exc:
        raise ValueError(exc.message) from None


def merged_epochs(
    segments: Iterable[RemoteLogSegmentMetadata],
    checkpoint: Iterable[tuple[int, int]],
    next_offset: int,
) -> tuple[tuple[int, int], ...]:
    """The epoch entries below `next_offset`: each epoch's first offset over the remote
    segments' metadata and the downloaded checkpoint; where an older epoch would start at or
    after a newer one, the newer wins (the cache's rule for `assign`)."""
    first: dict[int, int] = {}
    pairs = [(e, o) for s in segments for e, o in s.segment_leader_epochs.items()]
    for epoch, start in [*pairs, *checkpoint]:
        if start < next_offset and (epoch not in first or start < first[epoch]):
            first[epoch] = start
    out: list[tuple[int, int]] = []
    for epoch, start in sorted(first.items()):
        while out and out[-1][1] >= start:
            out.pop()  # a newer epoch starting earlier wins, as in the cache's assign
        out.append((epoch, start))
    return tuple(out)


async def fetch_aux_state(
    metadata: RemoteLogMetadataManager,
    store: RemoteStorageManager,
    tp: TopicPartition,
    leader_local_start: int,
) -> RemoteLogAuxState | None:
    """The state below `leader_local_start` from the remote tier; None when no finished remote
    segment holds the offset below it (nothing was tiered there: start empty as before).
    Raises RemoteStorageError when the store fails (the caller backs off and asks again)."""
    state = await metadata.refresh(tp)
    segment = state.segment_for(leader_local_start - 1) if leader_local_start > 0 else None
    if segment is None:
        return None
    try:
        checkpoint = parse_epoch_checkpoint(
            await store.fetch_index(segment.segment_id, IndexType.LEADER_EPOCH)
        )
    except ValueError as exc:  # the segments' metadata still name their epochs
        log.error("%s: leader-epoch checkpoint of %s unreadable: %s", tp, segment.segment_id, exc)
        checkpoint = []
    try:
        snapshot: bytes | None = await store.fetch_index(
            segment.segment_id, IndexType.PRODUCER_SNAPSHOT
        )
    except RemoteResourceNotFoundError:
        log.warning("%s: remote segment %s has no producer snapshot", tp, segment.segment_id)
        snapshot = None
    below = [s for s in state.readable_segments() if s.start_offset <= segment.start_offset]
    epochs = merged_epochs(below, checkpoint, segment.next_offset)
    return RemoteLogAuxState(segment.next_offset, epochs, snapshot)
