"""The byte format of `__consumer_offsets` records (decision 0008): what a coordinator writes
and what a new owner replays when it loads a partition.

Kafka keys its records by a versioned binary schema; Riverlog keeps the same keying with JSON,
compact and self-describing, so `riverlog consume __consumer_offsets` is readable:

    offset commit    key   {"v":1,"g":group,"t":topic,"p":partition}
                     value {"o":offset,"e":leader_epoch,"m":metadata,"ts":commit_ms}  | null
    group metadata   key   {"v":2,"g":group}
                     value {"type","gen","protocol","leader","ts","members":[{"id","iid",
                            "client","host","rto","sto","meta"(b64),"asg"(b64)}],
                            "sa": {topic: partitions} when assigned server-side}       | null
    owner marker     key   {"v":3,"c":coordinator node id,"e":ownership epoch}
                     value null  (written first by each new owner: the fence, decision 0008)
    txn end          key   {"v":4,"p":producer id,"e":marker epoch,"c":committed}
                     value null  (written by the owner after a transaction's marker: the
                                  fence check that makes a zombie owner refuse it, 0031)

TxnOffsetCommit's offset commits are the records above in the producer's transactional
batches; the transaction's COMMIT or ABORT marker (a control batch) decides if they count.

A null value is a tombstone (deleted group or expired offset). Key versions follow Kafka's
(0/1 offsets, 2 group metadata). The topic is compacted (decision 0008): the log cleaner keeps
the latest record of each key *by its bytes*, so a key is always encoded the same way (sorted
names, no spaces, ASCII escapes) and must stay so across versions, and it drops a tombstone,
with what it deleted, after `delete.retention.ms`. Owner markers have a key each and a null
value: tombstones too, gone after that time (they only matter while the owner loads).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from riverlog.common.types import TopicPartition

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OWNER_KEY_VERSION = 3
TXN_END_KEY_VERSION = 4


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record for `__consumer_offsets` (value None: a tombstone)."""

    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class OwnerKey:
    coordinator_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class TxnEndKey:
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp_ms: int
    members: Sequence[MemberValue]
    server_assigned_counts: Mapping[str, int] | None = None
    """Set when the coordinator computed the assignment: the partition counts it used."""


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The transactional producer a batch is written for (TxnOffsetCommit, decision 0031):
    its id, its epoch, and the batch's first sequence in this partition."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    # Sent with the produce: the partition leader verifies the write with the transaction
    # coordinator (KIP-890 part 1), as Kafka's group coordinator does for TxnOffsetCommit.
    transactional_id: str = ""


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record read back (or just written), with what its batch says about transactions:
    a transactional batch's producer, and for a control batch (a transaction marker) whether
    it commits (`marker` True) or aborts (False); `marker` is None for data records."""

    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int = -1
    producer_epoch: int = -1
    last_sequence: int = -1  # the last sequence of the record's batch
    transactional: bool = False
    marker: bool | None = None


def canonical_json(obj: dict[str, Any]) -> bytes:
    """One encoding per value (sorted names, no spaces): compaction keeps the latest record of a
    key by its bytes."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def offset_record(
    group_id: str, tp: TopicPartition, value: OffsetValue | None
) -> CoordinatorRecord:
    key = canonical_json({"v": OFFSET_KEY_VERSION, "g": group_id, "t": tp.topic, "p": tp.partition})
    if value is None:
        return CoordinatorRecord(key, None)
    body = {
        "o": value.offset,
        "e": value.leader_epoch,
        "m": value.metadata,
        "ts": value.commit_timestamp_ms,
    }
    return CoordinatorRecord(key, canonical_json(body))


def group_record(group_id: str, value: GroupValue | None) -> CoordinatorRecord:
    key = canonical_json({"v": GROUP_KEY_VERSION, "g": group_id})
    if value is None:
        return CoordinatorRecord(key, None)
    members = [
        {
            "id": m.member_id,
            "iid": m.group_instance_id,
            "client": m.client_id,
            "host": m.client_host,
            "rto": m.rebalance_timeout_ms,
            "sto": m.session_timeout_ms,
            "meta": _b64(m.subscription),
            "asg": _b64(m.assignment),
        }
        for m in value.members
    ]
    body = {
        "type": value.protocol_type,
        "gen": value.generation_id,
        "protocol": value.protocol_name,
        "leader": value.leader_id,
        "ts": value.current_state_timestamp_ms,
        "members": members,
        "sa": None if value.server_assigned_counts is None else dict(value.server_assigned_counts),
    }
    return CoordinatorRecord(key, canonical_json(body))


def owner_marker(coordinator_id: int, epoch: int) -> CoordinatorRecord:
    """The first record a new owner writes with its epoch: from then on the storage node
    refuses the previous owner's writes, and everything before it is what the owner loads."""
    return CoordinatorRecord(
        canonical_json({"v": OWNER_KEY_VERSION, "c": coordinator_id, "e": epoch}), None
    )


def txn_end_record(producer_id: int, producer_epoch: int, committed: bool) -> CoordinatorRecord:
    """Written with the owner's epoch right after a transaction's marker: if it is refused
    the owner is a zombie, and the marker is sent again to the new owner (decision 0031)."""
    key = {"v": TXN_END_KEY_VERSION, "p": producer_id, "e": producer_epoch, "c": committed}
    return CoordinatorRecord(canonical_json(key), None)


def decode_key(raw: bytes) -> OffsetKey | GroupKey | OwnerKey | TxnEndKey:
    """Raises ValueError for a key this build does not know."""
    obj = json.loads(raw)
    version = obj.get("v")
    if version == OFFSET_KEY_VERSION:
        return OffsetKey(str(obj["g"]), TopicPartition(str(obj["t"]), int(obj["p"])))
    if version == GROUP_KEY_VERSION:
        return GroupKey(str(obj["g"]))
    if version == OWNER_KEY_VERSION:
        return OwnerKey(int(obj["c"]), int(obj["e"]))
    if version == TXN_END_KEY_VERSION:
        return TxnEndKey(int(obj["p"]), int(obj["e"]), bool(obj["c"]))
    raise ValueError(f"unknown __consumer_offsets key version {version!r}")


def decode_offset_value(raw: bytes) -> OffsetValue:
    obj = json.loads(raw)
    return OffsetValue(int(obj["o"]), int(obj["e"]), str(obj["m"]), int(obj["ts"]))


def decode_group_value(raw: bytes) -> GroupValue:
    obj = json.loads(raw)
    members = [
        MemberValue(
            member_id=str(m["id"]),
            group_instance_id=m["iid"],
            client_id=str(m["client"]),
            client_host=str(m["host"]),
            rebalance_timeout_ms=int(m["rto"]),
            session_timeout_ms=int(m["sto"]),
            subscription=base64.b64decode(m["meta"]),
            assignment=base64.b64decode(m["asg"]),
        )
        for m in obj["members"]
    ]
    return GroupValue(
        protocol_type=str(obj["type"]),
        generation_id=int(obj["gen"]),
        protocol_name=obj["protocol"],
        leader_id=obj["leader"],
        current_state_timestamp_ms=int(obj["ts"]),
        members=members,
        server_assigned_counts=(
            None if obj.get("sa") is None else {str(k): int(v) for k, v in obj["sa"].items()}
        ),
    )
