"""Node configs travel in the image: snapshot, upserts, removals, and through the protos."""

from types import MappingProxyType

from riverlog.common.cluster.convert import delta_from_proto, delta_to_proto
from riverlog.common.cluster.image import ClusterDelta, ClusterImage

RATE = "leader.replication.throttled.rate"


def test_snapshot_upsert_and_removal() -> None:
    image = ClusterImage.empty().apply_delta(
        ClusterDelta(1, 1, 1, "c", snapshot=True, node_configs=(("", {RATE: "10"}),))
    )
    assert dict(image.node_configs) == {"": {RATE: "10"}}
    image = image.apply_delta(ClusterDelta(2, 1, 1, node_configs=(("2", {RATE: "5"}),)))
    assert set(image.node_configs) == {"", "2"}
    image = image.apply_delta(ClusterDelta(3, 1, 1, removed_node_configs=("",)))
    assert dict(image.node_configs) == {"2": {RATE: "5"}}
    assert image.to_snapshot().node_configs == (("2", {RATE: "5"}),)


def test_proto_round_trip() -> None:
    delta = ClusterDelta(
        7,
        1,
        1,
        node_configs=(("", MappingProxyType({RATE: "1"})),),
        removed_node_configs=("3",),
    )
    back = delta_from_proto(delta_to_proto(delta))
    assert [(n, dict(c)) for n, c in back.node_configs] == [("", {RATE: "1"})]
    assert back.removed_node_configs == ("3",)
