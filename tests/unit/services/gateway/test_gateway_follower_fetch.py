"""The gateway's fetch from the closest replica (decision 0038), over scripted storage peers: a
consumer's fetch with a rack goes to that rack's in-sync follower; a partition the follower
fails is read again from the leader within the same request, and the follower is passed over
for metadata.max.age.ms; without a rack, with the leader selector or with the follower out of
the ISR, fetches go to the leader."""

import dataclasses
from types import MappingProxyType

from gateway_fakes import FAST, Harness, make_image

from riverlog.common.clock import ManualClock
from riverlog.common.cluster import ClusterImage, TopicInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import IsolationLevel, TopicPartition
from riverlog.services.gateway.fetch import FetchOptions, FetchPart, FetchPartResult
from riverlog.services.gateway.records import PlainRecords
from riverlog.services.gateway.rpc import convert
from riverlog.v1 import data_pb2

TP = TopicPartition("t", 0)
RACKS = {1: "a", 2: "b", 3: "c"}
RACK_AWARE = dataclasses.replace(
    FAST, replica_selector_class="rack-aware", metadata_max_age_ms=1_000
)


def racked(image: ClusterImage, isr: tuple[int, ...] = (1, 2, 3)) -> ClusterImage:
    """`image` with racks a/b/c on nodes 1/2/3 and topic t's ISR set to `isr`."""
    nodes = {k: dataclasses.replace(n, rack=RACKS[n.node_id]) for k, n in image.nodes.items()}
    t = image.topics["t"]
    parts = tuple(dataclasses.replace(p, isr=isr) for p in t.partitions)
    topics = dict(image.topics)
    topics["t"] = TopicInfo(t.name, t.topic_id, parts)
    return dataclasses.replace(
        image, nodes=MappingProxyType(nodes), topics=MappingProxyType(topics)
    )


def harness(config=RACK_AWARE, isr=(1, 2, 3), clock=None) -> Harness:
    return Harness(racked(make_image(1, {"t": [1]}), isr), config, clock or ManualClock())


async def fetch(h: Harness, rack: str, offset: int = 0) -> FetchPartResult:
    options = FetchOptions(max_bytes=1 << 20, rack_id=rack)
    [result] = await h.fetcher.fetch(h.ctx(), options, [FetchPart(TP, offset)])
    return result


async def test_a_consumer_with_a_rack_reads_from_its_racks_follower() -> None:
    h = harness()
    result = await fetch(h, "b")
    assert result.error_code == ErrorCode.NONE
    assert h.storage.nodes_called("fetch") == [2]
    # The rack reaches the storage node: it is what lets a follower serve a consumer.
    assert h.storage.calls[0][3].rack_id == "b"


async def test_the_leaders_rack_no_rack_or_an_unknown_rack_read_from_the_leader() -> None:
    h = harness()
    for rack in ("a", "", "z"):
        await fetch(h, rack)
    assert h.storage.nodes_called("fetch") == [1, 1, 1]


async def test_the_leader_selector_ignores_the_rack() -> None:
    h = harness(config=FAST)
    await fetch(h, "b")
    assert h.storage.nodes_called("fetch") == [1]


async def test_a_follower_out_of_the_isr_is_not_chosen() -> None:
    h = harness(isr=(1, 3))
    await fetch(h, "b")
    assert h.storage.nodes_called("fetch") == [1]


async def test_a_follower_behind_the_position_is_replaced_by_the_leader_until_max_age() -> None:
    clock = ManualClock()
    h = harness(clock=clock)

    def answer(node_id: int, item: FetchPart) -> FetchPartResult:
        if node_id == 2:
            return FetchPartResult(item.tp, int(ErrorCode.OFFSET_NOT_AVAILABLE), "behind")
        return FetchPartResult(item.tp, high_watermark=10)

    h.storage.answer = answer
    result = await fetch(h, "b", offset=7)
    # The client never sees the follower's error: the leader answered in the same request.
    assert (result.error_code, result.high_watermark) == (ErrorCode.NONE, 10)
    assert h.storage.nodes_called("fetch") == [2, 1]
    await fetch(h, "b", offset=7)
    assert h.storage.nodes_called("fetch") == [2, 1, 1]  # passed over for metadata.max.age.ms
    clock.advance(1_000)
    h.storage.answer = lambda node_id, item: None
    await fetch(h, "b", offset=7)
    assert h.storage.nodes_called("fetch") == [2, 1, 1, 2]  # chosen again afterwards


async def test_an_unreachable_follower_is_replaced_by_the_leader() -> None:
    h = harness()

    def answer(node_id: int, item: FetchPart) -> object:
        if node_id == 2:
            return RiverlogError("connection refused", ErrorCode.NETWORK_EXCEPTION)
        return FetchPartResult(item.tp, high_watermark=5)

    h.storage.answer = answer
    result = await fetch(h, "b")
    assert (result.error_code, result.high_watermark) == (ErrorCode.NONE, 5)
    assert h.storage.nodes_called("fetch") == [2, 1]


async def test_an_error_from_the_leader_is_the_answer() -> None:
    h = harness()
    h.storage.answer = lambda node_id, item: FetchPartResult(
        item.tp, int(ErrorCode.OFFSET_OUT_OF_RANGE), "out of range"
    )
    result = await fetch(h, "a")
    assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert h.storage.nodes_called("fetch") == [1]


async def test_the_leaders_answer_after_a_follower_route_error_is_final() -> None:
    h = harness()

    def answer(node_id: int, item: FetchPart) -> FetchPartResult:
        if node_id == 2:  # e.g. the follower no longer hosts the partition
            return FetchPartResult(item.tp, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "moved")
        return FetchPartResult(item.tp, int(ErrorCode.OFFSET_OUT_OF_RANGE), "out of range")

    h.storage.answer = answer
    result = await fetch(h, "b", offset=99)
    assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert h.storage.nodes_called("fetch") == [2, 1]  # the leader is asked once, not twice


async def test_fetch_records_with_a_rack_reads_from_that_racks_follower() -> None:
    h = harness()
    plain = PlainRecords(h.cache, h.producer, h.fetcher)
    result = await plain.fetch(
        h.ctx(),
        TP,
        0,
        max_records=0,
        max_bytes=0,
        max_wait_ms=0,
        isolation_level=IsolationLevel.READ_UNCOMMITTED,
        rack_id="c",
    )
    assert result.error_code == ErrorCode.NONE
    assert h.storage.nodes_called("fetch") == [3]


def test_the_wire_rack_reaches_the_fetch_options() -> None:
    request = data_pb2.FetchRequest(max_bytes=1, rack_id="b")
    options, _ = convert.fetch_from_proto(request)
    assert options.rack_id == "b"
