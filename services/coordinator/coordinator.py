"""The coordinator of one `__consumer_offsets` partition: its groups, their committed offsets,
and `replay()`, the single path by which written records change the state — both live (after
each acks=all write) and while a new owner loads the partition.

Also the group-wide requests that are neither membership nor offsets: ListGroups,
DescribeGroups, DeleteGroups, and the periodic offsets retention sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode

from .config import CoordinatorConfig
from .group.assignment import PartitionCounts
from .group.group import ClassicGroup
from .group.manager import GroupManager
from .group.member import Member, Protocol
from .group.outcome import Outcome, TxnMarker
from .group.state import GroupState
from .group.timer import Timer
from .offsets.store import OffsetStore
from .records import (
    GroupKey,
    GroupValue,
    LogRecord,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_record,
    txn_end_record,
)

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState
_RETENTION_KEY = "offsets-retention"


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str = ""
    protocol_name: str = ""
    generation_id: int = -1
    leader: str = ""
    members: tuple[MemberDescription, ...] = ()
    error_code: ErrorCode = ErrorCode.NONE


class GroupCoordinator:
    """State of one partition. Lifecycle: built by the shard when it takes the partition,
    fed by `replay()` while loading, `loaded()` once caught up, then serves; dropped when the
    partition moves. Used from the shard's task only."""

    def __init__(
        self,
        config: CoordinatorConfig,
        clock: Clock,
        counts: PartitionCounts,
        new_member_id: Callable[[str], str] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.timer = Timer(clock)
        kwargs = {} if new_member_id is None else {"new_member_id": new_member_id}
        self.groups = GroupManager(config, clock, self.timer, counts, **kwargs)
        self.offsets = OffsetStore(config, clock, self.groups)
        self.loading = True
        self.records_replayed = 0

    # --- replay -----------------------------------------------------------------------------

    def replay_record(self, record: LogRecord) -> None:
        """Apply one record as read from (or just written to) the log: a transaction's marker
        ends the producer's pending offsets, a transactional offset record is pending, and
        anything else goes to `replay()` (decision 0031)."""
        if record.marker is not None:
            self.offsets.replay_marker(record.producer_id, record.producer_epoch, record.marker)
        elif record.transactional:
            self._replay_transactional(record)
        else:
            self.replay(record.key, record.value)

    def _replay_transactional(self, record: LogRecord) -> None:
        if record.key is None:
            return
        self.records_replayed += 1
        try:
            decoded = decode_key(record.key)
            if not isinstance(decoded, OffsetKey):
                return  # TxnOffsetCommit writes offsets only
            value = decode_offset_value(record.value) if record.value is not None else None
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping an unreadable transactional offset record: %s", exc)
            return
        self.offsets.replay_pending(
            record.producer_id,
            record.producer_epoch,
            record.last_sequence,
            decoded.group_id,
            decoded.tp,
            value,
        )

    def replay(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one `__consumer_offsets` record. Unknown or malformed records are logged and
        skipped (a newer build's records must not stop a load)."""
        if key is None:
            return
        self.records_replayed += 1
        try:
            decoded = decode_key(key)
            if isinstance(decoded, OffsetKey):
                offset = decode_offset_value(value) if value is not None else None
                self.offsets.replay(decoded.group_id, decoded.tp, offset)
            elif isinstance(decoded, GroupKey):
                group = decode_group_value(value) if value is not None else None
                self._replay_group(decoded.group_id, group)
            # an OwnerKey marks a change of owner, a TxnEndKey follows a marker: nothing to
            # rebuild
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping an unreadable __consumer_offsets record: %s", exc)

    def _replay_group(self, group_id: str, value: GroupValue | None) -> None:
        groups = self.groups.groups
        if value is None:
            group = groups.pop(group_id, None)
            if group is not None and not group.is_in(S.DEAD):
                group.transition_to(S.DEAD, self.clock.monotonic_ms())
            return
        if not self.loading:
            return  # live: the in-memory group is where this record came from
        state = S.STABLE if value.members else S.EMPTY
        group = ClassicGroup(group_id, self.clock.monotonic_ms(), state)
        group.generation_id = value.generation_id
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol_name
        if not value.members:
            group.empty_since_ms = value.current_state_timestamp_ms
        if value.server_assigned_counts is not None:
            group.server_assigned = True
            group.assigned_counts = dict(value.server_assigned_counts)
        for m in value.members:
            protocols = (Protocol(value.protocol_name or "", m.subscription),)
            group.add(
                Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    protocol_type=value.protocol_type,
                    protocols=protocols,
                    assignment=m.assignment,
                )
            )
        group.leader_id = value.leader_id
        groups[group_id] = group

    def drain_outbox(self) -> list[Outcome]:
        return self.groups.outbox.drain()

    def on_partition_counts(self) -> None:
        """A topic's partition count changed: groups subscribed to it rebalance."""
        self.groups.on_partition_counts()

    def loaded(self) -> None:
        """Loading is over: members of loaded groups get a session to prove they are alive,
        and the retention sweep starts."""
        self.loading = False
        for group in self.groups.groups.values():
            for member in group.members.values():
                self.groups.schedule_session(group, member)
        self._schedule_retention()
        log.info(
            "loaded %d groups and %d offsets from %d records",
            len(self.groups.groups),
            sum(len(v) for v in self.offsets.offsets.values()),
            self.records_replayed,
        )

    # --- retention --------------------------------------------------------------------------

    def _schedule_retention(self) -> None:
        self.timer.schedule(
            _RETENTION_KEY, self.config.offsets_retention_check_interval_ms, self._retention_tick
        )

    def _retention_tick(self) -> None:
        self._schedule_retention()
        records = self.offsets.expire()
        expiring: dict[str, int] = {}
        for record in records:
            decoded = decode_key(record.key)
            if isinstance(decoded, OffsetKey):
                expiring[decoded.group_id] = expiring.get(decoded.group_id, 0) + 1
        for group_id, group in sorted(self.groups.groups.items()):
            held = len(self.offsets.offsets.get(group_id, {}))
            if group.is_in(S.EMPTY) and expiring.get(group_id, 0) == held:
                group.transition_to(S.DEAD, self.clock.monotonic_ms())
                records.append(group_record(group_id, None))
        self.groups.outbox.push(Outcome(records))

    # --- ListGroups, DescribeGroups, DeleteGroups -------------------------------------------

    def list_groups(self, states: Sequence[str] = ()) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group; filtered by state names."""
        out: dict[str, tuple[str, str, str]] = {}
        for group_id in self.offsets.offsets:
            out[group_id] = (group_id, "", S.EMPTY.value)
        for group_id, group in self.groups.groups.items():
            if not group.is_in(S.DEAD):
                out[group_id] = (group_id, group.protocol_type or "", group.state.value)
        wanted = {s.lower() for s in states}
        return [g for _, g in sorted(out.items()) if not wanted or g[2].lower() in wanted]

    def describe(self, group_id: str) -> GroupDescription:
        group = self.groups.groups.get(group_id)
        if group is None:
            state = S.EMPTY if group_id in self.offsets.offsets else S.DEAD
            return GroupDescription(group_id, state.value)
        members = tuple(
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata_for(group.protocol_name) if group.protocol_name else b"",
                m.assignment if group.is_in(S.STABLE) else b"",
            )
            for m in group.members.values()
        )
        return GroupDescription(
            group_id,
            group.state.value,
            group.protocol_type or "",
            group.protocol_name or "",
            group.generation_id,
            group.leader_id or "",
            members,
        )

    def delete_group(self, group_id: str, reply: Callable[[ErrorCode], None]) -> Outcome:
        group = self.groups.groups.get(group_id)
        if group is None and group_id not in self.offsets.offsets:
            reply(E.GROUP_ID_NOT_FOUND)
            return Outcome()
        if group is not None and not group.is_in(S.EMPTY, S.DEAD):
            reply(E.NON_EMPTY_GROUP)
            return Outcome()
        if group is not None:
            group.transition_to(S.DEAD, self.clock.monotonic_ms())
        records = [*self.offsets.tombstones(group_id), group_record(group_id, None)]

        def after(error: ErrorCode) -> None:
            if error != E.NONE:
                self.groups.groups.pop(group_id, None)
            reply(error)

        return Outcome(records, after)

    # --- the end of a transaction (decision 0031) --------------------------------------------

    def end_transaction(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        reply: Callable[[ErrorCode], None],
    ) -> Outcome:
        """A transaction that wrote offsets here ends: the shard writes its marker at storage,
        then a record with this owner's epoch (refused if this owner is a zombie), then
        replays the marker, which commits or drops the producer's pending offsets."""
        if producer_id < 0 or producer_epoch < 0:
            reply(E.INVALID_REQUEST)
            return Outcome()
        marker = TxnMarker(producer_id, producer_epoch, committed, coordinator_epoch)
        record = txn_end_record(producer_id, producer_epoch, committed)
        return Outcome([record], reply, marker=marker)

    # --- requests that only read ------------------------------------------------------------

    def group_of(self, group_id: str) -> ClassicGroup | None:
        return self.groups.groups.get(group_id)
