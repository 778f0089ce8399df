"""Which revision a write and a watch response stand for: a transaction that changed nothing
has no revision to wait for (etcd answers with its current revision, possibly a write under
another prefix that the watch never delivers), and a watch response brings a follower up to its
last event, not to the header of a catch-up batch that continues in the next response."""

from __future__ import annotations

from etcd3 import etcdrpc

from riverlog.services.metadata.store import Change, Op, delivered_revision, txn_changed


def deleted(count: int) -> etcdrpc.ResponseOp:
    return etcdrpc.ResponseOp(response_delete_range=etcdrpc.DeleteRangeResponse(deleted=count))


def put() -> etcdrpc.ResponseOp:
    return etcdrpc.ResponseOp(response_put=etcdrpc.PutResponse())


def test_a_delete_of_absent_keys_changes_nothing() -> None:
    # create_topic's first write: clear leftover partitions of a topic that never existed.
    assert not txn_changed([Op("/r/partitions/t/", prefix=True)], [deleted(0)])
    assert not txn_changed([Op("/r/a"), Op("/r/b")], [deleted(0), deleted(0)])


def test_a_delete_that_removed_a_key_changes() -> None:
    assert txn_changed([Op("/r/a"), Op("/r/b")], [deleted(0), deleted(1)])
    assert txn_changed([Op("/r/partitions/t/", prefix=True)], [deleted(3)])


def test_a_put_always_changes() -> None:
    assert txn_changed([Op("/r/a", b"v")], [put()])
    assert txn_changed([Op("/r/gone"), Op("/r/a", b"v")], [deleted(0), put()])


def change(key: str, revision: int) -> Change:
    return Change(key, b"v", revision, 0)


def test_a_catch_up_batch_stands_for_its_last_event() -> None:
    # etcd sends an unsynced watcher's backlog in batches, each under the current revision's
    # header: the follower must not count the first batch as reaching 2500.
    first = [change("/r/a", 100), change("/r/b", 1099)]
    second = [change("/r/a", 1100), change("/r/c", 2500)]
    assert delivered_revision(2500, first) == 1099
    assert delivered_revision(2500, second) == 2500


def test_a_live_response_stands_for_its_transaction() -> None:
    events = [change("/r/a", 42), change("/r/b", 42)]
    assert delivered_revision(42, events) == 42


def test_a_response_without_events_stands_for_its_header() -> None:
    assert delivered_revision(77, []) == 77
