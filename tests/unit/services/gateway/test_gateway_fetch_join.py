"""A multi-leader fetch against leaders that long-poll as storage nodes do: the long polls a
request stops waiting for are joined by the same client's next fetch of the same partitions at
the same offsets (never by another client's, never after a seek), and min_bytes counts the
bytes of all the leaders."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import defaultdict
from types import MappingProxyType

from gateway_fakes import Harness

from riverlog.common.cluster.image import ClusterImage
from riverlog.common.records.builder import BatchBuilder
from riverlog.common.records.header import set_base_offset
from riverlog.common.records.reader import iter_batches_records
from riverlog.common.types import TopicPartition
from riverlog.services.gateway.context import Deadline, RequestContext
from riverlog.services.gateway.fetch import FetchOptions, FetchPart, FetchPartResult

T0 = TopicPartition("t", 0)  # led by node 1
T1 = TopicPartition("t", 1)  # led by node 2
LONG = FetchOptions(max_wait_ms=20_000, min_bytes=1, max_bytes=100_000)


def batch(offset: int, value: bytes) -> bytes:
    builder = BatchBuilder()
    builder.append(1_700_000_000_000, None, value)
    data = bytearray(builder.build())
    set_base_offset(data, 0, offset)
    return bytes(data)


class Leaders:
    """Partition logs of single-record batches; `fetch` answers as a leader does: at once when
    the partitions asked hold min_bytes from their offsets, else when that much arrives or
    max_wait passes."""

    def __init__(self) -> None:
        self.logs: dict[TopicPartition, list[bytes]] = defaultdict(list)
        self.calls: list[tuple[int, tuple[tuple[TopicPartition, int], ...], FetchOptions]] = []
        self.changed = asyncio.Event()

    def append(self, tp: TopicPartition, value: bytes) -> None:
        log = self.logs[tp]
        log.append(batch(len(log), value))
        self.changed.set()
        self.changed = asyncio.Event()

    def asked(self, node_id: int) -> list[tuple[tuple[TopicPartition, int], ...]]:
        return [parts for node, parts, _ in self.calls if node == node_id]

    def _read(self, options: FetchOptions, parts: list[FetchPart]) -> list[FetchPartResult]:
        out = []
        for part in parts:
            log = self.logs[part.tp]
            data = b"".join(log[part.fetch_offset :])[: max(part.partition_max_bytes, 1)]
            out.append(FetchPartResult(part.tp, high_watermark=len(log), records=data))
        return out

    async def fetch(self, node, options, parts, deadline):
        self.calls.append((node.node_id, tuple((p.tp, p.fetch_offset) for p in parts), options))
        loop = asyncio.get_running_loop()
        end = loop.time() + options.max_wait_ms / 1000
        while True:
            results = self._read(options, parts)
            size = sum(len(r.records) for r in results)
            remaining = end - loop.time()
            if size >= max(options.min_bytes, 1) or options.min_bytes == 0 or remaining <= 0:
                return results
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except TimeoutError:
                pass


def setup(harness: Harness) -> Leaders:
    leaders = Leaders()
    harness.storage.fetch = leaders.fetch
    return leaders


def ctx(client_id: str = "consumer-1", peer: str = "ipv4:127.0.0.1:5000") -> RequestContext:
    return RequestContext("Fetch", Deadline.after(30), client_id=client_id, peer=peer)


def values(result: FetchPartResult) -> list[tuple[int, bytes]]:
    return [(row.offset, row.value) for row in iter_batches_records(result.records)]


async def until(condition, what: str) -> None:
    """Let the loop run until `condition()` holds (bounded)."""
    try:
        async with asyncio.timeout(5):
            while not condition():
                await asyncio.sleep(0.001)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


async def first_fetch(harness: Harness, leaders: Leaders) -> None:
    """t/0 answers, t/1's long poll (node 2) is abandoned and parked."""
    leaders.append(T0, b"a")
    results = await asyncio.wait_for(
        harness.fetcher.fetch(ctx(), LONG, [FetchPart(T0, 0), FetchPart(T1, 0)]), 5
    )
    assert [values(r) for r in results] == [[(0, b"a")], []]
    assert len(harness.fetcher.pending) == 1


async def topping_up(
    harness: Harness,
) -> tuple[Leaders, FetchOptions, asyncio.Future[list[FetchPartResult]]]:
    """min_bytes is three records, two of them on t/0: a fetch of t/0 and t/1 from offset 0,
    returned once t/0 has answered its share and been asked again, from offset 2, for the rest
    (that top-up still waiting)."""
    leaders = setup(harness)
    leaders.append(T0, b"a")
    leaders.append(T0, b"b")
    size = len(leaders.logs[T0][0])
    options = FetchOptions(max_wait_ms=20_000, min_bytes=3 * size, max_bytes=100_000)
    request = asyncio.ensure_future(
        harness.fetcher.fetch(ctx(), options, [FetchPart(T0, 0), FetchPart(T1, 0)])
    )
    await until(lambda: len(leaders.asked(1)) == 2, "t/0 asked again")
    return leaders, options, request


async def test_the_next_fetch_joins_a_running_parked_poll_instead_of_asking_again(
    harness: Harness,
) -> None:
    leaders = setup(harness)
    await first_fetch(harness, leaders)
    second = asyncio.ensure_future(
        harness.fetcher.fetch(ctx(), LONG, [FetchPart(T0, 1), FetchPart(T1, 0)])
    )
    await until(lambda: not harness.fetcher.pending, "the parked poll taken")
    leaders.append(T1, b"b")  # the first request's poll on node 2 answers now
    results = await asyncio.wait_for(second, 5)
    assert [values(r) for r in results] == [[], [(0, b"b")]]
    assert leaders.asked(2) == [((T1, 0),)]  # one long poll on node 2, not two
    # node 1's poll of the second request (t/0 at 1) is parked in turn
    assert len(harness.fetcher.pending) == 1


async def test_a_parked_answer_is_returned_by_the_next_fetch_without_a_second_read(
    harness: Harness,
) -> None:
    leaders = setup(harness)
    await first_fetch(harness, leaders)
    leaders.append(T1, b"b")
    await until(lambda: harness.fetcher.pending.held_bytes > 0, "the parked poll answered")
    results = await asyncio.wait_for(
        harness.fetcher.fetch(ctx(), LONG, [FetchPart(T0, 1), FetchPart(T1, 0)]), 5
    )
    assert [values(r) for r in results] == [[], [(0, b"b")]]
    assert leaders.asked(2) == [((T1, 0),)]
    assert harness.fetcher.pending.joined == 1


async def test_another_consumer_or_a_seek_never_gets_a_parked_answer(harness: Harness) -> None:
    leaders = setup(harness)
    await first_fetch(harness, leaders)
    leaders.append(T1, b"b")
    await until(lambda: harness.fetcher.pending.held_bytes > 0, "the parked poll answered")
    pending = harness.fetcher.pending
    # another consumer (client id or connection) reads for itself
    for other in (ctx("consumer-2"), ctx(peer="ipv4:127.0.0.1:5001")):
        [result] = await harness.fetcher.fetch(other, LONG, [FetchPart(T1, 0)])
        assert values(result) == [(0, b"b")]
    assert len(leaders.asked(2)) == 3
    assert pending.joined == 0
    # the first consumer seeks t/1 to offset 1: the answer parked for offset 0 is not used
    leaders.append(T1, b"c")
    [result] = await harness.fetcher.fetch(ctx(), LONG, [FetchPart(T1, 1)])
    assert values(result) == [(1, b"c")]
    assert leaders.asked(2)[-1] == ((T1, 1),)
    assert pending.joined == 0 and pending.held_bytes > 0  # still parked, until its wait ends


def epoch_moved(image: ClusterImage, tp: TopicPartition) -> ClusterImage:
    """`image` with the next leader epoch for `tp` (same leader) and the next version."""
    topic = image.topics[tp.topic]
    partitions = list(topic.partitions)
    old = partitions[tp.partition]
    partitions[tp.partition] = dataclasses.replace(old, leader_epoch=old.leader_epoch + 1)
    topics = dict(image.topics)
    topics[tp.topic] = dataclasses.replace(topic, partitions=tuple(partitions))
    return dataclasses.replace(image, version=image.version + 1, topics=MappingProxyType(topics))


async def test_a_parked_answer_is_not_joined_once_the_leader_epoch_moved(
    harness: Harness,
) -> None:
    """An answer parked before a leader change may hold records the new leader's log no
    longer has (truncated): a fetch made once the metadata shows the new epoch reads afresh."""
    leaders = setup(harness)
    await first_fetch(harness, leaders)
    leaders.append(T1, b"b")
    await until(lambda: harness.fetcher.pending.held_bytes > 0, "the parked poll answered")
    leaders.logs[T1].clear()  # truncated by the leader change; the new leader has another
    leaders.append(T1, b"c")
    await harness.source.publish(epoch_moved(harness.source.image, T1))
    results = await asyncio.wait_for(
        harness.fetcher.fetch(ctx(), LONG, [FetchPart(T0, 1), FetchPart(T1, 0)]), 5
    )
    assert [values(r) for r in results] == [[], [(0, b"c")]]
    assert harness.fetcher.pending.joined == 0
    assert leaders.asked(2) == [((T1, 0),), ((T1, 0),)]


async def test_a_joined_poll_that_ends_empty_leaves_the_request_its_own_wait(
    harness: Harness,
) -> None:
    leaders = setup(harness)
    leaders.append(T0, b"a")
    short = FetchOptions(max_wait_ms=100, min_bytes=1, max_bytes=100_000)
    await harness.fetcher.fetch(ctx(), short, [FetchPart(T0, 0), FetchPart(T1, 0)])
    second = asyncio.ensure_future(
        harness.fetcher.fetch(ctx(), LONG, [FetchPart(T0, 1), FetchPart(T1, 0)])
    )
    # the joined poll's 100 ms wait runs out empty; the request asks node 2 again with its own
    await until(lambda: len(leaders.asked(2)) == 2, "node 2 asked again")
    leaders.append(T1, b"b")
    results = await asyncio.wait_for(second, 5)
    assert [values(r) for r in results] == [[], [(0, b"b")]]
    assert leaders.calls[-1][2].max_wait_ms > 100


async def test_min_bytes_is_met_by_the_bytes_of_several_leaders(harness: Harness) -> None:
    """Neither leader alone holds min_bytes, together they do: the request answers at once
    (each leader was asked for its share) instead of waiting out max_wait."""
    leaders = setup(harness)
    leaders.append(T0, b"a")
    leaders.append(T1, b"b")
    size = len(leaders.logs[T0][0])
    options = FetchOptions(max_wait_ms=20_000, min_bytes=2 * size - 1, max_bytes=100_000)
    results = await asyncio.wait_for(
        harness.fetcher.fetch(ctx(), options, [FetchPart(T0, 0), FetchPart(T1, 0)]), 5
    )
    assert [values(r) for r in results] == [[(0, b"a")], [(0, b"b")]]
    assert [call[2].min_bytes for call in leaders.calls[:2]] == [size, size]


async def test_one_leader_holding_more_than_its_share_meets_min_bytes_alone(
    harness: Harness,
) -> None:
    """min_bytes is three records, all on t/0: t/0 answers its share (two records), is asked
    again from offset 2 for the rest, and the request answers with all three in one piece,
    not at max_wait."""
    leaders, _, request = await topping_up(harness)
    size = len(leaders.logs[T0][0])
    assert leaders.asked(1) == [((T0, 0),), ((T0, 2),)]
    assert leaders.calls[-1][2].min_bytes == size  # only what is missing
    leaders.append(T0, b"c")
    results = await asyncio.wait_for(request, 5)
    assert [values(r) for r in results] == [[(0, b"a"), (1, b"b"), (2, b"c")], []]
    assert results[0].high_watermark == 3


async def test_a_top_up_cut_short_is_parked_for_the_next_fetch(harness: Harness) -> None:
    """t/0's top-up (from offset 2) is still waiting when t/1's record meets min_bytes: it is
    parked, and the next fetch, at offset 2, joins it instead of asking t/0 a third time."""
    leaders, options, request = await topping_up(harness)
    leaders.append(T1, b"x")
    leaders.append(T1, b"y")  # t/1's share: it answers, and min_bytes is met
    results = await asyncio.wait_for(request, 5)
    assert [values(r) for r in results] == [[(0, b"a"), (1, b"b")], [(0, b"x"), (1, b"y")]]
    second = asyncio.ensure_future(
        harness.fetcher.fetch(ctx(), options, [FetchPart(T0, 2), FetchPart(T1, 2)])
    )
    await until(lambda: harness.fetcher.pending.joined == 1, "the top-up joined")
    leaders.append(T0, b"c")
    leaders.append(T0, b"d")
    leaders.append(T0, b"e")
    results = await asyncio.wait_for(second, 5)
    assert values(results[0])[0] == (2, b"c")
    assert leaders.asked(1) == [((T0, 0),), ((T0, 2),)]
