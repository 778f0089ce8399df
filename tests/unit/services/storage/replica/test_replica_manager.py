"""The replica manager follows the cluster image: it hosts exactly the partitions naming this
node, takes leadership and epochs from the image, deletes the logs of deleted (or recreated)
topics and of partitions reassigned away from it (also while it was down), pushes config
changes to the logs, and turns "not here" into the right error code."""

from pathlib import Path

import pytest
from storage_replica_testkit import NODE, OTHER, Node, image, make_batch, make_node, topic

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.storage.replica.partition import Role
from riverlog.services.storage.replica.replica_manager import read_topic_id

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def code_of(excinfo: pytest.ExceptionInfo[RiverlogError]) -> ErrorCode:
    return excinfo.value.code


def test_hosts_only_partitions_naming_this_node(node: Node) -> None:
    node.replicas.apply_image(image(topic("t", leaders=[NODE, OTHER])))
    assert set(node.replicas.partitions) == {T0}
    assert node.log_manager.get(T1) is None
    partition = node.replicas.partitions[T0]
    assert partition.role is Role.LEADER and partition.leader_epoch == 0
    assert read_topic_id(partition.log.dir) == "id-t"


def test_lookup_errors(node: Node) -> None:
    node.replicas.apply_image(image(topic("t", leaders=[NODE, OTHER], epoch=5)))
    with pytest.raises(RiverlogError) as exc:
        node.replicas.get_partition(TopicPartition("nope", 0), None)
    assert code_of(exc) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(RiverlogError) as exc:
        node.replicas.get_partition(TopicPartition("t", 7), None)
    assert code_of(exc) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(RiverlogError) as exc:
        node.replicas.get_partition(T1, None)
    assert code_of(exc) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(RiverlogError) as exc:
        node.replicas.get_partition(T0, 4)
    assert code_of(exc) == ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(RiverlogError) as exc:
        node.replicas.get_partition(T0, 6)
    assert code_of(exc) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert node.replicas.get_partition(T0, 5).tp == T0
    assert node.replicas.get_partition(T0, None).tp == T0


def test_follower_and_offline_refuse_leader_requests(node: Node) -> None:
    node.replicas.apply_image(
        image(topic("t", leaders=[OTHER, -1], epoch=3, replicas=[[OTHER, NODE], [NODE]]))
    )
    assert node.replicas.partitions[T0].role is Role.FOLLOWER
    assert node.replicas.partitions[T1].role is Role.OFFLINE
    for tp in (T0, T1):
        with pytest.raises(RiverlogError) as exc:
            node.replicas.get_partition(tp, None)
        assert code_of(exc) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # A follower still answers epoch checks and requests that do not need the leader.
    assert node.replicas.get_partition(T0, 3, require_leader=False).role is Role.FOLLOWER


def test_leadership_change_and_stale_epoch(node: Node) -> None:
    node.replicas.apply_image(image(topic("t", leaders=[NODE], epoch=1), version=1))
    node.replicas.apply_image(
        image(topic("t", leaders=[OTHER], epoch=2, replicas=[[NODE, OTHER]]), version=2)
    )
    partition = node.replicas.partitions[T0]
    assert partition.role is Role.FOLLOWER and partition.leader_epoch == 2
    # An image carrying an older epoch does not move the partition back.
    node.replicas.apply_image(image(topic("t", leaders=[NODE], epoch=1), version=3))
    assert partition.role is Role.FOLLOWER and partition.leader_epoch == 2


def test_high_watermark_follows_appends_with_one_replica(node: Node) -> None:
    node.replicas.apply_image(image(topic("t")))
    partition = node.replicas.partitions[T0]
    info = partition.append_as_leader(make_batch(3))
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert partition.high_watermark == partition.log_end_offset == 3


def test_deleted_topic_deletes_the_log(node: Node) -> None:
    node.replicas.apply_image(image(topic("t"), topic("u")))
    directory = node.replicas.partitions[T0].log.dir
    node.replicas.partitions[T0].append_as_leader(make_batch())
    node.replicas.apply_image(image(topic("u"), version=2))
    assert T0 not in node.replicas.partitions
    assert node.log_manager.get(T0) is None
    assert not directory.exists()
    assert TopicPartition("u", 0) in node.replicas.partitions


def test_recreated_topic_starts_empty(node: Node) -> None:
    node.replicas.apply_image(image(topic("t", topic_id="first")))
    node.replicas.partitions[T0].append_as_leader(make_batch(5))
    node.replicas.apply_image(image(topic("t", topic_id="second"), version=2))
    partition = node.replicas.partitions[T0]
    assert partition.topic_id == "second"
    assert partition.log_end_offset == 0
    assert read_topic_id(partition.log.dir) == "second"


def test_logs_of_topics_deleted_while_down_are_removed(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    first = make_node(root)
    first.replicas.apply_image(image(topic("t", topic_id="old"), topic("keep")))
    first.replicas.partitions[T0].append_as_leader(make_batch(2))
    first.replicas.partitions[TopicPartition("keep", 0)].append_as_leader(make_batch(2))
    first.close()

    second = make_node(root)
    try:
        assert second.log_manager.get(T0) is not None  # loaded from disk
        second.replicas.apply_image(image(topic("t", topic_id="new"), topic("keep")))
        assert second.replicas.partitions[T0].log_end_offset == 0
        kept = second.replicas.partitions[TopicPartition("keep", 0)]
        assert kept.log_end_offset == 2 and kept.high_watermark == 2
        second.replicas.apply_image(image(topic("keep"), version=2))
        assert second.log_manager.get(T0) is None
    finally:
        second.close()


def test_config_changes_reach_the_log(node: Node) -> None:
    node.replicas.apply_image(image(topic("t", configs={"retention.ms": "1000"})))
    assert node.replicas.partitions[T0].config.retention_ms == 1000
    node.replicas.apply_image(
        image(topic("t", configs={"retention.ms": "2000", "compression.type": "lz4"}), version=2)
    )
    assert node.replicas.partitions[T0].config.retention_ms == 2000


def test_unusable_config_falls_back_to_defaults(node: Node) -> None:
    node.replicas.apply_image(image(topic("t", configs={"retention.ms": "soon"})))
    assert node.replicas.partitions[T0].config == node.replicas.base_config


def test_partition_moved_away_is_no_longer_served(node: Node) -> None:
    node.replicas.apply_image(image(topic("t")))
    node.replicas.apply_image(image(topic("t", leaders=[OTHER], epoch=1), version=2))
    assert T0 not in node.replicas.partitions
    with pytest.raises(RiverlogError) as exc:
        node.replicas.get_partition(T0, None)
    assert code_of(exc) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_partition_reassigned_away_deletes_the_log(node: Node) -> None:
    node.replicas.apply_image(image(topic("t", replicas=[[NODE, OTHER]])))
    node.replicas.partitions[T0].append_as_leader(make_batch(2))
    directory = node.replicas.partitions[T0].log.dir
    node.replicas.apply_image(image(topic("t", leaders=[OTHER], epoch=1), version=2))
    assert node.log_manager.get(T0) is None
    assert not directory.exists()


def test_logs_reassigned_away_while_down_are_removed(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    first = make_node(root)
    first.replicas.apply_image(image(topic("t", leaders=[NODE, NODE])))
    first.replicas.partitions[T0].append_as_leader(make_batch(2))
    first.close()

    second = make_node(root)
    try:
        assert second.log_manager.get(T0) is not None  # loaded from disk
        second.replicas.apply_image(image(topic("t", leaders=[OTHER, NODE], epoch=1)))
        assert second.log_manager.get(T0) is None
        assert second.log_manager.get(T1) is not None
    finally:
        second.close()
