"""The topic controller's etcd writes as pure functions: which keys, in which order, under
which compare, and in chunks etcd accepts (no etcd involved)."""

from __future__ import annotations

from riverlog.services.metadata.controller import topic_writes as writes
from riverlog.services.metadata.records import TopicRecord, partition_decode
from riverlog.services.metadata.store import Compare, Keys, Op

KEYS = Keys("/rl/")
RECORD = TopicRecord("id-1", 3, {"retention.ms": "1000"})


def test_create_clears_leftovers_then_writes_partitions_before_the_record() -> None:
    planned = writes.create_topic(KEYS, "t", RECORD, {2: [3, 1], 0: [1, 2], 1: [2, 3]})
    absent = Compare(KEYS.topic("t"), mod_revision=0)
    assert all(w.compares == (absent,) for w in planned)
    assert planned[0].ops == (Op(KEYS.partitions_of("t"), prefix=True),)
    ops = [op for w in planned[1:] for op in w.ops]
    assert [op.key for op in ops] == [
        KEYS.partition("t", 0),
        KEYS.partition("t", 1),
        KEYS.partition("t", 2),
        KEYS.topic("t"),
    ]
    assert ops[-1].value is not None and TopicRecord.decode(ops[-1].value) == RECORD
    assert ops[2].value is not None
    third = partition_decode(2, ops[2].value)
    assert (third.partition, third.replicas, third.leader_epoch) == (2, (3, 1), 0)


def test_a_large_topic_is_written_in_chunks_etcd_accepts() -> None:
    count = 2 * writes.OPS_PER_TXN + 10
    record = TopicRecord("id-2", count)
    planned = writes.create_topic(KEYS, "big", record, {p: [1] for p in range(count)})
    assert [len(w.ops) for w in planned] == [1, writes.OPS_PER_TXN, writes.OPS_PER_TXN, 11]
    assert planned[-1].ops[-1].key == KEYS.topic("big")  # the record comes last


def test_delete_removes_the_record_and_every_partition_if_unchanged() -> None:
    write = writes.delete_topic(KEYS, "t", mod_revision=42)
    assert write.compares == (Compare(KEYS.topic("t"), 42),)
    assert write.ops == (Op(KEYS.topic("t")), Op(KEYS.partitions_of("t"), prefix=True))


def test_add_partitions_writes_only_the_new_ones_then_the_new_count() -> None:
    planned = writes.add_partitions(KEYS, "t", RECORD, 5, {3: [1], 4: [2]}, mod_revision=7)
    assert [w.compares for w in planned] == [(Compare(KEYS.topic("t"), 7),)]
    keys = [op.key for op in planned[0].ops]
    assert keys == [KEYS.partition("t", 3), KEYS.partition("t", 4), KEYS.topic("t")]
    value = planned[0].ops[-1].value
    assert value is not None
    grown = TopicRecord.decode(value)
    assert (grown.topic_id, grown.partitions, dict(grown.configs)) == ("id-1", 5, RECORD.configs)


def test_alter_configs_replaces_the_configs_and_keeps_the_rest() -> None:
    write = writes.alter_configs(KEYS, "t", RECORD, {"segment.bytes": "1024"}, mod_revision=9)
    assert write.compares == (Compare(KEYS.topic("t"), 9),)
    [op] = write.ops
    assert op.key == KEYS.topic("t") and op.value is not None
    altered = TopicRecord.decode(op.value)
    assert (altered.topic_id, altered.partitions) == ("id-1", 3)
    assert dict(altered.configs) == {"segment.bytes": "1024"}
