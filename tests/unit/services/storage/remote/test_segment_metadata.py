"""The remote segment state machine (Kafka's RemoteLogSegmentState transitions) and the pure
metadata log replay: which records count, fencing by leader epoch, and the queries readers and
the upload task use."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from riverlog.common.types import TopicPartition
from riverlog.services.storage.remote.metadata_log import (
    CorruptMetadataRecordError,
    MetadataRecord,
    RemotePartitionMetadata,
    replay,
)
from riverlog.services.storage.remote.segment_metadata import (
    VALID_PREVIOUS_STATES,
    IllegalStateTransition,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)
from riverlog.services.storage.remote.storage import RemoteLogSegmentId

TP = TopicPartition("t", 0)
S = RemoteLogSegmentState


def started(
    start: int, end: int, epoch: int = 1, epochs: dict[int, int] | None = None
) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata.copy_started(
        RemoteLogSegmentId.generate(TP),
        start,
        end,
        max_timestamp_ms=1000 + end,
        segment_leader_epochs=epochs or {epoch: start},
        segment_size_bytes=(end - start + 1) * 10,
        leader_epoch=epoch,
        now_ms=5,
    )


def test_the_happy_path_through_every_state() -> None:
    m = started(0, 99)
    assert m.state is S.COPY_SEGMENT_STARTED and not m.readable
    m = m.transition_to(S.COPY_SEGMENT_FINISHED, 1, 6)
    assert m.readable and m.event_timestamp_ms == 6
    m = m.transition_to(S.DELETE_SEGMENT_STARTED, 2, 7)
    assert not m.readable and m.event_leader_epoch == 2
    assert m.transition_to(S.DELETE_SEGMENT_FINISHED, 2, 8).state is S.DELETE_SEGMENT_FINISHED


@pytest.mark.parametrize(("current", "target"), list(itertools.product(list(S), list(S))))
def test_every_move_outside_the_table_is_refused(
    current: RemoteLogSegmentState, target: RemoteLogSegmentState
) -> None:
    m = dataclasses.replace(started(0, 9), state=current)
    if current in VALID_PREVIOUS_STATES[target]:
        assert m.transition_to(target, 1, 0).state is target
    else:
        with pytest.raises(IllegalStateTransition, match=f"from {current.name} to {target.name}"):
            m.transition_to(target, 1, 0)


def test_a_copy_that_failed_can_be_deleted_without_finishing() -> None:
    m = started(0, 9).transition_to(S.DELETE_SEGMENT_STARTED, 2, 0)
    assert m.state is S.DELETE_SEGMENT_STARTED


@pytest.mark.parametrize(
    ("start", "end", "epochs"),
    [(5, 4, {1: 5}), (-1, 4, {1: -1}), (0, 9, {}), (0, 9, {1: 3}), (0, 9, {1: 0, 2: 10})],
)
def test_offsets_and_epochs_that_describe_no_segment_are_refused(
    start: int, end: int, epochs: dict[int, int]
) -> None:
    with pytest.raises(ValueError):
        RemoteLogSegmentMetadata.copy_started(
            RemoteLogSegmentId.generate(TP), start, end, 0, epochs, 1, 1, 0
        )


def test_epoch_of_an_offset() -> None:
    m = started(100, 199, epochs={3: 100, 5: 150, 6: 190})
    assert [m.epoch_of(o) for o in (100, 149, 150, 189, 190, 199)] == [3, 3, 5, 5, 6, 6]


def test_json_round_trip_and_corrupt_records() -> None:
    m = started(10, 19, epochs={2: 10, 4: 15}).transition_to(S.COPY_SEGMENT_FINISHED, 4, 9)
    record = MetadataRecord(4, m)
    assert MetadataRecord.from_bytes(record.to_bytes()) == record
    assert MetadataRecord.from_bytes(MetadataRecord(7).to_bytes()) == MetadataRecord(7)
    for bad in (b"{", b"{}", b'{"leader_epoch": 1, "segment": {"id": "x"}}'):
        with pytest.raises(CorruptMetadataRecordError):
            MetadataRecord.from_bytes(bad)


def test_replay_tracks_segments_and_forgets_finished_deletes() -> None:
    a, b = started(0, 9), started(10, 19)
    a_done, b_done = (s.transition_to(S.COPY_SEGMENT_FINISHED, 1, 0) for s in (a, b))
    state = replay(
        [
            MetadataRecord(1),
            *(MetadataRecord(1, s) for s in (a, a_done, b, b_done)),
        ]
    )
    assert state.next_seq == 5 and state.leader_epoch == 1
    assert state.readable_segments() == [a_done, b_done]
    assert (state.copied_next_offset(), state.log_start_offset()) == (20, 0)
    assert state.size_bytes() == 200
    assert state.segment_for(15) == b_done and state.segment_for(20) is None
    assert state.first_segment_from(15) == b_done
    a_del = a_done.transition_to(S.DELETE_SEGMENT_STARTED, 1, 0)
    state = state.apply(MetadataRecord(1, a_del))
    assert state.readable_segments() == [b_done] and state.in_state(S.DELETE_SEGMENT_STARTED)
    state = state.apply(MetadataRecord(1, a_del.transition_to(S.DELETE_SEGMENT_FINISHED, 1, 0)))
    assert list(state.segments.values()) == [b_done]
    assert state.first_segment_from(3) == b_done


def test_replay_ignores_an_older_leader_after_a_newer_one_started() -> None:
    """The zombie's record after the new leader's EPOCH_START is counted (its sequence number
    is used) but changes nothing."""
    old = started(0, 9, epoch=1)
    zombie_finish = old.transition_to(S.COPY_SEGMENT_FINISHED, 1, 0)
    state = replay([MetadataRecord(1), MetadataRecord(1, old), MetadataRecord(2)])
    after = state.apply(MetadataRecord(1, zombie_finish))
    assert after.next_seq == 4 and after.leader_epoch == 2
    assert after.segments == state.segments
    assert after.in_state(S.COPY_SEGMENT_STARTED) == [old]  # the new leader cleans it up
    assert state.rejection(MetadataRecord(1, zombie_finish)) == "fenced: epoch 1 < 2"


def test_replay_ignores_illegal_moves_and_mismatched_epochs() -> None:
    a = started(0, 9)
    state = replay([MetadataRecord(1, a)])
    finished_by_2 = a.transition_to(S.COPY_SEGMENT_FINISHED, 2, 0)
    assert "not the record's" in (state.rejection(MetadataRecord(1, finished_by_2)) or "")
    deleted = a.transition_to(S.DELETE_SEGMENT_STARTED, 1, 0)
    skip = deleted.transition_to(S.DELETE_SEGMENT_FINISHED, 1, 0)
    assert state.apply(MetadataRecord(1, skip)).segments == state.segments
    assert state.apply(MetadataRecord(1, a)).segments == state.segments  # started twice


def test_overlapping_copies_prefer_the_newest_leader() -> None:
    old = started(0, 9, epoch=1).transition_to(S.COPY_SEGMENT_FINISHED, 1, 0)
    new = started(5, 14, epoch=2).transition_to(S.COPY_SEGMENT_FINISHED, 2, 0)
    state = RemotePartitionMetadata()
    for record in (MetadataRecord(1, _as_started(old)), MetadataRecord(1, old)):
        state = state.apply(record)
    for record in (MetadataRecord(2, _as_started(new)), MetadataRecord(2, new)):
        state = state.apply(record)
    assert state.segment_for(7) == new and state.segment_for(3) == old


def _as_started(m: RemoteLogSegmentMetadata) -> RemoteLogSegmentMetadata:
    return dataclasses.replace(m, state=S.COPY_SEGMENT_STARTED)
