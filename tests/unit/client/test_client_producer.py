"""Producer against an in-process fake gateway: partition choice (explicit, murmur2 of the key,
sticky without a key), offsets and metadata in the futures, several partitions per request,
callbacks, acks, the client id on every call, flush and close semantics, unknown topics, and
serializers; each with send's append in C and in Python. Retries and failures are in
test_client_sender.py."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import (
    ClientClosedError,
    ClientTimeoutError,
    Producer,
    RecordMetadata,
    RecordTooLargeError,
)
from riverlog.client.producer import accumulator
from riverlog.common.errors import ErrorCode
from riverlog.common.partitioner import partition_for_key
from riverlog.common.records.reader import iter_batches_records
from riverlog.v1 import common_pb2


@pytest.fixture(params=["c", "python"], autouse=True)
def which_append(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with send's append in C (`_speedups.Appender`, when built) and with
    the Python path alone, as where the extension is not built."""
    if request.param == "c":
        if accumulator.Appender is None:
            pytest.skip("the _speedups C extension is not built here")
    else:
        monkeypatch.setattr(accumulator, "Appender", None)
    return str(request.param)


def producer(fake: FakeServer, **config: object) -> Producer:
    return Producer({"bootstrap.servers": fake.address, "linger.ms": 1}, **config)


def stored(gateway: FakeGateway, topic: str, partition: int) -> list:
    return list(iter_batches_records(gateway.records(topic, partition)))


def test_keyed_records_go_where_murmur2_says(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 5)
    with producer(fake) as p:
        keys = [b"key-%d" % i for i in range(50)]
        futures = [p.send("t", b"v", key=k) for k in keys]
        p.flush()
        for key, future in zip(keys, futures, strict=True):
            assert future.result(5).partition == partition_for_key(key, 5)


def test_explicit_partition_wins_and_is_checked(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 3)
    with producer(fake) as p:
        assert p.send("t", b"v", key=b"k", partition=2).result(5).partition == 2
        with pytest.raises(ValueError, match="partition 3 of topic 't' does not exist"):
            p.send("t", b"v", partition=3)


def test_null_keys_stick_to_a_partition(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 6)
    with producer(fake, linger_ms=10_000) as p:
        futures = [p.send("t", b"v") for _ in range(20)]  # far less than one batch
        p.flush()
        assert len({f.result(5).partition for f in futures}) == 1


def test_ignore_keys_uses_sticky_for_keyed_records(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 6)
    with producer(fake, linger_ms=10_000, partitioner_ignore_keys=True) as p:
        futures = [p.send("t", b"v", key=b"k%d" % i) for i in range(20)]
        p.flush()
        assert len({f.result(5).partition for f in futures}) == 1


def test_metadata_of_acknowledged_records(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    with producer(fake) as p:
        futures = [p.send("t", b"v%d" % i, key=b"k", timestamp_ms=1000 + i) for i in range(10)]
        metas = [f.result(5) for f in futures]
    assert [m.offset for m in metas] == list(range(10))
    assert metas[3] == RecordMetadata("t", 0, 3, 1003, 1, 2)
    assert [r.value for r in stored(gateway, "t", 0)] == [b"v%d" % i for i in range(10)]


def test_keys_headers_and_null_values_round_trip(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    with producer(fake) as p:
        p.send("t", None, key=b"tombstone")
        p.send("t", b"", key=b"")
        p.send("t", b"x", headers=[("a", b"1"), ("a", None), ("b", b"")])
    records = stored(gateway, "t", 0)
    assert (records[0].key, records[0].value) == (b"tombstone", None)
    assert (records[1].key, records[1].value) == (b"", b"")
    assert records[2].headers == [("a", b"1"), ("a", None), ("b", b"")]


def test_several_partitions_share_a_request(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 4)
    with producer(fake, linger_ms=10_000) as p:
        for partition in range(4):
            p.send("t", b"v", partition=partition)
        p.flush()
    assert len(gateway.produce_requests) == 1
    assert len(gateway.produce_requests[0].partitions) == 4


def test_full_batches_of_a_partition_go_back_to_back(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    with producer(fake, batch_size=512, linger_ms=10_000) as p:
        futures = [p.send("t", b"v" * 100, partition=0) for _ in range(40)]
        p.flush()
    assert [f.result(5).offset for f in futures] == list(range(40))
    assert len(stored(gateway, "t", 0)) == 40


def test_callbacks_and_done_callbacks(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    seen: list[tuple[object, object]] = []
    done = threading.Event()
    with producer(fake) as p:
        p.send("t", b"v", callback=lambda m, e: seen.append((m, e)))
        future = p.send("t", b"w")
        future.add_done_callback(lambda f: done.set())
        p.flush()
        assert done.wait(5)
        late: list[int] = []
        future.add_done_callback(lambda f: late.append(f.result().offset))  # already done
    assert seen[0][1] is None and seen[0][0].offset == 0  # type: ignore[union-attr]
    assert late == [1]


def test_acks_map_to_the_request(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    expected = {"0": common_pb2.ACKS_NONE, "1": common_pb2.ACKS_LEADER, "all": common_pb2.ACKS_ALL}
    for acks, wire in expected.items():
        with producer(fake, acks=acks) as p:
            meta = p.send("t", b"v").result(5)
        assert gateway.produce_requests[-1].acks == wire
        assert (meta.offset == -1) == (acks == "0")  # acks=0: nothing acknowledged


def test_client_id_on_every_call(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    with producer(fake, client_id="my-app") as p:
        p.send("t", b"v").result(5)
    assert gateway.seen_client_ids == {"my-app"}


def test_unknown_topic_fails_after_max_block_ms(fake: FakeServer) -> None:
    with producer(fake, max_block_ms=200) as p:
        with pytest.raises(
            ClientTimeoutError, match="topic 'nope' not present in metadata after 200 ms"
        ):
            p.send("nope", b"v")


def test_topic_created_while_waiting_is_used(fake: FakeServer, gateway: FakeGateway) -> None:
    timer = threading.Timer(0.2, gateway.create, args=("late", 2))
    timer.start()
    try:
        with producer(fake, max_block_ms=30_000) as p:
            assert p.send("late", b"v").result(5).offset == 0
            assert p.partitions_for("late") == [0, 1]
    finally:
        timer.cancel()


def test_record_larger_than_max_request_size(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    with producer(fake, max_request_size=1000) as p:
        with pytest.raises(RecordTooLargeError):
            p.send("t", b"x" * 2000)


def test_serializers(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    with producer(
        fake, key_serializer=str.encode, value_serializer=lambda v: repr(v).encode()
    ) as p:
        p.send("t", {"a": 1}, key="k").result(5)
    record = stored(gateway, "t", 0)[0]
    assert (record.key, record.value) == (b"k", b"{'a': 1}")


def test_close_delivers_pending_then_refuses(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    p = producer(fake, linger_ms=60_000)
    futures = [p.send("t", b"v") for _ in range(5)]
    p.close()
    assert [f.result(0).offset for f in futures] == list(range(5))
    with pytest.raises(ClientClosedError):
        p.send("t", b"v")
    p.close()  # idempotent


def test_close_with_timeout_fails_what_cannot_be_sent(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    gateway.produce_errors.extend([ErrorCode.NOT_LEADER_OR_FOLLOWER] * 10_000)
    p = producer(fake, retry_backoff_ms=20, retry_backoff_max_ms=20)
    future = p.send("t", b"v")
    p.close(timeout=0.3)
    with pytest.raises(ClientClosedError):
        future.result(5)


def test_flush_timeout(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    gateway.produce_errors.extend([ErrorCode.NOT_LEADER_OR_FOLLOWER] * 10_000)
    p = producer(fake, retry_backoff_ms=20, retry_backoff_max_ms=20)
    try:
        future = p.send("t", b"v")
        with pytest.raises(ClientTimeoutError, match="flush"):
            p.flush(timeout=0.2)
        assert not future.done()
    finally:
        p.close(timeout=0)


def test_sends_from_several_threads(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 3)
    with producer(fake, batch_size=2048) as p:

        def send_many(worker: int) -> list:
            return [p.send("t", b"%d-%d" % (worker, i), key=b"%d" % i) for i in range(2000)]

        results: list[list] = [[] for _ in range(4)]
        threads = [
            threading.Thread(target=lambda w=w: results[w].extend(send_many(w))) for w in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        p.flush()
    metas = [f.result(0) for futures in results for f in futures]
    assert len(metas) == 8000
    assert len({(m.partition, m.offset) for m in metas}) == 8000  # each record once
    values = [r.value for part in range(3) for r in stored(gateway, "t", part)]
    assert sorted(values) == sorted(b"%d-%d" % (w, i) for w in range(4) for i in range(2000))


def test_send_many_round_trip(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 3)
    values = [b"v%d" % i for i in range(500)]
    seen: list[tuple[object, object]] = []
    with producer(fake, batch_size=2048) as p:
        keyless = p.send_many("t", values, timestamp_ms=1234)
        keys = [b"k%d" % i for i in range(30)]
        keyed = p.send_many("t", values[:30], keys, callback=lambda m, e: seen.append((m, e)))
        pinned = p.send_many("t", [bytearray(b"x"), None], partition=2)
        p.flush()
    metas = keyless.result(5)
    assert len(metas) == 500 and all(m.timestamp == 1234 for m in metas)
    stored_values = [r.value for part in range(3) for r in stored(gateway, "t", part)]
    assert Counter(stored_values) == Counter([*values, *values[:30], b"x", None])
    for key, meta in zip(keys, keyed.result(5), strict=True):
        assert meta.partition == partition_for_key(key, 3)
    assert len(seen) == 30 and all(e is None for _, e in seen)
    assert [m.partition for m in pinned.result(5)] == [2, 2]
    assert pinned[1].result(5).serialized_value_size == -1  # a null value
    for part in range(3):  # per partition, records in the order they were sent
        offsets = [m.offset for m in metas if m.partition == part]
        assert offsets == sorted(offsets)


def test_send_many_checks_before_queueing(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    with producer(fake) as p:
        with pytest.raises(TypeError):
            p.send_many("t", [b"ok", "text"])
        with pytest.raises(ValueError, match="keys for"):
            p.send_many("t", [b"a"], [b"k1", b"k2"])
        with pytest.raises(ValueError, match="does not exist"):
            p.send_many("t", [b"a"], partition=3)
        assert len(p.send_many("t", [])) == 0
        p.flush()
    assert stored(gateway, "t", 0) == []


def test_send_checks_types_and_timestamps_at_once(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    with producer(fake) as p:
        with pytest.raises(TypeError):
            p.send("t", "text")
        with pytest.raises(ValueError, match="invalid timestamp"):
            p.send("t", b"v", timestamp_ms=-2)
        with pytest.raises(TypeError):
            p.send("t", b"v", headers=[(1, b"x")])  # type: ignore[list-item]
        assert p.send("t", memoryview(b"mv"), key=bytearray(b"k")).result(5).offset == 0
    assert [(r.key, r.value) for r in stored(gateway, "t", 0)] == [(b"k", b"mv")]
