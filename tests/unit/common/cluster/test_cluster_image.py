"""apply_update (a Watch update through ClusterImage.apply_delta): snapshots replace, deltas
upsert and remove, older updates are ignored; the helpers; and proto round trips of every
image type."""

from __future__ import annotations

from riverlog.common.cluster.convert import apply_update, delta_from_proto, delta_to_proto
from riverlog.common.cluster.image import (
    ClusterDelta,
    ClusterImage,
    NodeInfo,
    PartitionInfo,
    TopicInfo,
)
from riverlog.common.types import TopicPartition
from riverlog.v1 import common_pb2, metadata_pb2

S1 = NodeInfo("storage", 1, "127.0.0.1", 9001, "r1", 9101, 11)
S2 = NodeInfo("storage", 2, "127.0.0.1", 9002)
G1 = NodeInfo("gateway", 1, "127.0.0.1", 9201)
T = TopicInfo(
    "t",
    "id-t",
    (PartitionInfo(0, 1, 0, (1, 2), (1, 2)), PartitionInfo(1, 2, 3, (2, 1), (2,), 4)),
    {"retention.ms": "5"},
)


def snapshot(version=10, **kw) -> metadata_pb2.MetadataUpdate:
    delta = ClusterDelta(
        version=version,
        controller_id=0,
        controller_epoch=1,
        cluster_id="c",
        snapshot=True,
        nodes=(S1, S2, G1),
        topics=(T,),
        **kw,
    )
    return delta_to_proto(delta)


def test_snapshot_then_helpers():
    image = apply_update(ClusterImage.empty(), snapshot())
    assert image.version == 10 and image.cluster_id == "c" and image.controller_epoch == 1
    assert image.storage_node(1) == S1 and S1.address == "127.0.0.1:9001"
    assert [n.key for n in image.nodes_of_kind("storage")] == [("storage", 1), ("storage", 2)]
    assert image.nodes_of_kind("gateway") == [G1]
    assert image.partition("t", 1) == T.partitions[1]
    assert image.partition("t", 2) is None and image.partition("nope", 0) is None
    assert image.leader_node("t", 1) == S2
    assert dict(image.topics["t"].configs) == {"retention.ms": "5"}


def test_delta_upserts_and_removes():
    image = apply_update(ClusterImage.empty(), snapshot())
    moved = TopicInfo("t", "id-t", (PartitionInfo(0, 2, 1, (1, 2), (2,)),), {})
    delta = metadata_pb2.MetadataUpdate(
        version=11,
        controller_id=2,
        controller_epoch=2,
        removed_nodes=[common_pb2.Node(kind=common_pb2.NODE_KIND_STORAGE, node_id=1)],
        topics=[delta_to_proto(ClusterDelta(0, 0, 0, topics=(moved,))).topics[0]],
    )
    new = apply_update(image, delta)
    assert new.version == 11 and new.controller_id == 2 and new.cluster_id == "c"
    assert new.storage_node(1) is None and new.storage_node(2) == S2
    assert new.partition("t", 0).leader == 2 and new.partition("t", 1) is None
    assert image.storage_node(1) == S1  # the old image is untouched
    gone = apply_update(new, metadata_pb2.MetadataUpdate(version=12, removed_topics=["t", "never"]))
    assert "t" not in gone.topics


def test_leader_node_none_when_offline_or_dead():
    offline = TopicInfo("o", "id", (PartitionInfo(0, -1, 0, (5,), (5,)),))
    image = apply_update(ClusterImage.empty(), snapshot())
    image = image.apply_delta(ClusterDelta(11, 0, 1, topics=(offline,)))
    assert image.leader_node("o", 0) is None
    image = image.apply_delta(
        ClusterDelta(
            12, 0, 1, topics=(TopicInfo("d", "id", (PartitionInfo(0, 7, 0, (7,), (7,)),)),)
        )
    )
    assert image.leader_node("d", 0) is None


def test_old_updates_are_ignored():
    image = apply_update(ClusterImage.empty(), snapshot(version=10))
    assert (
        apply_update(image, metadata_pb2.MetadataUpdate(version=9, removed_topics=["t"])) is image
    )
    assert (
        apply_update(image, metadata_pb2.MetadataUpdate(version=10, removed_topics=["t"])) is image
    )
    assert apply_update(image, snapshot(version=5)) is image


def test_snapshot_replaces_everything():
    image = apply_update(ClusterImage.empty(), snapshot(version=10))
    empty = delta_to_proto(ClusterDelta(20, 1, 3, "c", snapshot=True))
    replaced = apply_update(image, empty)
    assert replaced.nodes == {} and replaced.topics == {} and replaced.controller_epoch == 3


def test_snapshot_of_another_cluster_replaces_even_if_older():
    image = apply_update(ClusterImage.empty(), snapshot(version=10))
    other = delta_to_proto(ClusterDelta(2, 0, 1, "other", snapshot=True))
    assert apply_update(image, other).cluster_id == "other"


def test_round_trip_and_unknown_kinds():
    delta = ClusterDelta(7, 1, 2, "c", False, (S1, G1), (("gateway", 3),), (T,), ("x",))
    assert delta_from_proto(delta_to_proto(delta)) == delta
    msg = delta_to_proto(delta)
    msg.nodes.add(node_id=9, kind=99)  # a kind from a newer server is skipped
    assert delta_from_proto(msg).nodes == (S1, G1)
    assert ClusterImage.empty().apply_delta(delta).to_snapshot().nodes == (G1, S1)


def test_offline_replicas_of_a_storage_node_round_trip():
    offline = frozenset({TopicPartition("t", 1), TopicPartition("a", 0)})
    node = NodeInfo("storage", 4, "h", 1, offline_replicas=offline)
    delta = ClusterDelta(8, 1, 2, "c", False, (node,), (), (), ())
    assert delta_from_proto(delta_to_proto(delta)).nodes == (node,)


def test_metadata_instances_arrive_in_a_snapshot_and_change_only_when_listed():
    image = apply_update(ClusterImage.empty(), snapshot(metadata_addresses=("h:1",)))
    assert image.metadata_addresses == ("h:1",)
    # a delta without the list leaves it; one with it replaces it whole
    image = apply_update(image, metadata_pb2.MetadataUpdate(version=11))
    assert image.metadata_addresses == ("h:1",)
    image = apply_update(image, metadata_pb2.MetadataUpdate(version=12, metadata_addresses=["h:2"]))
    assert image.metadata_addresses == ("h:2",)
    assert image.to_snapshot().metadata_addresses == ("h:2",)
