"""Committed offsets of the groups of one `__consumer_offsets` partition, and the commit rules
(Kafka's `OffsetMetadataManager`): who may commit (generation and member checks, simple
consumers), metadata size, fetch, and retention of the offsets of empty groups.

The store changes only through `replay()`: a commit handler validates and returns records, the
shard writes them with acks=all, and replaying them (live, or when a new owner loads the
partition) is what makes an offset visible to OffsetFetch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition

from ..config import CoordinatorConfig
from ..group.group import ClassicGroup
from ..group.manager import GroupManager
from ..group.outcome import NOTHING, Outcome
from ..group.state import GroupState
from ..records import CoordinatorRecord, OffsetValue, offset_record

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState


@dataclass(frozen=True, slots=True)
class CommitItem:
    tp: TopicPartition
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    items: Sequence[CommitItem]


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    tp: TopicPartition
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error_code: ErrorCode = ErrorCode.NONE


CommitReply = Callable[[list[tuple[TopicPartition, ErrorCode]]], None]


class OffsetStore:
    """Offsets by group. Owned by one shard task."""

    def __init__(self, config: CoordinatorConfig, clock: Clock, groups: GroupManager) -> None:
        self.config = config
        self.clock = clock
        self.groups = groups
        self.offsets: dict[str, dict[TopicPartition, OffsetValue]] = {}

    # --- replay -----------------------------------------------------------------------------

    def replay(self, group_id: str, tp: TopicPartition, value: OffsetValue | None) -> None:
        if value is None:
            per_group = self.offsets.get(group_id)
            if per_group is not None:
                per_group.pop(tp, None)
                if not per_group:
                    del self.offsets[group_id]
            return
        self.offsets.setdefault(group_id, {})[tp] = value

    # --- OffsetCommit -----------------------------------------------------------------------

    def _validate(self, req: CommitRequest, group: ClassicGroup | None) -> ErrorCode:
        """Kafka's `ClassicGroup.validateOffsetCommit`: simple commits (generation -1) only to
        empty groups; member commits need the member (and its static instance id) and the
        current generation; refused while the group waits for its assignment
        (COMPLETING_REBALANCE), accepted while it prepares a rebalance (a member commits what
        it processed before rejoining)."""
        if group is None:
            return E.NONE if req.generation_id < 0 else E.ILLEGAL_GENERATION
        if group.is_in(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and group.is_in(S.EMPTY):
            return E.NONE  # a simple consumer (assign + commit), or an admin offsets reset
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            if req.group_instance_id is not None:
                holder = group.static_member_id(req.group_instance_id)
                if holder is None:
                    return E.UNKNOWN_MEMBER_ID
                if holder != req.member_id:
                    return E.FENCED_INSTANCE_ID
            if not group.has_member(req.member_id):
                return E.UNKNOWN_MEMBER_ID
            if req.generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION
        elif not group.is_in(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if group.is_in(S.COMPLETING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def commit(self, req: CommitRequest, reply: CommitReply) -> Outcome:
        if not req.group_id:
            reply([(i.tp, E.INVALID_GROUP_ID) for i in req.items])
            return NOTHING
        group = self.groups.groups.get(req.group_id)
        error = self._validate(req, group)
        if error != E.NONE:
            reply([(i.tp, error) for i in req.items])
            return NOTHING
        if group is None:
            group = self.groups.get_or_create(req.group_id)
        elif group.has_member(req.member_id):
            self.groups.schedule_session(group, group.member(req.member_id))
        now = self.clock.time_ms()
        results: list[tuple[TopicPartition, ErrorCode]] = []
        records: list[CoordinatorRecord] = []
        for item in req.items:
            if len(item.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results.append((item.tp, E.OFFSET_METADATA_TOO_LARGE))
                continue
            if item.offset < 0:
                results.append((item.tp, E.INVALID_COMMIT_OFFSET_SIZE))
                continue
            value = OffsetValue(item.offset, item.leader_epoch, item.metadata, now)
            records.append(offset_record(req.group_id, item.tp, value))
            results.append((item.tp, E.NONE))
        if not records:
            reply(results)
            return NOTHING

        def after(error: ErrorCode) -> None:
            reply([(tp, error if code == E.NONE else code) for tp, code in results])

        return Outcome(records, after)

    # --- OffsetFetch ------------------------------------------------------------------------

    def fetch(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> list[FetchedOffset]:
        """The committed offsets of `partitions` (None: every partition with one); -1 where
        none was committed."""
        per_group = self.offsets.get(group_id, {})
        wanted = sorted(per_group) if partitions is None else list(partitions)
        out = []
        for tp in wanted:
            value = per_group.get(tp)
            if value is None:
                out.append(FetchedOffset(tp))
            else:
                out.append(FetchedOffset(tp, value.offset, value.leader_epoch, value.metadata))
        return out

    # --- retention and deletion -------------------------------------------------------------

    def tombstones(self, group_id: str) -> list[CoordinatorRecord]:
        return [offset_record(group_id, tp, None) for tp in sorted(self.offsets.get(group_id, {}))]

    def expire(self) -> list[CoordinatorRecord]:
        """Kafka's `cleanupGroupMetadata`: offsets of groups with no members (and of simple
        consumers) older than offsets.retention.minutes, as tombstones. The base is when the
        group became empty for a group with a protocol type, else each offset's commit time."""
        now = self.clock.time_ms()
        retention = self.config.offsets_retention_ms
        records: list[CoordinatorRecord] = []
        for group_id, per_group in sorted(self.offsets.items()):
            group = self.groups.groups.get(group_id)
            if group is not None and not group.is_in(S.EMPTY):
                continue
            for tp, value in sorted(per_group.items()):
                base = value.commit_timestamp_ms
                if group is not None and group.protocol_type and group.empty_since_ms:
                    base = max(base, group.empty_since_ms)
                if now - base >= retention:
                    records.append(offset_record(group_id, tp, None))
        if records:
            log.info("offsets retention: %d offsets expire", len(records))
        return records
