"""What the pages read from the cluster, composed from the SDK's calls: a topic's partitions
with their offsets, a group's committed offsets against the log end offsets. Each function
takes the signed-in user's AdminClient, so the gateway answers as that principal."""

from __future__ import annotations

from dataclasses import dataclass

from riverlog.client import AdminClient, TopicPartition

from .series import partition_lag

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    start: int  # log start offset
    end: int  # log end offset (high watermark)

    @property
    def records(self) -> int:
        return max(self.end - self.start, 0)


@dataclass(frozen=True, slots=True)
class PartitionLag:
    tp: TopicPartition
    committed: int | None
    end: int
    lag: int | None
    member: str  # the member assigned the partition, or ""


def end_offsets(admin: AdminClient, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    if not tps:
        return {}
    found = admin.list_offsets(dict.fromkeys(tps, LATEST))
    return {tp: o.offset for tp, o in found.items() if o is not None}


def topic_offsets(admin: AdminClient, topic: str, partitions: int) -> dict[int, PartitionOffsets]:
    """Start and end offset of each partition of `topic`."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    if not tps:
        return {}
    starts = admin.list_offsets(dict.fromkeys(tps, EARLIEST))
    ends = end_offsets(admin, tps)
    out = {}
    for tp in tps:
        start = starts.get(tp)
        out[tp.partition] = PartitionOffsets(start.offset if start else 0, ends.get(tp, 0))
    return out


def topic_end_total(admin: AdminClient, topic: str) -> int:
    """The sum of a topic's log end offsets: the counter throughput is derived from."""
    description = admin.describe_topics([topic])[topic]
    tps = [TopicPartition(topic, p.partition) for p in description.partitions]
    return sum(end_offsets(admin, tps).values())


def group_lag(admin: AdminClient, group_id: str) -> list[PartitionLag]:
    """Every partition the group has committed or is assigned, with its lag."""
    committed = {tp: om.offset for tp, om in admin.list_group_offsets(group_id).items()}
    owners: dict[TopicPartition, str] = {}
    description = admin.describe_groups([group_id]).get(group_id)
    for member in description.members if description else ():
        for tp in member.assignment:
            owners[tp] = member.client_id or member.member_id
    tps = sorted(set(committed) | set(owners))
    ends = end_offsets(admin, tps)
    return [
        PartitionLag(
            tp,
            committed.get(tp),
            ends[tp],
            partition_lag(committed.get(tp), ends[tp]),
            owners.get(tp, ""),
        )
        for tp in tps
        if tp in ends
    ]
