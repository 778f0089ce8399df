"""Compaction of a partition's remote log metadata log (decision 0039, addendum): pure values
and functions, no I/O (`metadata_manager.py` writes and deletes).

The log only grows — four records per segment over its life, plus one per leader epoch — while
its replayed state holds only the live segments. Compaction writes the state after records
[0, S) as one *snapshot* object at S, `metadata/snapshot-<S, 20 digits>.json`, created with the
same conditional create as the records, then deletes every record and older snapshot below S.

Why this is safe without more fencing than the records have: replay is deterministic, so the
state after [0, S) is the same for every writer that read [0, S) — a snapshot at S is correct
whoever wrote it, and a second writer racing for the same S finds it created and keeps it. Only
the leader whose epoch is the log's newest compacts (the others would race it for nothing), and
the snapshot records that epoch, so replay from it keeps fencing older leaders. Deletes come
after the snapshot exists and only below it, so a crash anywhere leaves a readable log: at
worst superseded objects stay until the next compaction removes them. A replica reading
forward from a sequence number that a compaction deleted finds the record missing, as if not
written yet; it learns of the snapshot from a listing (on load, and on refresh at most every
relist interval), so it catches up late rather than wrongly.

Snapshot, as JSON: {"leader_epoch": E, "next_seq": S, "written_by_epoch": W,
"segments": [<RemoteLogSegmentMetadata.to_json()>, ...]}.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType

from .metadata_log import CorruptMetadataRecordError, RemotePartitionMetadata
from .segment_metadata import RemoteLogSegmentMetadata

SNAPSHOT_PREFIX = "snapshot-"
_NAME = re.compile(r"(snapshot-)?(\d{20})\.json")


@dataclass(frozen=True, slots=True)
class MetadataObject:
    """One object below a partition's `metadata/` prefix, by name."""

    name: str
    seq: int
    snapshot: bool


def parse_names(prefix: str, names: Iterable[str]) -> list[MetadataObject]:
    """The records and snapshots among `names` (full names below `prefix`), by sequence
    number; anything else (a temporary file a kill left) is ignored."""
    out: list[MetadataObject] = []
    for name in names:
        if not name.startswith(prefix):
            continue
        match = _NAME.fullmatch(name[len(prefix) :])
        if match is not None:
            out.append(MetadataObject(name, int(match.group(2)), match.group(1) is not None))
    return sorted(out, key=lambda o: (o.seq, o.snapshot))


def latest_snapshot(objects: Iterable[MetadataObject]) -> MetadataObject | None:
    snapshots = [o for o in objects if o.snapshot]
    return max(snapshots, key=lambda o: o.seq) if snapshots else None


def superseded(objects: Iterable[MetadataObject], snapshot_seq: int) -> list[str]:
    """What a snapshot at `snapshot_seq` makes redundant: every record and snapshot below it."""
    return [o.name for o in objects if o.seq < snapshot_seq]


def compaction_due(next_seq: int, snapshot_seq: int, interval_records: int) -> bool:
    """Whether `interval_records` records were written since the last snapshot."""
    return next_seq - snapshot_seq >= interval_records


def snapshot_to_bytes(state: RemotePartitionMetadata, written_by_epoch: int) -> bytes:
    segments = sorted(state.segments.values(), key=lambda s: (s.start_offset, s.segment_id.id))
    return json.dumps(
        {
            "leader_epoch": state.leader_epoch,
            "next_seq": state.next_seq,
            "written_by_epoch": written_by_epoch,
            "segments": [s.to_json() for s in segments],
        }
    ).encode()


def snapshot_from_bytes(data: bytes) -> RemotePartitionMetadata:
    """The state a snapshot holds; CorruptMetadataRecordError when it does not parse."""
    try:
        value = json.loads(data)
        segments = [RemoteLogSegmentMetadata.from_json(s) for s in value["segments"]]
        return RemotePartitionMetadata(
            int(value["leader_epoch"]),
            MappingProxyType({s.segment_id.id: s for s in segments}),
            int(value["next_seq"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptMetadataRecordError(f"unreadable remote log metadata snapshot: {exc}") from exc
