"""The consumer's fetch pipeline against the fake gateway: several fetches in flight for one
partition, guesses of where the next chunk starts that overlap or leave gaps (batches of uneven
sizes), gap-sized fills that meet a larger batch, compacted-looking logs with holes in the
offsets, and chunks dropped by a seek, a new assignment or an error ahead of the position.
Every end-to-end test checks the exact offsets handed out: each once, in order, none missing."""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable
from typing import cast

import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import Consumer, ConsumerRecord, RiverlogError, TopicPartition
from riverlog.client._connection import GatewayConnection
from riverlog.client.config import ConsumerConfig
from riverlog.client.consumer.chunk import Chunk
from riverlog.client.consumer.fetcher import MAX_CHUNKS, Fetcher, by_leader
from riverlog.client.consumer.subscription import SubscriptionState
from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder
from riverlog.common.records.header import set_base_offset
from riverlog.v1 import data_pb2

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def load(
    gateway: FakeGateway, sizes: list[int], partition: int = 0, gap_every: int = 0
) -> list[int]:
    """Store batches of `sizes` records (values of 100 B) straight into the fake log; with
    `gap_every`, every so many batches the offsets skip ten (as after compaction). Returns
    every stored offset."""
    part = gateway.topics["t"].partitions[partition]
    offsets: list[int] = []
    base = part.end
    for n, size in enumerate(sizes):
        if gap_every and n and n % gap_every == 0:
            base += 10
        builder = BatchBuilder()
        for i in range(size):
            builder.append(1000 + base + i, None, b"%08d" % (base + i) + b"x" * 92)
        batch = bytearray(builder.build())
        set_base_offset(batch, 0, base)
        part.batches.append((base, base + size, bytes(batch)))
        offsets.extend(range(base, base + size))
        base += size
    return offsets


def consumer(fake: FakeServer, **config: object) -> Consumer:
    conf: dict[str, object] = {
        "bootstrap.servers": fake.address,
        "fetch.max.wait.ms": 10,
        "auto.offset.reset": "earliest",
        "max.partition.fetch.bytes": 4096,  # ~40 records a chunk: many chunks
    }
    return Consumer({**conf, **config})


def drain(
    c: Consumer, want: int, rounds: int = 400, max_records: int | None = None
) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    for _ in range(rounds):
        for records in c.poll(timeout_ms=200, max_records=max_records).values():
            out.extend(records)
        if len(out) >= want:
            break
    return out


def poll_until(c: Consumer, condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        c.poll(timeout_ms=20)


def test_several_fetches_in_flight_for_one_partition(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    offsets = load(gateway, [10] * 100)
    with consumer(fake, max_poll_records=5) as c:
        c.assign([TP0])
        first = drain(c, 1)
        most = 0
        for _ in range(100):
            c.poll(timeout_ms=50, max_records=1)
            most = max(most, len(c._fetcher._chains[TP0]))
            if most == MAX_CHUNKS:
                break
        assert most == MAX_CHUNKS  # fetched ahead past the chunk being drained
        c.seek(TP0, first[-1].offset + 1)
        rest = drain(c, len(offsets) - len(first))
    assert [r.offset for r in first + rest] == offsets


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_uneven_batches_overlaps_and_gaps(
    fake: FakeServer, gateway: FakeGateway, seed: int
) -> None:
    """Chunk ends guessed from the last chunk are wrong both ways here; nothing is lost or
    handed out twice."""
    rng = random.Random(seed)
    gateway.create("t", 2)
    offsets = load(gateway, [rng.choice([1, 3, 17, 25, 60]) for _ in range(120)])
    other = load(gateway, [rng.randint(1, 30) for _ in range(40)], partition=1, gap_every=7)
    with consumer(fake, max_poll_records=rng.choice([7, 100, 500])) as c:
        c.assign([TP0, TP1])
        records = drain(c, len(offsets) + len(other))
    assert [r.offset for r in records if r.partition == 0] == offsets
    assert [r.offset for r in records if r.partition == 1] == other
    for r in records:
        assert r.value[:8] == b"%08d" % r.offset


def test_seek_discards_chunks_in_flight(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    offsets = load(gateway, [20] * 50)
    with consumer(fake) as c:
        c.assign([TP0])
        assert drain(c, 1, rounds=20)
        assert c._fetcher.in_flight
        c.seek(TP0, 500)
        after = drain(c, 500)
        assert [r.offset for r in after] == offsets[500:]
        c.seek(TP0, 3)
        assert [r.offset for r in c.poll(timeout_ms=1000, max_records=4)[TP0]] == [3, 4, 5, 6]


def test_revoked_partition_prefetch_is_dropped(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 2)
    load(gateway, [20] * 30)
    theirs = load(gateway, [20] * 30, partition=1)
    with consumer(fake, max_poll_records=1) as c:
        c.assign([TP0, TP1])
        for _ in range(20):
            c.poll(timeout_ms=50)
        c.assign([TP1])
        records = drain(c, len(theirs), max_records=100)
        assert TP0 not in c._fetcher._chains
    assert {r.partition for r in records} == {1}
    offsets = [r.offset for r in records]
    assert offsets == theirs[theirs.index(offsets[0]) :]


def test_error_ahead_of_the_position_waits_for_the_position(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    """A fatal partition error is raised once the records before it are consumed (an answer
    to a fetch ahead of the position only drops the chunks from there on)."""
    gateway.create("t", 1)
    load(gateway, [20] * 40)
    with consumer(fake, max_poll_records=7) as c:
        c.assign([TP0])
        seen = [r.offset for r in drain(c, 1)]
        gateway.fetch_errors.extend([ErrorCode.TOPIC_AUTHORIZATION_FAILED] * 10_000)
        with pytest.raises(RiverlogError, match="t-0") as info:
            for _ in range(200):
                for records in c.poll(timeout_ms=100).values():
                    seen.extend(r.offset for r in records)
        assert info.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert seen == list(range(len(seen)))
        gateway.fetch_errors.clear()
        rest = drain(c, 800 - len(seen))
    assert seen + [r.offset for r in rest] == list(range(800))


def test_retriable_error_of_a_fetch_ahead_loses_nothing(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    offsets = load(gateway, [20] * 40)
    with consumer(fake, retry_backoff_ms=5, max_poll_records=3) as c:
        c.assign([TP0])
        records = drain(c, 10)
        gateway.fetch_errors.extend([ErrorCode.NOT_LEADER_OR_FOLLOWER] * 3)
        records += drain(c, len(offsets) - len(records))
    assert [r.offset for r in records] == offsets


def test_strict_leader_sizes(fake: FakeServer, gateway: FakeGateway) -> None:
    """Against a leader that answers nothing for a partition whose first batch exceeds its
    size (storage nodes do so for all but a request's first partition), gap-sized fills that
    meet a larger batch are asked again in full: nothing is lost."""
    gateway.create("t", 1)
    gateway.strict_fetch_sizes = True
    offsets = load(gateway, ([2] * 20 + [30] * 3) * 6)
    with consumer(fake, max_poll_records=2) as c:
        c.assign([TP0])
        records = drain(c, len(offsets), rounds=3000)
    assert [r.offset for r in records] == offsets


def batch_at(base: int, count: int) -> bytes:
    builder = BatchBuilder()
    for _ in range(count):
        builder.append(1000, None, b"x" * 100)
    data = bytearray(builder.build())
    set_base_offset(data, 0, base)
    return bytes(data)


def test_gap_fill_answered_empty_goes_again_in_full() -> None:
    """The fill of a gap asks for about the gap's size; answered with nothing (its first batch
    was larger), only the fill is dropped and the next one asks for the full size."""
    subs = SubscriptionState("earliest")
    subs.assign([TP0])
    state = subs.partitions[TP0]
    state.seek(0)
    config = ConsumerConfig.from_kafka(
        {"bootstrap.servers": "127.0.0.1:1", "max.partition.fetch.bytes": 4096}
    )
    fetcher = Fetcher(config, cast(GatewayConnection, None), subs)
    first, after = Chunk(TP0, state.epoch, 0, 4096), Chunk(TP0, state.epoch, 20, 4096)
    assert first.answer(batch_at(0, 10)) and after.answer(batch_at(20, 10))
    chain = fetcher._chains[TP0] = deque([first, after])
    fetcher._density[TP0] = 110.0
    offset, index, size = cast(tuple[int, int, int], fetcher._plan(TP0, state, MAX_CHUNKS, 4096))
    assert (offset, index) == (10, 1) and size < 4096
    fill = Chunk(TP0, state.epoch, offset, size, 4096)  # a fill: less than the full 4096
    chain.insert(index, fill)
    empty = data_pb2.FetchPartitionResponse(topic="t", partition=0, high_watermark=30)
    fetcher._handle(data_pb2.FetchResponse(partitions=[empty]), {TP0: fill})
    assert list(chain) == [first, after]
    assert fetcher._plan(TP0, state, MAX_CHUNKS, 4096) == (10, 1, 4096)


def test_by_leader_groups_in_order_of_first_appearance() -> None:
    leaders = {"a": 2, "b": 1, "c": 2, "d": -1, "e": 1, "f": -1}
    assert by_leader("abcdef", leaders.__getitem__) == [["a", "c"], ["b", "e"], ["d", "f"]]
    assert by_leader([], leaders.__getitem__) == []


def test_fetches_go_one_request_per_leader(fake: FakeServer, gateway: FakeGateway) -> None:
    """A round of fetches over partitions on two leaders is two requests, each naming one
    leader's partitions only (a request spanning leaders waits for all of them)."""
    gateway.create("t", 4)
    gateway.topics["t"].leaders = [1, 2, 1, 2]
    expected = {p: load(gateway, [5] * 4, partition=p) for p in range(4)}
    with consumer(fake) as c:
        c.assign([TopicPartition("t", p) for p in range(4)])
        got = drain(c, sum(map(len, expected.values())))
    by_partition: dict[int, list[int]] = {}
    for r in got:
        by_partition.setdefault(r.partition, []).append(r.offset)
    assert by_partition == expected
    groups = {frozenset(p for _, p in request) for request in gateway.fetch_requests}
    assert groups and all(g <= {0, 2} or g <= {1, 3} for g in groups)


def test_partitions_of_unknown_leader_share_one_request(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 3)
    gateway.topics["t"].leaders = [-1, -1, -1]
    with consumer(fake) as c:
        c.assign([TopicPartition("t", p) for p in range(3)])
        poll_until(c, lambda: bool(gateway.fetch_requests))
    assert gateway.fetch_requests[0] == [("t", 0), ("t", 1), ("t", 2)]


def test_a_moved_leader_makes_the_consumer_look_the_leaders_up_again(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    """An error that says the metadata changed drops the cached leaders, so the next round of
    fetches is grouped by fresh ones; the records still all arrive."""
    gateway.create("t", 2)
    gateway.topics["t"].leaders = [1, 2]
    with consumer(fake) as c:
        c.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
        poll_until(c, lambda: bool(gateway.fetch_requests))
        looked_up = gateway.metadata_calls
        gateway.fetch_errors.append(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        offsets = load(gateway, [5], partition=0) + load(gateway, [5], partition=1)
        got = drain(c, len(offsets))
    assert sorted(r.offset for r in got) == sorted(offsets)
    assert gateway.metadata_calls > looked_up


def test_leaders_missing_from_the_metadata_are_not_looked_up_at_every_fetch(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    """A topic the metadata does not name (yet): its fetches go without a leader, and the
    consumer asks for it again after a pause, not in every round of fetches."""
    gateway.create("t", 1)
    gateway.metadata_hidden.add("t")
    with consumer(fake) as c:  # fetch.max.wait.ms 10: a round every 10 ms or so
        c.assign([TopicPartition("t", 0)])
        poll_until(c, lambda: len(gateway.fetch_requests) >= 10)
    assert gateway.metadata_calls <= 2
