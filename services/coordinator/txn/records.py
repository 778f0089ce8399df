"""The byte format of `__transaction_state` records: one per transactional.id, the latest wins
(the topic is compacted), a tombstone when the id expires (Dead).

The keying follows `__consumer_offsets` (decision 0008): canonical JSON, readable with
`riverlog consume __transaction_state`, and owner markers are the same records. The fields are
those of Kafka's TransactionLogValue, plus the epoch before the last bump, which a retried
EndTxn is recognised by after a coordinator failover:

    key   {"v":0,"x":transactional id}
    value {"pid","epoch","last_epoch","prev_pid","next_pid","timeout","state" (Kafka's name),
           "parts":{topic:[partition, ...]},"ts" (last update ms),"start" (ms, -1)}  | null
"""

from __future__ import annotations

import json
from collections import defaultdict

from riverlog.common.types import TopicPartition

from ..records import CoordinatorRecord, canonical_json
from .metadata import TransactionMetadata
from .state import TransactionState

TRANSACTION_KEY_VERSION = 0


def transaction_key(transactional_id: str) -> bytes:
    return canonical_json({"v": TRANSACTION_KEY_VERSION, "x": transactional_id})


def transaction_record(meta: TransactionMetadata) -> CoordinatorRecord:
    """The record of `meta`; a tombstone when it is Dead."""
    key = transaction_key(meta.transactional_id)
    if meta.state is TransactionState.DEAD:
        return CoordinatorRecord(key, None)
    parts: defaultdict[str, list[int]] = defaultdict(list)
    for tp in meta.partitions:
        parts[tp.topic].append(tp.partition)
    body = {
        "pid": meta.producer_id,
        "epoch": meta.producer_epoch,
        "last_epoch": meta.last_producer_epoch,
        "prev_pid": meta.previous_producer_id,
        "next_pid": meta.next_producer_id,
        "timeout": meta.timeout_ms,
        "state": meta.state.value,
        "parts": {topic: sorted(ps) for topic, ps in parts.items()},
        "ts": meta.last_update_ms,
        "start": meta.start_ms,
    }
    return CoordinatorRecord(key, canonical_json(body))


def decode_transaction_key(raw: bytes) -> str | None:
    """The transactional id of a transaction key; None for any other key (owner markers)."""
    obj = json.loads(raw)
    if obj.get("v") == TRANSACTION_KEY_VERSION and "x" in obj:
        return str(obj["x"])
    return None


def decode_transaction(transactional_id: str, raw: bytes) -> TransactionMetadata:
    """Raises ValueError (or KeyError) for a value this build cannot read."""
    obj = json.loads(raw)
    partitions = frozenset(
        TopicPartition(str(topic), int(p)) for topic, ps in obj["parts"].items() for p in ps
    )
    return TransactionMetadata(
        transactional_id,
        int(obj["pid"]),
        int(obj["epoch"]),
        int(obj["timeout"]),
        TransactionState(obj["state"]),
        partitions,
        int(obj["last_epoch"]),
        int(obj["prev_pid"]),
        int(obj["next_pid"]),
        int(obj["start"]),
        int(obj["ts"]),
    )
