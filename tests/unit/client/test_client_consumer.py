"""Consumer against an in-process fake gateway: polls grouped by partition and bounded by
max_records, positions and seeks, auto.offset.reset (earliest, latest, none; unknown positions
and positions that fell out of the log), offsets look-ups, answers made stale by a seek, the
fetch kept in flight between polls, deserializers, partition errors, and partitions of a topic
not created yet (reset and read alone once it is, without holding back the others)."""

from __future__ import annotations

import logging

import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import (
    ClientClosedError,
    ClientTimeoutError,
    Consumer,
    ConsumerRecord,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
    Producer,
    RiverlogError,
    TopicPartition,
)
from riverlog.common.errors import ErrorCode

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def produce(fake: FakeServer, n: int, partition: int = 0, start: int = 0, **kw: object) -> None:
    with Producer(bootstrap_servers=fake.address, linger_ms=0, **kw) as p:
        for i in range(start, start + n):
            p.send(
                "t", b"v%d" % i, key=b"k%d" % i, partition=partition, timestamp_ms=1000 * (i + 1)
            )


def consumer(fake: FakeServer, **config: object) -> Consumer:
    return Consumer({"bootstrap.servers": fake.address, "fetch.max.wait.ms": 10}, **config)


def drain(c: Consumer, want: int, rounds: int = 50) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    for _ in range(rounds):
        for records in c.poll(timeout_ms=200).values():
            out.extend(records)
        if len(out) >= want:
            break
    return out


def test_round_trip_from_earliest(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 2)
    produce(fake, 30, partition=0)
    produce(fake, 20, partition=1, start=30)
    with consumer(fake, auto_offset_reset="earliest") as c:
        c.assign([TP0, TP1])
        records = drain(c, 50)
        assert len(records) == 50
        by_tp = {
            tp: [r.offset for r in records if r.partition == tp.partition] for tp in (TP0, TP1)
        }
        assert by_tp == {TP0: list(range(30)), TP1: list(range(20))}
        first = next(r for r in records if r.partition == 0)
        assert first == ConsumerRecord("t", 0, 0, 1000, 0, b"k0", b"v0", [])
        assert c.position(TP0) == 30 and c.position(TP1) == 20
        assert c.highwater(TP0) == 30


def test_max_records_bounds_a_poll(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    produce(fake, 25)
    with consumer(fake, auto_offset_reset="earliest", max_poll_records=10) as c:
        c.assign([TP0])
        sizes = []
        for _ in range(20):
            got = c.poll(timeout_ms=200, max_records=None)
            if got:
                sizes.append(len(got[TP0]))
            if sum(sizes) >= 25:
                break
        assert max(sizes) <= 10 and sum(sizes) == 25
        assert c.poll(0, max_records=3) == {}


def test_latest_skips_what_was_there(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    produce(fake, 5)
    with consumer(fake) as c:  # auto.offset.reset latest (Kafka's default)
        c.assign([TP0])
        assert c.position(TP0) == 5
        produce(fake, 3, start=5)
        assert [r.offset for r in drain(c, 3)] == [5, 6, 7]


def test_reset_none_raises_until_seek(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    produce(fake, 5)
    with consumer(fake, auto_offset_reset="none") as c:
        c.assign([TP0])
        with pytest.raises(OffsetOutOfRangeError) as info:
            c.poll(timeout_ms=100)
        assert (
            info.value.partitions == {TP0: -1} and info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        )
        c.seek(TP0, 3)
        assert [r.offset for r in drain(c, 2)] == [3, 4]


MISSING = TopicPartition("missing", 0)
BEYOND = TopicPartition("t", 1)  # "t" has one partition


def test_unknown_partitions_wait_while_the_others_are_reset_and_read(
    fake: FakeServer, gateway: FakeGateway, caplog: pytest.LogCaptureFixture
) -> None:
    gateway.create("t", 1)
    produce(fake, 3)
    config = {"retry_backoff_ms": 5, "retry_backoff_max_ms": 20}
    with (
        caplog.at_level(logging.DEBUG, "riverlog.client.consumer.consumer"),
        consumer(fake, auto_offset_reset="earliest", **config) as c,
    ):
        c.assign([MISSING, TP0, BEYOND])
        assert [r.offset for r in drain(c, 3)] == [0, 1, 2]
        assert c.position(TP0) == 3
        for tp in (MISSING, BEYOND):  # still pending, retried on a back-off
            with pytest.raises(ClientTimeoutError, match=str(tp)):
                c.position(tp, timeout_ms=20)
        requested = {tp for request in gateway.fetch_requests for tp in request}
        assert requested == {("t", 0)}  # no fetch without a position
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sorted(m.split()[3] for m in warned) == ["missing-0", "t-1"]  # once each
    assert all("UNKNOWN_TOPIC_OR_PARTITION" in m for m in warned)
    retried = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(m.startswith("offset reset of missing-0 failed") for m in retried)


def test_unknown_partition_is_read_once_its_topic_appears(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    produce(fake, 2)
    config = {"retry_backoff_ms": 5, "retry_backoff_max_ms": 20}
    with consumer(fake, auto_offset_reset="earliest", **config) as c:
        c.assign([TP0, MISSING])
        assert [(r.topic, r.offset) for r in drain(c, 2)] == [("t", 0), ("t", 1)]
        gateway.create("missing", 1)
        with Producer(bootstrap_servers=fake.address, linger_ms=0) as p:
            for i in range(3):
                p.send("missing", b"m%d" % i, partition=0)
        produce(fake, 1, start=2)
        records = drain(c, 4)
        assert sorted((r.topic, r.offset) for r in records) == [
            ("missing", 0),
            ("missing", 1),
            ("missing", 2),
            ("t", 2),
        ]
        assert c.position(MISSING) == 3


def test_position_out_of_the_log_is_reset(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    produce(fake, 10)
    with consumer(fake, auto_offset_reset="earliest") as c:
        c.assign([TP0])
        c.seek(TP0, 50)  # past the end
        assert [r.offset for r in drain(c, 10)] == list(range(10))
    gateway.topics["t"].partitions[0].log_start = 4  # as delete_records would
    with consumer(fake, auto_offset_reset="earliest") as c:
        c.assign([TP0])
        c.seek(TP0, 1)
        assert [r.offset for r in drain(c, 6)] == list(range(4, 10))
    with consumer(fake, auto_offset_reset="none") as c:
        c.assign([TP0])
        c.seek(TP0, 1)
        with pytest.raises(OffsetOutOfRangeError, match="t-0 at offset 1"):
            drain(c, 1)


def test_seek_and_seek_to(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    produce(fake, 10)
    with consumer(fake, auto_offset_reset="earliest") as c:
        c.assign([TP0])
        c.seek(TP0, 7)
        assert c.position(TP0) == 7
        assert [r.offset for r in drain(c, 3)] == [7, 8, 9]
        c.seek_to_beginning()
        assert c.position(TP0) == 0
        c.seek_to_end(TP0)
        assert c.position(TP0) == 10
        with pytest.raises(ValueError, match="negative"):
            c.seek(TP0, -1)
        with pytest.raises(ValueError, match="not assigned"):
            c.position(TP1)


def test_seek_drops_records_fetched_before_it(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    produce(fake, 100)
    with consumer(fake, auto_offset_reset="earliest") as c:
        c.assign([TP0])
        first = drain(c, 1)
        assert first[0].offset == 0
        c.seek(TP0, 0)
        again = c.poll(timeout_ms=1000, max_records=5)
        assert [r.offset for r in again[TP0]] == [0, 1, 2, 3, 4]


def test_next_fetch_is_in_flight_while_records_are_handled(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    produce(fake, 10)
    with consumer(fake, auto_offset_reset="earliest") as c:
        c.assign([TP0])
        assert drain(c, 1)
        assert c._fetcher.in_flight  # sent before poll() returned


def test_offsets_look_ups(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 2)
    produce(fake, 3)  # timestamps 1000, 2000, 3000
    with consumer(fake) as c:
        found = c.offsets_for_times({TP0: 1500, TP1: 0})
        assert found == {TP0: OffsetAndTimestamp(1, 2000), TP1: None}
        assert c.offsets_for_times({TP0: 99_999}) == {TP0: None}
        assert c.beginning_offsets([TP0, TP1]) == {TP0: 0, TP1: 0}
        assert c.end_offsets([TP0, TP1]) == {TP0: 3, TP1: 0}
        with pytest.raises(ValueError):
            c.offsets_for_times({TP0: -5})


def test_deserializers(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    produce(fake, 2)
    with consumer(fake, auto_offset_reset="earliest", key_deserializer=bytes.decode,
                  value_deserializer=lambda v: v.upper()) as c:  # fmt: skip
        c.assign([TP0])
        records = drain(c, 2)
    assert [(r.key, r.value) for r in records] == [("k0", b"V0"), ("k1", b"V1")]


def test_retriable_fetch_errors_are_retried(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    produce(fake, 3)
    gateway.fetch_errors.extend([ErrorCode.NOT_LEADER_OR_FOLLOWER] * 2)
    with consumer(fake, auto_offset_reset="earliest", retry_backoff_ms=5) as c:
        c.assign([TP0])
        assert [r.offset for r in drain(c, 3)] == [0, 1, 2]


def test_fatal_fetch_errors_name_the_partition(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    produce(fake, 1)
    gateway.fetch_errors.append(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    with consumer(fake, auto_offset_reset="earliest") as c:
        c.assign([TP0])
        with pytest.raises(RiverlogError, match="t-0") as info:
            drain(c, 1)
        assert info.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_assign_keeps_positions_and_validates(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 2)
    with consumer(fake) as c:
        c.assign([TP0])
        c.seek(TP0, 0)
        c.assign([TP0, TP1])
        assert c.assignment() == {TP0, TP1}
        assert c.position(TP0) == 0
        with pytest.raises(TypeError):
            c.assign([("t", 0)])  # type: ignore[list-item]


def test_closed_consumer_refuses_calls(fake: FakeServer, gateway: FakeGateway) -> None:
    c = consumer(fake, client_id="reader")
    c.assign([TP0])
    gateway.create("t", 1)
    c.poll(timeout_ms=10)
    c.close()
    c.close()
    with pytest.raises(ClientClosedError):
        c.poll()
    assert gateway.seen_client_ids == {"reader"}


def test_compressed_batches_round_trip(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    produce(fake, 20, compression_type="zstd")
    with consumer(fake, auto_offset_reset="earliest") as c:
        c.assign([TP0])
        assert [r.value for r in drain(c, 20)] == [b"v%d" % i for i in range(20)]
