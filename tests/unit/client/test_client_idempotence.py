"""The idempotent producer in the SDK: on by default (with Kafka 3's config rules), an id from
InitProducerId at the first send, per-partition sequences assigned at drain, a retry resent with
the same sequence (stored once), retried batches back in sequence order before later ones, and
Kafka's epoch bump when a batch with a sequence fails for good or the leader sees a gap."""

from __future__ import annotations

from collections import deque

import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import Producer
from riverlog.client.config import ConfigError, ProducerConfig
from riverlog.client.producer.batch import ProducerBatch
from riverlog.client.producer.idempotence import IdempotenceManager, ProducerIdAndEpoch
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records import CompressionType
from riverlog.common.records.header import iter_batches
from riverlog.common.records.reader import iter_batches_records
from riverlog.common.types import PRODUCER_BATCH_WINDOW

BOOT = {"bootstrap.servers": "127.0.0.1:9"}
W = PRODUCER_BATCH_WINDOW
COUNT = 10 * (W + 10)  # about ten records a batch of 200 bytes: more batches than the window
FAST = {"linger.ms": 0, "retry.backoff.ms": 5, "retry.backoff.max.ms": 20}


def producer(address: str, **config: object) -> Producer:
    return Producer({"bootstrap.servers": address, **FAST}, **config)


def values(gateway: FakeGateway, topic: str = "t", partition: int = 0) -> list[bytes | None]:
    return [r.value for r in iter_batches_records(gateway.records(topic, partition))]


# ---- configuration ---------------------------------------------------------------------


def test_idempotence_is_on_by_default_with_acks_all() -> None:
    config = ProducerConfig.from_kafka(BOOT)
    assert config.enable_idempotence and config.acks == -1


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("acks", "1", "Must set acks to all"),
        ("retries", 0, "Must set retries to non-zero"),
        ("max.in.flight.requests.per.connection", 6, "at most 5"),
    ],
)
def test_conflicting_settings(key: str, value: object, message: str) -> None:
    assert not ProducerConfig.from_kafka({**BOOT, key: value}).enable_idempotence  # quietly off
    with pytest.raises(ConfigError, match=message):
        ProducerConfig.from_kafka({**BOOT, key: value, "enable.idempotence": "true"})


def test_idempotence_can_be_turned_off() -> None:
    assert not ProducerConfig.from_kafka(BOOT, enable_idempotence=False).enable_idempotence


# ---- against the fake gateway ----------------------------------------------------------


def test_batches_carry_the_producer_id_and_consecutive_sequences(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    with producer(fake.address) as p:
        assert p.producer_id_and_epoch == ProducerIdAndEpoch()
        for i in range(3):
            p.send("t", b"v%d" % i, partition=0).result(10)
        assert p.producer_id_and_epoch == ProducerIdAndEpoch(1000, 0)
    headers = iter_batches(gateway.records("t", 0))
    assert [(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers] == [
        (1000, 0, 0),
        (1000, 0, 1),
        (1000, 0, 2),
    ]
    assert gateway.init_producer_id_calls == 1


def test_a_lost_response_is_retried_and_stored_once(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    with producer(fake.address) as p:
        p.send("t", b"first", partition=0).result(10)
        gateway.drop_responses = 1  # appended, but the answer is lost: the SDK retries
        metadata = p.send("t", b"second", partition=0).result(10)
    assert metadata.offset == 1  # the original offset, from the duplicate's answer
    assert values(gateway) == [b"first", b"second"]


def test_retries_keep_the_order_with_five_in_flight(fake: FakeServer, gateway: FakeGateway) -> None:
    """The batch after the first fails; the ones behind it, already on the wire, meet the gap
    (OUT_OF_ORDER_SEQUENCE_NUMBER) and are retried after it, in sequence order."""
    gateway.create("t", 1)
    with producer(fake.address, batch_size=200, linger_ms=20) as p:
        p.send("t", b"record-000", partition=0).result(10)  # the leader knows the producer
        gateway.partition_errors[("t", 0)] = deque([ErrorCode.NOT_LEADER_OR_FOLLOWER])
        futures = [p.send("t", b"record-%03d" % i, partition=0) for i in range(1, 60)]
        offsets = [f.result(10).offset for f in futures]
        assert p.producer_id_and_epoch == ProducerIdAndEpoch(1000, 0)  # no bump needed
    assert offsets == list(range(1, 60))
    assert values(gateway) == [b"record-%03d" % i for i in range(60)]
    # The refused request's batches were sent again, each alone (a count of requests would
    # depend on how many batches the sender found ready at once, so on the machine's load).
    refused = iter_batches(gateway.produce_requests[1].partitions[0].records)
    resent = [
        iter_batches(r.partitions[0].records)
        for r in gateway.produce_requests[2:]
        if any(
            h.base_sequence == refused[0].base_sequence
            for h in iter_batches(r.partitions[0].records)
        )
    ]
    assert refused and resent
    assert all(len(batches) == 1 for batches in resent)
    sent_again = {
        h.base_sequence
        for r in gateway.produce_requests[2:]
        for h in iter_batches(r.partitions[0].records)
    }
    assert {h.base_sequence for h in refused} <= sent_again


def test_an_unknown_outcome_keeps_the_window_and_writes_nothing_twice(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    """The fault harness' pause-leader case: a batch is written but its answer is lost (the
    gateway timed out on a paused leader), and its retry is held up on the way while later
    batches are ready. Nothing beyond the W batches the leader remembers may be sent while
    the retry's outcome is unknown, so the retry is answered as a duplicate, never refused as
    out of order and rewritten under a new epoch."""
    gateway.create("t", 1)
    with producer(fake.address, batch_size=200, linger_ms=5) as p:
        p.send("t", b"record-000", partition=0).result(10)  # the leader knows the producer
        gateway.drop_response_at_sequence.add(1)  # written, answer lost
        gateway.delay_at_sequence[1] = 1.0  # the first retry is stalled; later ones are ready
        futures = [p.send("t", b"record-%03d" % i, partition=0) for i in range(1, COUNT)]
        offsets = [f.result(15).offset for f in futures]
        epoch = p.producer_id_and_epoch
    assert not gateway.drop_response_at_sequence and not gateway.delay_at_sequence
    assert 1 <= gateway.max_unresolved_window <= W
    assert values(gateway) == [b"record-%03d" % i for i in range(COUNT)]  # each once, in order
    assert offsets == list(range(1, COUNT))
    assert epoch == ProducerIdAndEpoch(1000, 0)  # nothing to bump


def test_the_first_batch_travels_alone_so_no_later_one_overtakes_it(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    """A leader that does not know the producer takes any sequence (KIP-360): a later batch
    overtaking the first one on another stream would be taken and the first refused. So the
    first batch of an epoch goes alone until acknowledged, even when it fails and is retried,
    and everything is stored once, in order, under the first epoch."""
    gateway.create("t", 1)
    gateway.partition_errors[("t", 0)] = deque([ErrorCode.NOT_LEADER_OR_FOLLOWER])
    # One batch per request, so five requests could be on the wire.
    with producer(fake.address, batch_size=200, linger_ms=20, max_request_size=250) as p:
        futures = [p.send("t", b"record-%03d" % i, partition=0) for i in range(60)]
        for f in futures:
            f.result(10)
        assert p.producer_id_and_epoch == ProducerIdAndEpoch(1000, 0)
    first_two = [iter_batches(r.partitions[0].records) for r in gateway.produce_requests[:2]]
    assert [[h.base_sequence for h in batches] for batches in first_two] == [[0], [0]]
    assert values(gateway) == [b"record-%03d" % i for i in range(60)]
    assert gateway.max_unresolved_window <= W


def test_a_batch_failing_for_good_bumps_the_epoch(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    with producer(fake.address) as p:
        p.send("t", b"a", partition=0).result(10)
        gateway.produce_errors.append(ErrorCode.INVALID_RECORD)  # not retriable
        with pytest.raises(RiverlogError):
            p.send("t", b"b", partition=0).result(10)
        p.send("t", b"c", partition=0).result(10)  # would be a gap under epoch 0
        assert p.producer_id_and_epoch == ProducerIdAndEpoch(1000, 1)
    last = iter_batches(gateway.records("t", 0))[-1]
    assert (last.producer_epoch, last.base_sequence) == (1, 0)
    assert values(gateway) == [b"a", b"c"]


# ---- the bookkeeping itself ------------------------------------------------------------


def _batch(partition: int = 0, count: int = 1) -> ProducerBatch:
    batch = ProducerBatch("t", partition, 0.0, compression=CompressionType.NONE)
    for _ in range(count):
        batch.append((0, None, b"x", None))
    return batch


def test_out_of_order_for_a_later_batch_is_retried_without_a_bump() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    first, second = _batch(count=2), _batch()
    idem.assign(first)
    idem.assign(second)
    assert (first.base_sequence, second.base_sequence) == (0, 2)
    gap = RiverlogError("gap", ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert idem.can_retry(second, gap)
    idem.before_drain()
    assert idem.producer_id_and_epoch == ProducerIdAndEpoch(7, 0)
    assert idem.can_retry(first, gap)  # the next expected batch: a real gap
    idem.before_drain()
    assert idem.producer_id_and_epoch == ProducerIdAndEpoch(7, 1)


def test_a_retry_waits_for_the_requests_on_the_wire_and_keeps_its_sequence() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    first, second = _batch(), _batch()
    idem.assign(first)
    idem.assign(second)
    idem.on_response(first)
    idem.on_retry(first)
    assert idem.blocked() == {("t", 0)}
    idem.on_response(second)
    assert idem.blocked() == set()
    idem.assign(first)
    assert first.base_sequence == 0


def test_after_a_proven_gap_sequences_restart_at_zero_with_new_bytes() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    batch = _batch()
    idem.assign(batch)
    data = batch.build()
    idem.on_response(batch)
    assert idem.can_retry(batch, RiverlogError("gap", ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER))
    idem.on_retry(batch)
    idem.before_drain()
    assert idem.producer_id_and_epoch == ProducerIdAndEpoch(7, 1)
    idem.assign(batch)
    rebuilt = batch.build()  # the same records, the new epoch and sequence stamped in
    header = iter_batches(rebuilt)[0]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 0)
    assert rebuilt != data and rebuilt[57:] == data[57:]
    assert [r.value for r in iter_batches_records(rebuilt)] == [b"x"]  # and the CRC checks


def _sent(idem: IdempotenceManager, *batches: ProducerBatch) -> None:
    for batch in batches:
        idem.assign(batch)
        batch.build()


def test_the_window_counts_acknowledged_batches_after_an_open_one() -> None:
    """W batches from the oldest one without an outcome to the newest, whatever came back
    in between: the leader remembers W, so one more could push the open one out."""
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    tp = ("t", 0)
    first = _batch()
    assert idem.capacity(tp) == 1
    _sent(idem, first)
    assert idem.capacity(tp) == 0  # the first batch of the epoch goes alone
    idem.on_response(first)
    idem.on_success(first)
    assert idem.capacity(tp) == W
    lost, *later = [_batch() for _ in range(W)]
    _sent(idem, lost, *later)
    assert idem.capacity(tp) == 0
    idem.on_response(lost)  # no answer: outcome unknown, retried
    lost.maybe_written = True
    idem.on_retry(lost)
    for batch in later:
        idem.on_response(batch)
        idem.on_success(batch)
    assert idem.capacity(tp) == 0  # the lost one and the W - 1 after it fill the window
    assert idem.blocked() == set()
    _sent(idem, lost)
    assert lost.base_sequence == 1  # the same sequence and bytes
    idem.on_response(lost)
    idem.on_success(lost)  # answered as a duplicate
    assert idem.capacity(tp) == W


def test_a_sequence_refused_after_later_ones_were_taken_fails_without_a_bump() -> None:
    """Never sent again under a new epoch: it might be in the log (Kafka fails it with
    OutOfOrderSequenceException rather than risk a duplicate)."""
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    first, second, third = _batch(), _batch(), _batch()
    _sent(idem, first)
    idem.on_response(first)
    idem.on_success(first)
    _sent(idem, second, third)
    idem.on_response(third)
    idem.on_success(third)
    idem.on_response(second)
    assert not idem.can_retry(second, RiverlogError("gap", ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER))
    idem.on_failed(second)
    idem.before_drain()
    assert idem.producer_id_and_epoch == ProducerIdAndEpoch(7, 0)
    assert idem.capacity(("t", 0)) == W


def test_a_bump_for_another_partition_keeps_a_possibly_written_retry_as_it_was() -> None:
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    retry, other = _batch(partition=0), _batch(partition=1)
    _sent(idem, retry, other)
    data = retry.data
    idem.on_response(retry)
    retry.maybe_written = True
    idem.on_retry(retry)
    idem.on_response(other)
    idem.on_failed(other)  # refused for good: partition 1 moves to a new epoch
    idem.before_drain()
    assert idem.producer_id_and_epoch == ProducerIdAndEpoch(7, 1)
    assert idem.capacity(("t", 0)) == 0  # nothing of the new epoch while epoch 0 is open
    _sent(idem, retry)
    assert (retry.owner, retry.base_sequence, retry.data) == (ProducerIdAndEpoch(7, 0), 0, data)
    idem.on_response(retry)
    idem.on_success(retry)
    assert idem.capacity(("t", 0)) == 1  # now the partition starts epoch 1
    fresh = _batch(partition=0)
    _sent(idem, fresh)
    assert (fresh.owner, fresh.base_sequence) == (ProducerIdAndEpoch(7, 1), 0)


@pytest.mark.parametrize("later_taken", [True, False])
def test_an_unresolved_sequence_waits_for_the_batches_after_it(later_taken: bool) -> None:
    """A batch expires with its outcome unknown: nothing new is sent until the batches after
    it settle; a later one taken proves it written (no bump), else the next epoch starts. It
    is never sent again."""
    idem = IdempotenceManager()
    idem.set_producer_id(7, 0)
    tp = ("t", 0)
    first, lost, after = _batch(), _batch(), _batch()
    _sent(idem, first)
    idem.on_response(first)
    idem.on_success(first)
    _sent(idem, lost, after)
    for batch in (lost, after):
        idem.on_response(batch)
        batch.maybe_written = True
    idem.on_failed(lost)  # delivery.timeout.ms expired
    idem.before_drain()
    assert idem.capacity(tp) == 0
    if later_taken:
        idem.on_success(after)
    else:
        idem.on_failed(after)
    idem.before_drain()
    epoch = 0 if later_taken else 1
    assert idem.producer_id_and_epoch == ProducerIdAndEpoch(7, epoch)
    fresh = _batch()
    assert idem.capacity(tp) >= 1
    _sent(idem, fresh)
    assert (fresh.owner.epoch, fresh.base_sequence) == (epoch, 3 if later_taken else 0)
    assert (lost.owner.epoch, lost.base_sequence) == (0, 1)  # never rewritten
