"""Coordinator ownership in the cluster image: snapshots replace it, deltas upsert it, the
proto round trip keeps it, and a group finds its partition's live coordinator."""

from riverlog.common.cluster.convert import delta_from_proto, delta_to_proto
from riverlog.common.cluster.image import (
    ClusterDelta,
    ClusterImage,
    CoordinatorAssignment,
    NodeInfo,
    PartitionInfo,
    TopicInfo,
    group_partition,
)

COORD = NodeInfo("coordinator", 5, "127.0.0.1", 7005)
OFFSETS = TopicInfo(
    "__consumer_offsets",
    "id",
    tuple(PartitionInfo(p, 1, 0, (1,), (1,)) for p in range(3)),
    internal=True,
)


def test_snapshot_delta_and_round_trip() -> None:
    snapshot = ClusterDelta(
        version=1,
        controller_id=0,
        controller_epoch=1,
        snapshot=True,
        nodes=(COORD,),
        topics=(OFFSETS,),
        coordinators=tuple(CoordinatorAssignment(p, 5, 1, 77) for p in range(3)),
    )
    image = ClusterImage.empty().apply_delta(snapshot)
    assert image.coordinators[2] == CoordinatorAssignment(2, 5, 1, 77)
    delta = ClusterDelta(
        version=2,
        controller_id=0,
        controller_epoch=1,
        coordinators=(CoordinatorAssignment(1, -1, 2),),
    )
    after = image.apply_delta(delta)
    assert after.coordinators[1].coordinator_id == -1
    assert image.coordinators[1].coordinator_id == 5  # images are values
    assert delta_from_proto(delta_to_proto(snapshot)) == snapshot
    assert after.to_snapshot().coordinators == tuple(after.coordinators[p] for p in range(3))


def test_coordinator_for_a_group() -> None:
    image = ClusterImage.empty().apply_delta(
        ClusterDelta(
            version=1,
            controller_id=0,
            controller_epoch=1,
            snapshot=True,
            nodes=(COORD,),
            topics=(OFFSETS,),
            coordinators=(CoordinatorAssignment(group_partition("g", 3), 5, 1),),
        )
    )
    assert image.coordinator_for("g") == (group_partition("g", 3), COORD)
    other = next(
        g for g in ("a", "b", "c", "d", "e") if group_partition(g, 3) != group_partition("g", 3)
    )
    assert image.coordinator_for(other)[1] is None
    assert ClusterImage.empty().coordinator_for("g") == (-1, None)


def test_a_transactional_id_goes_to_the_owner_of_the_offsets_partition_it_maps_onto() -> None:
    """__transaction_state partition q is owned with __consumer_offsets partition q mod 3."""
    txn = TopicInfo(
        "__transaction_state",
        "id2",
        tuple(PartitionInfo(p, 1, 0, (1,), (1,)) for p in range(7)),
        internal=True,
    )
    other = NodeInfo("coordinator", 6, "127.0.0.1", 7006)
    without = ClusterImage.empty().apply_delta(
        ClusterDelta(
            version=1, controller_id=0, controller_epoch=1, snapshot=True, topics=(OFFSETS,)
        )
    )
    assert without.transaction_coordinator_for("t") == (-1, None)
    image = ClusterImage.empty().apply_delta(
        ClusterDelta(
            version=1,
            controller_id=0,
            controller_epoch=1,
            snapshot=True,
            nodes=(COORD, other),
            topics=(OFFSETS, txn),
            coordinators=(
                CoordinatorAssignment(0, 5, 4),
                CoordinatorAssignment(1, 6, 2),
                CoordinatorAssignment(2, -1, 3),
            ),
        )
    )
    owners: dict[int, NodeInfo | None] = {}
    for tid in (f"t{i}" for i in range(40)):
        partition, node = image.transaction_coordinator_for(tid)
        assert partition == group_partition(tid, 7)
        owner = image.transaction_owner(partition)
        assert owner is not None and owner.partition == partition % 3
        owners[partition % 3] = node
    assert owners == {0: COORD, 1: other, 2: None}  # partition 2 has no live owner
