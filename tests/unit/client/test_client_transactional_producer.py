"""The transactional producer end to end against the in-process fake gateway: no batch of a
partition leaves before the AddPartitionsToTxn that adds it, batches are transactional and
carry the transactional id, a commit flushes first and the next transaction writes under the
bumped epoch from sequence 0, an abort drops what is still queued, and a producer without a
transactional.id keeps its plain send."""

from __future__ import annotations

import threading

import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import AbortableTransactionError, Producer, TopicPartition
from riverlog.common.records.header import iter_batches


def producer(fake: FakeServer, **config: object) -> Producer:
    return Producer({"bootstrap.servers": fake.address, "transactional.id": "tx"}, **config)


def check_adds_before_writes(gateway: FakeGateway) -> list[tuple[str, int, int, int, int]]:
    """Walks the calls in order: every produced partition was added in its transaction first.
    Returns (topic, partition, epoch, base sequence, transactional bit) of every batch."""
    added: set[tuple[str, int]] = set()
    batches = []
    for name, request in gateway.txn_events:
        if name == "AddPartitionsToTxn":
            added |= {(t.name, p) for t in request.topics for p in t.partitions}
        elif name == "EndTxn":
            added.clear()
        elif name == "Produce":
            assert request.transactional_id == "tx"
            for part in request.partitions:
                assert (part.topic, part.partition) in added, f"{part.topic}-{part.partition}"
                for h in iter_batches(bytes(part.records)):
                    batches.append(
                        (part.topic, part.partition, h.producer_epoch, h.base_sequence,
                         int(h.is_transactional))
                    )  # fmt: skip
    return batches


def test_partitions_are_added_before_their_batches_and_epochs_move_on(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", partitions=4)
    with producer(fake, linger_ms=0) as p:
        p.init_transactions(timeout=10)
        p.begin_transaction()
        results = []

        def write(worker: int) -> None:  # appends race the sender's drains
            for i in range(100):
                results.append(p.send("t", b"%d-%d" % (worker, i), partition=(i + worker) % 4))

        threads = [threading.Thread(target=write, args=(w,)) for w in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        p.commit_transaction(timeout=10)
        assert all(r.result(timeout=0).offset >= 0 for r in results)
        p.begin_transaction()
        p.send("t", b"second", partition=1)
        p.commit_transaction(timeout=10)
    batches = check_adds_before_writes(gateway)
    assert {b[4] for b in batches} == {1}
    first_epoch = min(b[2] for b in batches)
    second = [b for b in batches if b[2] == first_epoch + 1]
    assert second == [("t", 1, first_epoch + 1, 0, 1)]  # sequences restart with the epoch
    names = [name for name, _ in gateway.txn_events]
    assert names[0] == "InitProducerId" and names.count("EndTxn") == 2
    assert names[-1] == "EndTxn" and names[names.index("EndTxn") - 1] == "Produce"


def test_abort_drops_what_is_still_queued(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", partitions=2)
    with producer(fake, linger_ms=60_000) as p:
        p.init_transactions(timeout=10)
        p.begin_transaction()
        lingering = p.send("t", b"lingers", partition=0)
        p.abort_transaction(timeout=10)
        with pytest.raises(AbortableTransactionError, match="aborted"):
            lingering.result(timeout=5)
        p.begin_transaction()
        p.send("t", b"kept", partition=0)
        p.commit_transaction(timeout=10)  # flushes despite linger.ms
    produced = [r for name, r in gateway.txn_events if name == "Produce"]
    assert len(produced) == 1
    check_adds_before_writes(gateway)


def test_offsets_join_the_transaction(fake: FakeServer, gateway: FakeGateway) -> None:
    with producer(fake) as p:
        p.init_transactions(timeout=10)
        p.begin_transaction()
        with pytest.raises(AbortableTransactionError):
            # The fake gateway has no TxnOffsetCommit: UNIMPLEMENTED, not retriable.
            p.send_offsets_to_transaction({TopicPartition("t", 0): 3}, "g", timeout=5)
    assert [n for n, _ in gateway.txn_events] == ["InitProducerId", "AddOffsetsToTxn"]


def test_a_plain_producer_keeps_its_send(fake: FakeServer) -> None:
    with Producer({"bootstrap.servers": fake.address}) as plain:
        # the class's send, or its common case in C (`_speedups.SendFast`): nothing transactional
        send = vars(plain).get("send")
        assert send is None or type(send).__name__ == "SendFast"
        assert "send_many" not in vars(plain)
    with producer(fake) as transactional:
        assert "send" in vars(transactional)
