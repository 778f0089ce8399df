"""Committed offsets of the groups of one `__consumer_offsets` partition, and the commit rules
(Kafka's `OffsetMetadataManager`): who may commit (generation and member checks, simple
consumers), metadata size, fetch, and retention of the offsets of empty groups.

The store changes only through `replay()`: a commit handler validates and returns records, the
shard writes them with acks=all, and replaying them (live, or when a new owner loads the
partition) is what makes an offset visible to OffsetFetch.

TxnOffsetCommit (KIP-98, KIP-447; decision 0031) follows the same rules with Kafka's
transactional relaxations, but its records are the producer's transactional batch and replay
keeps them pending (`pending.py`) until the transaction's marker commits or drops them.
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
from ..records import CoordinatorRecord, OffsetValue, TxnProducer, offset_record
from .pending import PendingOffsets

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
class TxnCommitRequest:
    """TxnOffsetCommit: a group's offsets inside `producer_id`'s transaction. Generation -1
    with no member: not checked (KIP-447's fencing is off for this producer)."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
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
        self.pending = PendingOffsets()

    # --- replay -----------------------------------------------------------------------------

    def replay(self, group_id: str, tp: TopicPartition, value: OffsetValue | None) -> None:
        self.pending.superseded(group_id, tp)
        self._materialise(group_id, tp, value)

    def replay_pending(
        self,
        producer_id: int,
        producer_epoch: int,
        last_sequence: int,
        group_id: str,
        tp: TopicPartition,
        value: OffsetValue | None,
    ) -> None:
        """A transactional offset record: pending until its transaction's marker."""
        if value is None:
            return  # TxnOffsetCommit writes no tombstones
        self.pending.add(producer_id, producer_epoch, last_sequence, group_id, tp, value)

    def replay_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """A transaction's marker: its pending offsets become committed, or are dropped."""
        for group_id, tp, value in self.pending.complete(producer_id, producer_epoch, committed):
            self._materialise(group_id, tp, value)

    def _materialise(self, group_id: str, tp: TopicPartition, value: OffsetValue | None) -> None:
        if value is None:
            per_group = self.offsets.get(group_id)
            if per_group is not None:
                per_group.pop(tp, None)
                if not per_group:
                    del self.offsets[group_id]
            return
        self.offsets.setdefault(group_id, {})[tp] = value

    # --- OffsetCommit -----------------------------------------------------------------------

    def _validate(
        self,
        req: CommitRequest | TxnCommitRequest,
        group: ClassicGroup | None,
        transactional: bool = False,
    ) -> ErrorCode:
        """Kafka's `ClassicGroup.validateOffsetCommit`: simple commits (generation -1) only to
        empty groups; member commits need the member (and its static instance id) and the
        current generation; refused while the group waits for its assignment
        (COMPLETING_REBALANCE), accepted while it prepares a rebalance (a member commits what
        it processed before rejoining). A transactional commit (KIP-447) with no generation
        and no member is not checked at all, and is not refused during a rebalance: the
        producer's epoch fences zombies then, and the transaction ends before the offsets
        count."""
        if group is None:
            return E.NONE if req.generation_id < 0 else E.ILLEGAL_GENERATION
        if group.is_in(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and (transactional or group.is_in(S.EMPTY)):
            if not req.member_id and req.group_instance_id is None:
                return E.NONE  # a simple consumer, an admin reset, or KIP-447 fencing off
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
        if group.is_in(S.COMPLETING_REBALANCE) and not transactional:
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
        results, records = self._records(req.group_id, req.items)
        if not records:
            reply(results)
            return NOTHING

        def after(error: ErrorCode) -> None:
            reply([(tp, error if code == E.NONE else code) for tp, code in results])

        return Outcome(records, after)

    def _records(
        self, group_id: str, items: Sequence[CommitItem]
    ) -> tuple[list[tuple[TopicPartition, ErrorCode]], list[CoordinatorRecord]]:
        """Each item's answer so far, and the records of the valid ones."""
        now = self.clock.time_ms()
        results: list[tuple[TopicPartition, ErrorCode]] = []
        records: list[CoordinatorRecord] = []
        for item in items:
            if len(item.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results.append((item.tp, E.OFFSET_METADATA_TOO_LARGE))
                continue
            if item.offset < 0:
                results.append((item.tp, E.INVALID_COMMIT_OFFSET_SIZE))
                continue
            value = OffsetValue(item.offset, item.leader_epoch, item.metadata, now)
            records.append(offset_record(group_id, item.tp, value))
            results.append((item.tp, E.NONE))
        return results, records

    # --- TxnOffsetCommit ---------------------------------------------------------------------

    def txn_commit(self, req: TxnCommitRequest, reply: CommitReply) -> Outcome:
        """Validate, then write the offsets as the producer's transactional batch; replayed,
        they are pending until the transaction's marker (decision 0031)."""
        whole = self._txn_error(req)
        if whole == E.NONE:
            group = self.groups.groups.get(req.group_id)
            whole = self._validate(req, group, transactional=True)
        if whole != E.NONE:
            reply([(i.tp, whole) for i in req.items])
            return NOTHING
        group = self.groups.groups.get(req.group_id)
        if group is None:
            self.groups.get_or_create(req.group_id)
        elif group.has_member(req.member_id):
            self.groups.schedule_session(group, group.member(req.member_id))
        results, records = self._records(req.group_id, req.items)
        if not records:
            reply(results)
            return NOTHING
        sequence = self.pending.next_sequence(req.producer_id, req.producer_epoch)
        producer = TxnProducer(req.producer_id, req.producer_epoch, sequence, req.transactional_id)

        def after(error: ErrorCode) -> None:
            reply([(tp, error if code == E.NONE else code) for tp, code in results])

        return Outcome(records, after, producer=producer)

    def _txn_error(self, req: TxnCommitRequest) -> ErrorCode:
        if not req.group_id:
            return E.INVALID_GROUP_ID
        if not req.transactional_id or req.producer_id < 0 or req.producer_epoch < 0:
            return E.INVALID_REQUEST
        if self.pending.newer_epoch(req.producer_id, req.producer_epoch):
            return E.PRODUCER_FENCED
        return E.NONE

    # --- OffsetFetch ------------------------------------------------------------------------

    def fetch(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        require_stable: bool = False,
    ) -> list[FetchedOffset]:
        """The committed offsets of `partitions` (None: every partition with one); -1 where
        none was committed. Pending transactional offsets are never shown; with
        `require_stable` a partition that has one answers UNSTABLE_OFFSET_COMMIT (KIP-447:
        the consumer retries until the transaction ends)."""
        per_group = self.offsets.get(group_id, {})
        wanted = sorted(per_group) if partitions is None else list(partitions)
        out = []
        for tp in wanted:
            value = per_group.get(tp)
            if require_stable and self.pending.has_pending(group_id, tp):
                out.append(FetchedOffset(tp, error_code=E.UNSTABLE_OFFSET_COMMIT))
            elif value is None:
                out.append(FetchedOffset(tp))
            else:
                out.append(FetchedOffset(tp, value.offset, value.leader_epoch, value.metadata))
        return out

    # --- retention and deletion -------------------------------------------------------------

    def tombstones(self, group_id: str) -> list[CoordinatorRecord]:
        """Of every offset of the group, pending ones included (Kafka's deleteAllOffsets): a
        tombstone replayed after a pending offset keeps its transaction from restoring it."""
        partitions = set(self.offsets.get(group_id, {})) | self.pending.partitions_of(group_id)
        return [offset_record(group_id, tp, None) for tp in sorted(partitions)]

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
                if self.pending.has_pending(group_id, tp):
                    continue  # Kafka keeps an offset a transaction may still replace
                base = value.commit_timestamp_ms
                if group is not None and group.protocol_type and group.empty_since_ms:
                    base = max(base, group.empty_since_ms)
                if now - base >= retention:
                    records.append(offset_record(group_id, tp, None))
        if records:
            log.info("offsets retention: %d offsets expire", len(records))
        return records
