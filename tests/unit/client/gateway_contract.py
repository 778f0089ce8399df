"""The contract of the SDK's fake gateways: cases that run unchanged against the fakes
(`client_fakes.FakeGateway`, `group_fakes.AdminGroupGateway`, by
`test_client_fakes_contract.py`) and against the real gateway of the integration session's
cluster (`tests/integration/client/test_client_fakes_contract_real.py`), so a fake that drifts
from the gateway the SDK really talks to fails a test.

Each case takes a `Target` and speaks gRPC to it as the SDK does; it asserts only what the SDK
relies on and both sides promise (codes, offsets, what reads back), not what the fakes leave
out on purpose (replication, throttling, quotas, every default config).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import grpc

from riverlog.cluster import create_topic
from riverlog.common.assignors.abstract import Assignment, Subscription
from riverlog.common.assignors.protocol import encode_assignment, encode_subscription
from riverlog.common.errors import ERRORS, ErrorCode
from riverlog.common.records import BatchBuilder, iter_batches_records
from riverlog.common.types import TopicPartition
from riverlog.v1 import (
    admin_pb2,
    common_pb2,
    coordinator_pb2,
    data_pb2,
    gateway_pb2,
    gateway_pb2_grpc,
)

# How often a call answered with a retriable code is sent again (a new topic's leader may not
# serve for a moment on the real cluster; the SDK retries the same way). Bounded.
_ATTEMPTS = 100
_BACKOFF_S = 0.05
_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Target:
    """A gateway to run the cases against. `name(prefix)` is a topic or group name no other
    case uses; `group_id` the one group a case may use (the fake serves exactly one)."""

    address: str
    name: Callable[[str], str]
    group_id: str


@contextmanager
def stub(target: Target) -> Iterator[gateway_pb2_grpc.GatewayStub]:
    with grpc.insecure_channel(target.address) as channel:
        yield gateway_pb2_grpc.GatewayStub(channel)


def _retrying(call: Callable[[], object], codes: Callable[[object], list[int]]) -> object:
    """`call()` until none of its per-item codes is retriable (at most _ATTEMPTS times)."""
    for _ in range(_ATTEMPTS - 1):
        answer = call()
        if not any(ERRORS[ErrorCode(c)].retriable for c in codes(answer)):
            return answer
        time.sleep(_BACKOFF_S)
    return call()


def _batch(values: list[bytes], first_ts: int = 1_000) -> bytes:
    builder = BatchBuilder()
    for i, value in enumerate(values):
        builder.append(first_ts + i, None, value)
    return builder.build()


def _produce(
    gw: gateway_pb2_grpc.GatewayStub, topic: str, partition: int, records: bytes
) -> data_pb2.ProducePartitionResponse:
    request = data_pb2.ProduceRequest(
        acks=common_pb2.ACKS_ALL,
        timeout_ms=10_000,
        partitions=[data_pb2.ProducePartition(topic=topic, partition=partition, records=records)],
    )
    answer = _retrying(
        lambda: gw.Produce(request, timeout=_TIMEOUT_S),
        lambda r: [p.error_code for p in r.partitions],  # type: ignore[attr-defined]
    )
    [part] = answer.partitions  # type: ignore[attr-defined]
    return part  # type: ignore[no-any-return]


def _fetch(
    gw: gateway_pb2_grpc.GatewayStub, topic: str, partition: int, offset: int
) -> data_pb2.FetchPartitionResponse:
    request = data_pb2.FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        partitions=[
            data_pb2.FetchPartition(
                topic=topic, partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
            )
        ],
    )
    answer = _retrying(
        lambda: gw.Fetch(request, timeout=_TIMEOUT_S),
        lambda r: [p.error_code for p in r.partitions],  # type: ignore[attr-defined]
    )
    [part] = answer.partitions  # type: ignore[attr-defined]
    return part  # type: ignore[no-any-return]


def _list_offset(
    gw: gateway_pb2_grpc.GatewayStub,
    topic: str,
    partition: int,
    spec: common_pb2.OffsetSpec.ValueType,
    timestamp_ms: int = 0,
) -> data_pb2.ListOffsetsPartitionResponse:
    request = data_pb2.ListOffsetsRequest(
        partitions=[
            data_pb2.ListOffsetsPartition(
                topic=topic, partition=partition, spec=spec, timestamp_ms=timestamp_ms
            )
        ]
    )
    answer = _retrying(
        lambda: gw.ListOffsets(request, timeout=_TIMEOUT_S),
        lambda r: [p.error_code for p in r.partitions],  # type: ignore[attr-defined]
    )
    [part] = answer.partitions  # type: ignore[attr-defined]
    return part  # type: ignore[no-any-return]


def _values(records: bytes, min_offset: int = 0) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in iter_batches_records(records, min_offset)]


def _new_topic(target: Target, partitions: int = 1) -> str:
    topic = target.name("contract")
    create_topic(target.address, topic, partitions)
    return topic


# ---- data ---------------------------------------------------------------------------------


def produce_assigns_consecutive_offsets_per_partition(target: Target) -> None:
    topic = _new_topic(target, partitions=2)
    with stub(target) as gw:
        first = _produce(gw, topic, 0, _batch([b"a", b"b", b"c"]))
        second = _produce(gw, topic, 0, _batch([b"d", b"e"]))
        other = _produce(gw, topic, 1, _batch([b"x"]))
    assert (first.error_code, first.base_offset, first.last_offset) == (0, 0, 2)
    assert (second.error_code, second.base_offset, second.last_offset) == (0, 3, 4)
    assert (other.error_code, other.base_offset, other.last_offset) == (0, 0, 0)
    assert first.log_append_time_ms == -1  # CreateTime topics


def fetch_returns_whole_batches_from_the_offset(target: Target) -> None:
    topic = _new_topic(target)
    with stub(target) as gw:
        _produce(gw, topic, 0, _batch([b"a", b"b", b"c"]))
        _produce(gw, topic, 0, _batch([b"d", b"e"]))
        everything = _fetch(gw, topic, 0, 0)
        from_three = _fetch(gw, topic, 0, 3)
        at_end = _fetch(gw, topic, 0, 5)
        past_end = _fetch(gw, topic, 0, 6)
    assert everything.error_code == ErrorCode.NONE
    assert (everything.high_watermark, everything.log_start_offset) == (5, 0)
    assert _values(everything.records) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]
    assert _values(from_three.records) == [(3, b"d"), (4, b"e")]
    assert (at_end.error_code, at_end.records, at_end.high_watermark) == (0, b"", 5)
    assert past_end.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def list_offsets_finds_earliest_latest_and_by_timestamp(target: Target) -> None:
    topic = _new_topic(target)
    with stub(target) as gw:
        _produce(gw, topic, 0, _batch([b"a", b"b", b"c"], first_ts=1_000))
        _produce(gw, topic, 0, _batch([b"d", b"e"], first_ts=2_000))
        earliest = _list_offset(gw, topic, 0, common_pb2.OFFSET_SPEC_EARLIEST)
        latest = _list_offset(gw, topic, 0, common_pb2.OFFSET_SPEC_LATEST)
        at = _list_offset(gw, topic, 0, common_pb2.OFFSET_SPEC_TIMESTAMP, 1_001)
        between = _list_offset(gw, topic, 0, common_pb2.OFFSET_SPEC_TIMESTAMP, 1_500)
        after = _list_offset(gw, topic, 0, common_pb2.OFFSET_SPEC_TIMESTAMP, 9_999)
    assert (earliest.error_code, earliest.offset) == (0, 0)
    assert (latest.error_code, latest.offset) == (0, 5)
    assert (at.offset, at.timestamp_ms) == (1, 1_001)
    assert (between.offset, between.timestamp_ms) == (3, 2_000)
    assert (after.error_code, after.offset, after.timestamp_ms) == (0, -1, -1)


def delete_records_moves_the_log_start(target: Target) -> None:
    topic = _new_topic(target)
    with stub(target) as gw:
        _produce(gw, topic, 0, _batch([b"a", b"b", b"c"]))
        _produce(gw, topic, 0, _batch([b"d", b"e"]))
        request = data_pb2.DeleteRecordsRequest(
            timeout_ms=10_000,
            partitions=[data_pb2.DeleteRecordsPartition(topic=topic, partition=0, offset=3)],
        )
        [deleted] = gw.DeleteRecords(request, timeout=_TIMEOUT_S).partitions
        earliest = _list_offset(gw, topic, 0, common_pb2.OFFSET_SPEC_EARLIEST)
        before_start = _fetch(gw, topic, 0, 1)
        from_start = _fetch(gw, topic, 0, 3)
    assert (deleted.error_code, deleted.low_watermark) == (0, 3)
    assert earliest.offset == 3
    assert before_start.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert from_start.log_start_offset == 3
    assert _values(from_start.records) == [(3, b"d"), (4, b"e")]


def unknown_topics_are_answered_per_item(target: Target) -> None:
    topic = target.name("absent")
    with stub(target) as gw:
        produced = gw.Produce(
            data_pb2.ProduceRequest(
                timeout_ms=1_000,
                partitions=[data_pb2.ProducePartition(topic=topic, records=_batch([b"a"]))],
            ),
            timeout=_TIMEOUT_S,
        ).partitions
        fetched = gw.Fetch(
            data_pb2.FetchRequest(
                max_bytes=1 << 20,
                partitions=[data_pb2.FetchPartition(topic=topic, partition_max_bytes=1 << 20)],
            ),
            timeout=_TIMEOUT_S,
        ).partitions
        listed = gw.ListOffsets(
            data_pb2.ListOffsetsRequest(
                partitions=[
                    data_pb2.ListOffsetsPartition(topic=topic, spec=common_pb2.OFFSET_SPEC_LATEST)
                ]
            ),
            timeout=_TIMEOUT_S,
        ).partitions
        metadata = gw.GetMetadata(
            gateway_pb2.GetMetadataRequest(topics=[topic]), timeout=_TIMEOUT_S
        )
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert [p.error_code for p in produced] == [unknown]
    assert [p.error_code for p in fetched] == [unknown]
    assert [p.error_code for p in listed] == [unknown]
    assert list(metadata.topics) == []
    assert [(e.name, e.error_code) for e in metadata.errors] == [(topic, unknown)]


# ---- admin --------------------------------------------------------------------------------


def topics_are_created_once_listed_and_described(target: Target) -> None:
    topic, dry_run, absent = (target.name(p) for p in ("created", "dry-run", "absent"))
    with stub(target) as gw:

        def create(name: str, validate_only: bool = False) -> admin_pb2.TopicResult:
            request = admin_pb2.CreateTopicsRequest(
                topics=[
                    admin_pb2.CreatableTopic(name=name, num_partitions=2, replication_factor=1)
                ],
                validate_only=validate_only,
            )
            [result] = gw.CreateTopics(request, timeout=_TIMEOUT_S).topics
            return result

        created = create(topic)
        again = create(topic)
        validated = create(dry_run, validate_only=True)
        names = gw.ListTopics(admin_pb2.ListTopicsRequest(), timeout=_TIMEOUT_S).names
        described = gw.DescribeTopics(
            admin_pb2.DescribeTopicsRequest(names=[topic, absent]), timeout=_TIMEOUT_S
        ).topics
        metadata = gw.GetMetadata(
            gateway_pb2.GetMetadataRequest(topics=[topic]), timeout=_TIMEOUT_S
        )
    assert (created.error_code, bool(created.topic_id)) == (0, True)
    assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert validated.error_code == ErrorCode.NONE
    assert topic in names and dry_run not in names
    assert [(t.name, t.error_code) for t in described] == [
        (topic, 0),
        (absent, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert [p.partition for p in described[0].metadata.partitions] == [0, 1]
    [meta] = metadata.topics
    assert (meta.name, meta.topic_id) == (topic, created.topic_id)
    assert [p.partition for p in meta.partitions] == [0, 1]


def configs_are_set_described_and_deleted(target: Target) -> None:
    topic = target.name("configs")
    create_topic(target.address, topic, 1, configs={"retention.ms": "1000"})
    with stub(target) as gw:

        def describe() -> dict[str, tuple[str, bool]]:
            request = admin_pb2.DescribeConfigsRequest(topics=[topic])
            [answer] = gw.DescribeConfigs(request, timeout=_TIMEOUT_S).topics
            assert answer.error_code == ErrorCode.NONE
            return {c.name: (c.value, c.is_default) for c in answer.configs}

        def alter(op: admin_pb2.AlterConfigsRequest.Op) -> int:
            request = admin_pb2.AlterConfigsRequest(
                topics=[admin_pb2.AlterConfigsRequest.Topic(name=topic, ops=[op])]
            )
            [answer] = gw.AlterConfigs(request, timeout=_TIMEOUT_S).topics
            return answer.error_code

        Op = admin_pb2.AlterConfigsRequest.Op
        created = describe()
        assert alter(Op(name="retention.ms", value="2000", type=Op.SET)) == ErrorCode.NONE
        altered = describe()
        assert alter(Op(name="retention.ms", type=Op.DELETE)) == ErrorCode.NONE
        reset = describe()
        [unknown] = gw.DescribeConfigs(
            admin_pb2.DescribeConfigsRequest(topics=[target.name("absent")]), timeout=_TIMEOUT_S
        ).topics
    assert created["retention.ms"] == ("1000", False)
    assert altered["retention.ms"] == ("2000", False)
    assert reset["retention.ms"] == ("604800000", True)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def partitions_only_grow(target: Target) -> None:
    topic = _new_topic(target, partitions=1)
    with stub(target) as gw:

        def grow(count: int) -> int:
            request = admin_pb2.CreatePartitionsRequest(
                topics=[admin_pb2.CreatePartitionsRequest.Topic(name=topic, count=count)]
            )
            [answer] = gw.CreatePartitions(request, timeout=_TIMEOUT_S).topics
            return answer.error_code

        grown = grow(3)
        shrunk = grow(2)
        [described] = gw.DescribeTopics(
            admin_pb2.DescribeTopicsRequest(names=[topic]), timeout=_TIMEOUT_S
        ).topics
    assert grown == ErrorCode.NONE
    assert shrunk == ErrorCode.INVALID_PARTITIONS
    assert len(described.metadata.partitions) == 3


def deleted_topics_are_gone(target: Target) -> None:
    topic = _new_topic(target)
    with stub(target) as gw:

        def delete() -> int:
            request = admin_pb2.DeleteTopicsRequest(names=[topic])
            [answer] = gw.DeleteTopics(request, timeout=_TIMEOUT_S).topics
            return answer.error_code

        first, second = delete(), delete()
        names = gw.ListTopics(admin_pb2.ListTopicsRequest(), timeout=_TIMEOUT_S).names
    assert (first, second) == (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert topic not in names


def the_cluster_describes_itself(target: Target) -> None:
    with stub(target) as gw:
        cluster = gw.DescribeCluster(admin_pb2.DescribeClusterRequest(), timeout=_TIMEOUT_S)
    assert cluster.cluster_id
    assert cluster.controller_epoch >= 1
    storage = [n for n in cluster.nodes if n.kind == common_pb2.NODE_KIND_STORAGE]
    assert storage and all(n.host == "127.0.0.1" and n.port > 0 for n in storage)


# ---- groups -------------------------------------------------------------------------------


def a_member_joins_syncs_commits_and_leaves(target: Target) -> None:
    group = target.group_id
    topic = _new_topic(target)
    subscription = encode_subscription(Subscription([topic]))
    assignment = encode_assignment(Assignment([TopicPartition(topic, 0)]))
    with stub(target) as gw:

        def join(member_id: str) -> coordinator_pb2.JoinGroupResponse:
            request = coordinator_pb2.JoinGroupRequest(
                group_id=group,
                member_id=member_id,
                session_timeout_ms=10_000,
                rebalance_timeout_ms=10_000,
                protocol_type="consumer",
                protocols=[coordinator_pb2.JoinGroupProtocol(name="range", metadata=subscription)],
            )
            return gw.JoinGroup(request, timeout=_TIMEOUT_S)  # type: ignore[no-any-return]

        required = join("")
        joined = join(required.member_id)
        member = joined.member_id
        synced = gw.SyncGroup(
            coordinator_pb2.SyncGroupRequest(
                group_id=group,
                generation_id=joined.generation_id,
                member_id=member,
                protocol_type="consumer",
                protocol_name="range",
                assignments=[
                    coordinator_pb2.SyncGroupAssignment(member_id=member, assignment=assignment)
                ],
            ),
            timeout=_TIMEOUT_S,
        )
        beat = gw.Heartbeat(
            coordinator_pb2.GroupHeartbeatRequest(
                group_id=group, generation_id=joined.generation_id, member_id=member
            ),
            timeout=_TIMEOUT_S,
        )
        committed = gw.OffsetCommit(
            coordinator_pb2.OffsetCommitRequest(
                group_id=group,
                generation_id=joined.generation_id,
                member_id=member,
                topics=[
                    coordinator_pb2.OffsetCommitTopic(
                        name=topic,
                        partitions=[
                            coordinator_pb2.OffsetCommitPartition(
                                partition=0, committed_offset=42, metadata="meta"
                            )
                        ],
                    )
                ],
            ),
            timeout=_TIMEOUT_S,
        )
        fetched = gw.OffsetFetch(
            coordinator_pb2.OffsetFetchRequest(
                group_id=group,
                topics=[coordinator_pb2.OffsetFetchTopic(name=topic, partitions=[0])],
            ),
            timeout=_TIMEOUT_S,
        )
        left = gw.LeaveGroup(
            coordinator_pb2.LeaveGroupRequest(
                group_id=group, members=[coordinator_pb2.LeavingMember(member_id=member)]
            ),
            timeout=_TIMEOUT_S,
        )
        late_beat = gw.Heartbeat(
            coordinator_pb2.GroupHeartbeatRequest(
                group_id=group, generation_id=joined.generation_id, member_id=member
            ),
            timeout=_TIMEOUT_S,
        )
    assert required.error_code == ErrorCode.MEMBER_ID_REQUIRED and required.member_id
    assert (joined.error_code, joined.member_id, joined.leader) == (0, member, member)
    assert (joined.generation_id, joined.protocol_name) == (1, "range")
    assert [(m.member_id, m.metadata) for m in joined.members] == [(member, subscription)]
    assert (synced.error_code, synced.assignment) == (0, assignment)
    assert beat.error_code == ErrorCode.NONE
    assert [
        (t.name, [(p.partition, p.error_code) for p in t.partitions]) for t in committed.topics
    ] == [(topic, [(0, 0)])]
    [fetched_topic] = fetched.topics
    [offset] = fetched_topic.partitions
    assert (fetched_topic.name, offset.committed_offset, offset.metadata) == (topic, 42, "meta")
    assert [(m.member_id, m.error_code) for m in left.members] == [(member, 0)]
    assert late_beat.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def groups_are_listed_described_and_deleted(target: Target) -> None:
    group = target.group_id
    topic = _new_topic(target)
    subscription = encode_subscription(Subscription([topic]))
    with stub(target) as gw:
        join = coordinator_pb2.JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            protocol_type="consumer",
            protocols=[coordinator_pb2.JoinGroupProtocol(name="range", metadata=subscription)],
        )
        join.member_id = gw.JoinGroup(join, timeout=_TIMEOUT_S).member_id
        joined = gw.JoinGroup(join, timeout=_TIMEOUT_S)
        member = joined.member_id
        gw.SyncGroup(
            coordinator_pb2.SyncGroupRequest(
                group_id=group,
                generation_id=joined.generation_id,
                member_id=member,
                protocol_type="consumer",
                protocol_name="range",
                assignments=[coordinator_pb2.SyncGroupAssignment(member_id=member)],
            ),
            timeout=_TIMEOUT_S,
        )

        def describe() -> coordinator_pb2.DescribedGroup:
            request = coordinator_pb2.DescribeGroupsRequest(groups=[group])
            [described] = gw.DescribeGroups(request, timeout=_TIMEOUT_S).groups
            return described

        def delete() -> int:
            request = coordinator_pb2.DeleteGroupsRequest(groups=[group])
            [result] = gw.DeleteGroups(request, timeout=_TIMEOUT_S).results
            assert result.group_id == group
            return result.error_code

        listed = gw.ListGroups(coordinator_pb2.ListGroupsRequest(), timeout=_TIMEOUT_S).groups
        stable = describe()
        refused = delete()
        gw.LeaveGroup(
            coordinator_pb2.LeaveGroupRequest(
                group_id=group, members=[coordinator_pb2.LeavingMember(member_id=member)]
            ),
            timeout=_TIMEOUT_S,
        )
        deleted = delete()
        dead = describe()
        again = delete()
    assert (group, "consumer", "Stable") in [
        (g.group_id, g.protocol_type, g.group_state) for g in listed
    ]
    assert (stable.error_code, stable.group_id, stable.group_state) == (0, group, "Stable")
    assert (stable.protocol_type, stable.protocol_data) == ("consumer", "range")
    assert (stable.generation_id, stable.leader) == (joined.generation_id, member)
    assert [m.member_id for m in stable.members] == [member]
    assert refused == ErrorCode.NON_EMPTY_GROUP
    assert deleted == ErrorCode.NONE
    assert (dead.group_id, dead.group_state, list(dead.members)) == (group, "Dead", [])
    assert again == ErrorCode.GROUP_ID_NOT_FOUND


CASES: tuple[Callable[[Target], None], ...] = (
    produce_assigns_consecutive_offsets_per_partition,
    fetch_returns_whole_batches_from_the_offset,
    list_offsets_finds_earliest_latest_and_by_timestamp,
    delete_records_moves_the_log_start,
    unknown_topics_are_answered_per_item,
    topics_are_created_once_listed_and_described,
    configs_are_set_described_and_deleted,
    partitions_only_grow,
    deleted_topics_are_gone,
    the_cluster_describes_itself,
    a_member_joins_syncs_commits_and_leaves,
    groups_are_listed_described_and_deleted,
)
"""Every case, in the order both suites run them (ids are the function names)."""
