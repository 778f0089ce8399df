"""The etcd writes of topic administration, as pure functions: each takes what the controller
decided (a topic record, an assignment, the revision it read) and returns the fenced
transactions to run, in order, with no etcd in sight. The topic controller validates, calls
one of these and runs the writes through `ControllerElection.write`; partition changes are
built the same way (`partition_change.PartitionChangeBuilder`).

Ordering rules the builders encode:
- a new topic's partitions are written before its `topics/<name>` record, so the image (which
  shows a topic only with its record) never shows half a topic; a create first clears
  leftovers of an interrupted create under the same name;
- every chunk holds at most `OPS_PER_TXN` operations (etcd caps a transaction at 128 by
  default) and carries the same compare, so a concurrent change stops the sequence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..records import TopicRecord, partition_encode
from ..store import Compare, Keys, Op
from .partition_change import new_partition

OPS_PER_TXN = 100  # etcd's default --max-txn-ops is 128

Assignment = Mapping[int, Sequence[int]]


@dataclass(frozen=True, slots=True)
class Write:
    """One fenced transaction: `ops` apply only if every compare holds."""

    compares: tuple[Compare, ...]
    ops: tuple[Op, ...]


def _chunked(compare: Compare, ops: Sequence[Op]) -> list[Write]:
    return [
        Write((compare,), tuple(ops[start : start + OPS_PER_TXN]))
        for start in range(0, len(ops), OPS_PER_TXN)
    ]


def _partition_ops(keys: Keys, topic: str, assignment: Assignment) -> list[Op]:
    return [
        Op(keys.partition(topic, p), partition_encode(new_partition(p, replicas)))
        for p, replicas in sorted(assignment.items())
    ]


def create_topic(keys: Keys, name: str, record: TopicRecord, assignment: Assignment) -> list[Write]:
    """Create `name`: clear leftovers, then its partitions, then its record; every write only
    while the topic record is absent."""
    absent = Compare(keys.topic(name), mod_revision=0)
    leftovers = Write((absent,), (Op(keys.partitions_of(name), prefix=True),))
    ops = [*_partition_ops(keys, name, assignment), Op(keys.topic(name), record.encode())]
    return [leftovers, *_chunked(absent, ops)]


def delete_topic(keys: Keys, name: str, mod_revision: int) -> Write:
    """Delete `name` and all its partitions, if its record is still the one read."""
    return Write(
        (Compare(keys.topic(name), mod_revision),),
        (Op(keys.topic(name)), Op(keys.partitions_of(name), prefix=True)),
    )


def add_partitions(
    keys: Keys,
    name: str,
    record: TopicRecord,
    count: int,
    assignment: Assignment,
    mod_revision: int,
) -> list[Write]:
    """Grow `name` from `record.partitions` to `count` partitions: the new partitions, then
    the record with the new count; every write only if the record is still the one read."""
    grown = TopicRecord(record.topic_id, count, record.configs, record.internal)
    ops = [*_partition_ops(keys, name, assignment), Op(keys.topic(name), grown.encode())]
    return _chunked(Compare(keys.topic(name), mod_revision), ops)


def alter_configs(
    keys: Keys, name: str, record: TopicRecord, configs: Mapping[str, str], mod_revision: int
) -> Write:
    """Replace the configs of `name`, if its record is still the one read."""
    altered = TopicRecord(record.topic_id, record.partitions, dict(configs), record.internal)
    return Write(
        (Compare(keys.topic(name), mod_revision),), (Op(keys.topic(name), altered.encode()),)
    )
