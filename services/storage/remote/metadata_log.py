"""The remote log metadata of one partition as a log of fenced records, and its replay: pure
values and functions, no I/O (the manager in `metadata_manager.py` reads and writes the log).

Every change of a remote segment's metadata, and every new leader's start, is one record
stamped with the writer's leader epoch, at the next sequence number of the partition's log.
Writers create records only where none exists (a conditional create in the store), so the log
is one total order that every replica reads the same, and fencing follows from the replay
rule: a record from an epoch older than the newest epoch seen so far is ignored. A new leader
writes an EPOCH_START record first; from then on nothing an older leader writes counts, and
that older leader, finding the sequence number taken, reads the newer epoch and stops with
FENCED_LEADER_EPOCH. So two leaders never both upload or delete a segment of record.

Record, as JSON: {"leader_epoch": E, "segment": <RemoteLogSegmentMetadata.to_json()> | null}
(null: the start of epoch E).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from .segment_metadata import (
    IllegalStateTransition,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    check_transition,
)

log = logging.getLogger(__name__)


class CorruptMetadataRecordError(ValueError):
    """A metadata record that does not parse: the log cannot be replayed past it."""


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """One entry of the metadata log: a segment's new metadata, or (segment None) the start of
    a leader epoch."""

    leader_epoch: int
    segment: RemoteLogSegmentMetadata | None = None

    def to_bytes(self) -> bytes:
        segment = self.segment.to_json() if self.segment is not None else None
        return json.dumps({"leader_epoch": self.leader_epoch, "segment": segment}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> MetadataRecord:
        try:
            value = json.loads(data)
            segment = value["segment"]
            return cls(
                int(value["leader_epoch"]),
                RemoteLogSegmentMetadata.from_json(segment) if segment is not None else None,
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptMetadataRecordError(
                f"unreadable remote log metadata record: {exc}"
            ) from exc


@dataclass(frozen=True, slots=True)
class RemotePartitionMetadata:
    """The replayed metadata log of one partition: the newest leader epoch that wrote to it,
    the live segments by id (DELETE_SEGMENT_FINISHED ones are forgotten), and the sequence
    number the next record takes. Immutable: `apply` returns the next value."""

    leader_epoch: int = -1
    segments: Mapping[str, RemoteLogSegmentMetadata] = field(
        default_factory=lambda: MappingProxyType({})
    )
    next_seq: int = 0

    def rejection(self, record: MetadataRecord) -> str | None:
        """Why replay ignores `record` (None: it is accepted)."""
        if record.leader_epoch < self.leader_epoch:
            return f"fenced: epoch {record.leader_epoch} < {self.leader_epoch}"
        segment = record.segment
        if segment is None:
            return None
        if segment.event_leader_epoch != record.leader_epoch:
            return f"the change's epoch {segment.event_leader_epoch} is not the record's"
        current = self.segments.get(segment.segment_id.id)
        try:
            check_transition(current.state if current else None, segment.state)
        except IllegalStateTransition as exc:
            return str(exc)
        return None

    def apply(self, record: MetadataRecord) -> RemotePartitionMetadata:
        """The state after the record at `next_seq` (ignored, but counted, when rejected)."""
        reason = self.rejection(record)
        if reason is not None:
            log.warning("remote log metadata record %d ignored: %s", self.next_seq, reason)
            return replace(self, next_seq=self.next_seq + 1)
        segments = dict(self.segments)
        segment = record.segment
        if segment is not None:
            if segment.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
                segments.pop(segment.segment_id.id, None)
            else:
                segments[segment.segment_id.id] = segment
        return RemotePartitionMetadata(
            max(self.leader_epoch, record.leader_epoch),
            MappingProxyType(segments),
            self.next_seq + 1,
        )

    # -- queries ----------------------------------------------------------------------------

    def readable_segments(self) -> list[RemoteLogSegmentMetadata]:
        """The finished copies by start offset (readers' and retention's view)."""
        return sorted(
            (s for s in self.segments.values() if s.readable),
            key=lambda s: (s.start_offset, -s.event_leader_epoch),
        )

    def in_state(self, state: RemoteLogSegmentState) -> list[RemoteLogSegmentMetadata]:
        return sorted(
            (s for s in self.segments.values() if s.state is state), key=lambda s: s.start_offset
        )

    def copied_next_offset(self) -> int | None:
        """The offset after the last finished copy: where the next copy starts (None: nothing
        copied yet)."""
        readable = self.readable_segments()
        return max(s.next_offset for s in readable) if readable else None

    def log_start_offset(self) -> int | None:
        """The first offset held remotely (None: nothing)."""
        readable = self.readable_segments()
        return readable[0].start_offset if readable else None

    def size_bytes(self) -> int:
        return sum(s.segment_size_bytes for s in self.readable_segments())

    def segment_for(self, offset: int) -> RemoteLogSegmentMetadata | None:
        """The finished copy holding `offset` (the newest leader's when two overlap)."""
        best: RemoteLogSegmentMetadata | None = None
        for segment in self.readable_segments():
            if segment.start_offset <= offset <= segment.end_offset and (
                best is None or segment.event_leader_epoch > best.event_leader_epoch
            ):
                best = segment
        return best

    def first_segment_from(self, offset: int) -> RemoteLogSegmentMetadata | None:
        """The finished copy holding `offset`, else the first one after it."""
        found = self.segment_for(offset)
        if found is not None:
            return found
        later = [s for s in self.readable_segments() if s.start_offset > offset]
        return later[0] if later else None


def replay(records: list[MetadataRecord]) -> RemotePartitionMetadata:
    """The state after `records`, in sequence order from 0."""
    state = RemotePartitionMetadata()
    for record in records:
        state = state.apply(record)
    return state
