"""What the cluster knows of one remote segment (Kafka's RemoteLogSegmentMetadata and its
RemoteLogSegmentState, KIP-405), with the segment's life as an explicit state machine of pure
transitions.

A segment is copied, then deleted, each in two steps, so that a leader killed between the
steps leaves a state its successor can finish: COPY_SEGMENT_STARTED (objects may be
half-written: no reader uses it; a new leader deletes its objects and copies the segment
again) → COPY_SEGMENT_FINISHED (readable; the local copy may go) → DELETE_SEGMENT_STARTED (no
reader uses it; the objects are being removed) → DELETE_SEGMENT_FINISHED (gone; the entry is
kept only until the metadata log is compacted). Every change is a new frozen value built by
`transition_to`, stamped with the leader epoch of the leader that made it: the metadata log
(`metadata_log.py`) accepts a change only from the newest leader.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final

from riverlog.common.types import TopicPartition

from .storage import RemoteLogSegmentId


class RemoteLogSegmentState(enum.Enum):
    """The state of one remote segment; the value is Kafka's id of the state."""

    COPY_SEGMENT_STARTED = 0
    """The leader is writing the segment's objects.

    action: readers never use it; retention never counts it; the local segment stays.
    transition: every object written => COPY_SEGMENT_FINISHED;
                the copy failed or its leader is gone => DELETE_SEGMENT_STARTED (orphan
                cleanup, then the segment is copied again under a new id)."""

    COPY_SEGMENT_FINISHED = 1
    """The segment is whole in the store.

    action: fetches below the local log start read it; local retention may delete the
            local segment; total retention counts it.
    transition: retention.ms / retention.bytes / the log start offset (DeleteRecords) /
                topic deletion => DELETE_SEGMENT_STARTED."""

    DELETE_SEGMENT_STARTED = 2
    """The leader is removing the segment's objects.

    action: readers never use it; a new leader deletes the objects again (idempotent).
    transition: every object removed => DELETE_SEGMENT_FINISHED."""

    DELETE_SEGMENT_FINISHED = 3
    """The segment is gone.

    action: nothing reads it; compaction of the metadata log may forget it.
    transition: none (final)."""


VALID_PREVIOUS_STATES: Final[
    Mapping[RemoteLogSegmentState, frozenset[RemoteLogSegmentState | None]]
] = MappingProxyType(
    {
        RemoteLogSegmentState.COPY_SEGMENT_STARTED: frozenset({None}),
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED: frozenset(
            {RemoteLogSegmentState.COPY_SEGMENT_STARTED}
        ),
        RemoteLogSegmentState.DELETE_SEGMENT_STARTED: frozenset(
            {
                RemoteLogSegmentState.COPY_SEGMENT_STARTED,
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
            }
        ),
        RemoteLogSegmentState.DELETE_SEGMENT_FINISHED: frozenset(
            {RemoteLogSegmentState.DELETE_SEGMENT_STARTED}
        ),
    }
)
"""The states each state may be entered from (None: a segment the metadata did not know)."""


class IllegalStateTransition(RuntimeError):
    """A move the table does not allow: a bug of the remote log manager, never client input."""


def check_transition(current: RemoteLogSegmentState | None, target: RemoteLogSegmentState) -> None:
    """Raise IllegalStateTransition unless `target` may follow `current`."""
    if current not in VALID_PREVIOUS_STATES[target]:
        allowed = sorted(s.name if s else "none" for s in VALID_PREVIOUS_STATES[target])
        raise IllegalStateTransition(
            f"a remote segment cannot move from {current.name if current else 'none'} to "
            f"{target.name} (allowed from {', '.join(allowed)})"
        )


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """One remote segment: its id, the offsets [start_offset, end_offset] it holds (inclusive,
    as Kafka's), the largest timestamp in it, the leader epochs it covers as
    {epoch: first offset of that epoch in the segment}, its size, its state, and the leader
    epoch and time of the change that made this value."""

    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    segment_leader_epochs: Mapping[int, int]
    segment_size_bytes: int
    state: RemoteLogSegmentState
    event_leader_epoch: int
    event_timestamp_ms: int

    @classmethod
    def copy_started(
        cls,
        segment_id: RemoteLogSegmentId,
        start_offset: int,
        end_offset: int,
        max_timestamp_ms: int,
        segment_leader_epochs: Mapping[int, int],
        segment_size_bytes: int,
        leader_epoch: int,
        now_ms: int,
    ) -> RemoteLogSegmentMetadata:
        """The first value of a segment about to be copied. Raises ValueError for offsets or
        epochs that cannot describe a segment (a caller bug)."""
        if not 0 <= start_offset <= end_offset:
            raise ValueError(f"bad offsets [{start_offset}, {end_offset}] for {segment_id}")
        starts = sorted(segment_leader_epochs.items())
        if not starts or starts[0][1] != start_offset or starts[-1][1] > end_offset:
            raise ValueError(
                f"{segment_id}: leader epochs {dict(starts)} do not cover "
                f"[{start_offset}, {end_offset}] from its start"
            )
        check_transition(None, RemoteLogSegmentState.COPY_SEGMENT_STARTED)
        return cls(
            segment_id,
            start_offset,
            end_offset,
            max_timestamp_ms,
            MappingProxyType(dict(starts)),
            segment_size_bytes,
            RemoteLogSegmentState.COPY_SEGMENT_STARTED,
            leader_epoch,
            now_ms,
        )

    def transition_to(
        self, target: RemoteLogSegmentState, leader_epoch: int, now_ms: int
    ) -> RemoteLogSegmentMetadata:
        """This segment in state `target`, changed by the leader of `leader_epoch`; raises
        IllegalStateTransition when `target` may not follow the current state."""
        check_transition(self.state, target)
        return replace(
            self, state=target, event_leader_epoch=leader_epoch, event_timestamp_ms=now_ms
        )

    @property
    def readable(self) -> bool:
        """Whether fetches and ListOffsets may use it (only a finished copy)."""
        return self.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED

    @property
    def next_offset(self) -> int:
        return self.end_offset + 1

    def epoch_of(self, offset: int) -> int:
        """The leader epoch that wrote `offset` (which must be in this segment)."""
        epoch = -1
        for e, start in sorted(self.segment_leader_epochs.items()):
            if start > offset:
                break
            epoch = e
        return epoch

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.segment_id.tp.topic,
            "partition": self.segment_id.tp.partition,
            "id": self.segment_id.id,
            "start_offset": self.start_offset,
            "end_offset": self.end_offset,
            "max_timestamp_ms": self.max_timestamp_ms,
            "segment_leader_epochs": [
                [e, o] for e, o in sorted(self.segment_leader_epochs.items())
            ],
            "segment_size_bytes": self.segment_size_bytes,
            "state": self.state.name,
            "event_leader_epoch": self.event_leader_epoch,
            "event_timestamp_ms": self.event_timestamp_ms,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> RemoteLogSegmentMetadata:
        """Raises KeyError / ValueError / TypeError for a malformed value."""
        tp = TopicPartition(str(value["topic"]), int(value["partition"]))
        return cls(
            RemoteLogSegmentId(tp, str(value["id"])),
            int(value["start_offset"]),
            int(value["end_offset"]),
            int(value["max_timestamp_ms"]),
            MappingProxyType({int(e): int(o) for e, o in value["segment_leader_epochs"]}),
            int(value["segment_size_bytes"]),
            RemoteLogSegmentState[str(value["state"])],
            int(value["event_leader_epoch"]),
            int(value["event_timestamp_ms"]),
        )
