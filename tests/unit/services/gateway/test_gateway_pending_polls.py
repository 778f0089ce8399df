"""The table of parked leader long polls (`pending_polls.py`): its two states, what a key
matches, expiry and bounds. Pure: handles are plain objects, time is a number."""

from __future__ import annotations

import dataclasses

from riverlog.common.types import IsolationLevel, TopicPartition
from riverlog.services.gateway.pending_polls import PendingPolls, PollKey, PollState

TP = TopicPartition("t", 1)


def key(offset: int = 4, **changes: object) -> PollKey:
    base = PollKey(
        caller=("ANONYMOUS", "consumer-1", "ipv4:127.0.0.1:5000"),
        node=("storage", 2),
        address="127.0.0.1:9000",
        isolation_level=IsolationLevel.READ_UNCOMMITTED,
        rack_id="",
        max_bytes=1000,
        parts=((TP, offset, 1000, None),),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_a_running_poll_is_taken_once_by_the_same_request() -> None:
    table: PendingPolls[object] = PendingPolls()
    call = object()
    table.park(key(), call, now_ms=0)
    assert table.state(key()) is PollState.RUNNING
    entry = table.take(key(), now_ms=10)
    assert entry is not None and entry.handle is call and entry.state is PollState.RUNNING
    assert table.take(key(), now_ms=10) is None  # one taker only
    assert (len(table), table.joined) == (0, 1)


def test_an_answer_with_records_waits_its_wait_for_a_taker_then_is_dropped() -> None:
    table: PendingPolls[object] = PendingPolls()
    call = object()
    table.park(key(), call, now_ms=0)
    table.answered(key(), call, size=300, keep_ms=500, now_ms=100)
    assert (table.state(key()), table.held_bytes) == (PollState.READY, 300)
    table.expire(now_ms=599)
    assert table.state(key()) is PollState.READY
    assert table.take(key(), now_ms=600) is None  # its wait is over: dropped, not taken
    assert (len(table), table.held_bytes, table.dropped, table.joined) == (0, 0, 1, 0)


def test_a_ready_answer_is_taken_with_its_size_released() -> None:
    table: PendingPolls[object] = PendingPolls()
    call = object()
    table.park(key(), call, now_ms=0)
    table.answered(key(), call, size=300, keep_ms=500, now_ms=100)
    entry = table.take(key(), now_ms=200)
    assert entry is not None and (entry.state, entry.size) == (PollState.READY, 300)
    assert (table.held_bytes, table.dropped) == (0, 0)


def test_an_empty_or_failed_answer_is_not_kept() -> None:
    table: PendingPolls[object] = PendingPolls()
    call = object()
    table.park(key(), call, now_ms=0)
    table.answered(key(), call, size=0, keep_ms=500, now_ms=100)
    assert len(table) == 0 and table.dropped == 0


def test_only_the_parked_handle_changes_its_entry() -> None:
    """A late callback of a call that was taken or replaced changes nothing."""
    table: PendingPolls[object] = PendingPolls()
    old, new = object(), object()
    table.park(key(), old, now_ms=0)
    table.park(key(), new, now_ms=1)  # the same request parked again
    table.answered(key(), old, size=100, keep_ms=500, now_ms=2)
    assert table.state(key()) is PollState.RUNNING
    entry = table.take(key(), now_ms=3)
    assert entry is not None and entry.handle is new
    table.answered(key(), new, size=100, keep_ms=500, now_ms=4)  # taken: not put back
    assert len(table) == 0


def test_another_caller_offset_level_node_or_size_never_matches() -> None:
    table: PendingPolls[object] = PendingPolls()
    table.park(key(), object(), now_ms=0)
    others = [
        key(offset=5),  # a seek, or the position moved on
        key(caller=("ANONYMOUS", "consumer-2", "ipv4:127.0.0.1:5000")),  # another consumer
        key(caller=("ANONYMOUS", "consumer-1", "ipv4:127.0.0.1:5001")),  # another connection
        key(caller=("alice", "consumer-1", "ipv4:127.0.0.1:5000")),  # another user
        key(isolation_level=IsolationLevel.READ_COMMITTED),
        key(node=("storage", 3)),
        key(address="127.0.0.1:9001"),  # the node restarted elsewhere
        key(max_bytes=2000),
        key(parts=((TP, 4, 1000, 7),)),  # a leader epoch named
        key(parts=((TP, 4, 1000, None), (TopicPartition("t", 2), 0, 1000, None))),  # reassigned
    ]
    for other in others:
        assert table.take(other, now_ms=1) is None, other
    assert table.state(key()) is PollState.RUNNING


def test_the_table_is_bounded_oldest_first() -> None:
    table: PendingPolls[object] = PendingPolls(max_entries=2, max_bytes=250)
    calls = [object() for _ in range(3)]
    for i, call in enumerate(calls):
        table.park(key(offset=i), call, now_ms=i)
    assert [table.state(key(offset=i)) for i in range(3)] == [
        None,
        PollState.RUNNING,
        PollState.RUNNING,
    ]
    table.answered(key(offset=1), calls[1], size=200, keep_ms=1000, now_ms=5)
    table.answered(key(offset=2), calls[2], size=100, keep_ms=1000, now_ms=6)  # 300 > 250
    assert (table.state(key(offset=1)), table.state(key(offset=2))) == (None, PollState.READY)
    assert (table.held_bytes, table.dropped) == (100, 1)
