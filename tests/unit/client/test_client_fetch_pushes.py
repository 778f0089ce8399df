"""The consumer's side of pushed fetch answers (`consumer/pushes.py`): a push fills only the
chunk waiting at exactly its fetch offset in the partition's current epoch; any other push is
stale and dropped."""

from __future__ import annotations

import pytest

from riverlog.client import TopicPartition
from riverlog.client.consumer.chunk import Chunk
from riverlog.client.consumer.pushes import AwaitedPushes

pytestmark = pytest.mark.timeout(30)

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def test_a_push_fills_the_chunk_waiting_at_its_offset() -> None:
    pushes = AwaitedPushes()
    chunk = Chunk(TP0, 1, 10, 1024)
    pushes.expect(chunk, deadline=100.0)
    assert pushes and pushes.waiting(chunk)
    assert pushes.take(TP0, 10, 1) is chunk
    assert not pushes and not pushes.waiting(chunk)
    assert pushes.take(TP0, 10, 1) is None  # once


def test_pushes_from_another_offset_or_partition_are_dropped() -> None:
    pushes = AwaitedPushes()
    chunk = Chunk(TP0, 1, 10, 1024)
    pushes.expect(chunk, deadline=100.0)
    assert pushes.take(TP0, 7, 1) is None  # an older push (replaced since)
    assert pushes.take(TP1, 10, 1) is None
    assert pushes.waiting(chunk)  # still waiting for its own
    assert pushes.take(TP0, 10, 1) is chunk


def test_a_seek_or_revoke_makes_the_waiting_chunk_stale() -> None:
    pushes = AwaitedPushes()
    pushes.expect(Chunk(TP0, 1, 10, 1024), deadline=100.0)
    assert pushes.take(TP0, 10, 2) is None  # seeked since: epoch 2
    assert not pushes
    pushes.expect(Chunk(TP1, 1, 5, 1024), deadline=100.0)
    assert pushes.take(TP1, 5, None) is None  # revoked
    assert not pushes


def test_waits_past_their_deadline_are_given_up() -> None:
    pushes = AwaitedPushes()
    early = Chunk(TP0, 1, 10, 1024)
    late = Chunk(TP1, 1, 3, 1024)
    pushes.expect(early, deadline=5.0)
    pushes.expect(late, deadline=50.0)
    assert pushes.expired(4.0) == []
    assert pushes.expired(5.0) == [early]
    assert len(pushes) == 1 and pushes.waiting(late)
    assert pushes.drop(TP1) is late
    assert pushes.drop(TP1) is None
    pushes.expect(early, deadline=5.0)
    assert pushes.clear() == [early] and not pushes
