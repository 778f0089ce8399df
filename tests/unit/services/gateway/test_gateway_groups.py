"""Group routing at the gateway: a group goes to the owner of its `__consumer_offsets`
partition, coordinator moves are retried against newer metadata until the deadline, ListGroups
asks every coordinator."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

from gateway_fakes import FAST, FakeSource, make_image

from riverlog.common.cluster import ClusterImage, CoordinatorAssignment, NodeInfo
from riverlog.common.cluster.image import group_partition
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.gateway.context import Deadline
from riverlog.services.gateway.groups import GroupRouter
from riverlog.services.gateway.routing.metadata_cache import MetadataCache
from riverlog.services.gateway.rpc.groups import find, host_of, list_groups
from riverlog.v1 import coordinator_pb2 as pb

COORDS = (
    NodeInfo("coordinator", 1, "127.0.0.1", 7001),
    NodeInfo("coordinator", 2, "127.0.0.1", 7002),
)


def image(version: int, owners: list[int]) -> ClusterImage:
    base = make_image(version, {"__consumer_offsets": [1] * len(owners)}, extra_nodes=COORDS)
    assignments = {p: CoordinatorAssignment(p, o, version) for p, o in enumerate(owners)}
    return replace(base, coordinators=MappingProxyType(assignments))


class FakePeers:
    def __init__(self) -> None:
        self.calls: list[tuple[int, str]] = []
        self.answers: dict[int, Any] = {}

    async def call(self, node: NodeInfo, method: str, request: Any, timeout_s: float) -> Any:
        self.calls.append((node.node_id, method))
        answer = self.answers[node.node_id]
        if isinstance(answer, RiverlogError):
            raise answer
        return answer


def router(source: FakeSource, peers: FakePeers) -> GroupRouter:
    return GroupRouter(MetadataCache(source), peers, FAST)  # type: ignore[arg-type]


def test_group_partition_is_kafkas() -> None:
    # Java: Math.abs("group".hashCode()) % 50 with hashCode 98629247
    assert group_partition("group", 50) == 98629247 % 50
    assert all(0 <= group_partition(g, 7) < 7 for g in ("", "a", "ü-group", "x" * 300))


async def test_a_group_goes_to_its_owner_and_follows_a_move() -> None:
    owners = [1, 1, 1, 1]
    source = FakeSource(image(1, owners))
    peers = FakePeers()
    peers.answers[1] = pb.GroupHeartbeatResponse(error_code=ErrorCode.NOT_COORDINATOR)
    peers.answers[2] = pb.GroupHeartbeatResponse(error_code=ErrorCode.NONE)
    groups = router(source, peers)
    p = group_partition("g", 4)
    moved = list(owners)
    moved[p] = 2
    request = pb.GroupHeartbeatRequest(group_id="g")

    async def publish_later() -> None:
        await source.publish(image(2, moved))

    import asyncio

    task = asyncio.create_task(publish_later())
    response = await groups.call(
        "g", "Heartbeat", request, pb.GroupHeartbeatResponse, Deadline.after(2)
    )
    await task
    assert response.error_code == ErrorCode.NONE
    assert peers.calls[0] == (1, "Heartbeat") and peers.calls[-1] == (2, "Heartbeat")


async def test_gives_up_at_the_deadline_with_the_last_error() -> None:
    source = FakeSource(image(1, [1, 1]))
    peers = FakePeers()
    peers.answers[1] = RiverlogError("down", ErrorCode.COORDINATOR_NOT_AVAILABLE)
    response = await router(source, peers).call(
        "g",
        "JoinGroup",
        pb.JoinGroupRequest(group_id="g"),
        pb.JoinGroupResponse,
        Deadline.after(0.2),
    )
    assert response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert len(peers.calls) >= 2


async def test_non_routing_errors_are_returned_at_once() -> None:
    source = FakeSource(image(1, [2]))
    peers = FakePeers()
    peers.answers[2] = pb.SyncGroupResponse(error_code=ErrorCode.ILLEGAL_GENERATION)
    response = await router(source, peers).call(
        "g", "SyncGroup", pb.SyncGroupRequest(group_id="g"), pb.SyncGroupResponse, Deadline.after(2)
    )
    assert response.error_code == ErrorCode.ILLEGAL_GENERATION
    assert peers.calls == [(2, "SyncGroup")]


async def test_list_groups_asks_every_coordinator_and_find_uses_the_image() -> None:
    source = FakeSource(image(1, [1, 2]))
    peers = FakePeers()
    peers.answers[1] = pb.ListGroupsResponse(
        groups=[pb.ListedGroup(group_id="a", group_state="Stable")]
    )
    peers.answers[2] = pb.ListGroupsResponse(
        groups=[pb.ListedGroup(group_id="b", group_state="Empty")]
    )
    groups = router(source, peers)
    listed = await list_groups(groups, pb.ListGroupsRequest(), Deadline.after(2))
    assert sorted(g.group_id for g in listed.groups) == ["a", "b"]
    found = find(groups, pb.FindCoordinatorRequest(keys=["g"])).coordinators[0]
    p = group_partition("g", 2)
    assert (found.partition, found.node_id, found.port) == (p, [1, 2][p], 7000 + [1, 2][p])
    empty = router(FakeSource(make_image(1, {})), peers)
    missing = find(empty, pb.FindCoordinatorRequest(keys=["g"])).coordinators[0]
    assert missing.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_host_of_peer() -> None:
    assert host_of("ipv4:127.0.0.1:5555") == "127.0.0.1"
    assert host_of("ipv6:[::1]:5555") == "::1"
