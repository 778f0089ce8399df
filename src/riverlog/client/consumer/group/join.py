"""The join cycle of a group member (Kafka's AbstractCoordinator.joinGroupIfNeeded):
JoinGroup (with the MEMBER_ID_REQUIRED round trip), the leader's client-side assignment with
the shared assignors, SyncGroup, the error handling between them, and LeaveGroup.

Threads: JoinGroup parks on the coordinator until the group's members have rejoined (up to the
rebalance timeout, max.poll.interval.ms as in Kafka), so the JoinGroup + SyncGroup round trip
runs on a join thread of its own while poll() returns on time; a later poll() applies the
answer. `ensure_active_group` and the hooks it calls (`on_join_prepare`, `on_join_complete`:
the listener) run on the consumer's thread; `request_rejoin`, `reset_generation`, `fail` and
`maybe_leave_group` may also be called by the heartbeat thread. Shared fields change under
`self.lock`, no RPC is sent while holding it, and a join the member abandoned (it left the
group meanwhile) changes nothing: every round trip carries the epoch it started in.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Protocol

from riverlog.common.assignors import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    PartitionAssignor,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from riverlog.common.errors import ErrorCode, RiverlogError, error_for

from ...config import ConsumerConfig
from ..subscription import SubscriptionState
from .api import GroupApi, GroupMember, JoinRequest, JoinResult
from .state import Generation, MemberState, check_transition

log = logging.getLogger(__name__)

_RETRY_NOW = frozenset(
    {
        ErrorCode.MEMBER_ID_REQUIRED,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.REBALANCE_IN_PROGRESS,
    }
)


@dataclass(frozen=True, slots=True)
class Joined:
    """A round trip that ended in a stable generation, for the consumer's thread to apply."""

    generation: Generation
    assignment: Assignment
    epoch: int


JoinOutcome = Joined | bool | None
"""Joined, False (retry at once) or None (back off first)."""


class TopicSource(Protocol):
    """Topic metadata the member needs: partition counts, for the leader and for patterns."""

    def partition_counts(self, topics: Sequence[str] | None) -> dict[str, int]:
        """Partition counts of those of `topics` that exist (None: every topic)."""
        ...


class JoinCycle:
    """Join/sync/leave state and round trips; `ConsumerCoordinator` adds the consumer's part."""

    protocol_type = CONSUMER_PROTOCOL_TYPE

    def __init__(
        self,
        config: ConsumerConfig,
        api: GroupApi,
        subscriptions: SubscriptionState,
        topics: TopicSource,
        assignors: Sequence[PartitionAssignor],
    ) -> None:
        self.config = config
        self.api = api
        self.subs = subscriptions
        self.topics = topics
        self.assignors = list(assignors)
        self.group_id = config.group_id
        self.instance_id = config.group_instance_id or None
        self.lock = threading.RLock()
        self.state = MemberState.UNJOINED
        self.generation = Generation()
        self._rejoin_needed = True
        self._rejoin_reason = "the member is joining"
        self._needs_join_prepare = True
        self._fatal: RiverlogError | None = None
        self._assignment_snapshot: dict[str, int] | None = None
        self.rebalances = 0
        self._join_future: futures.Future[JoinOutcome] | None = None
        self._join_epoch = 0
        self._join_timeout_s = (
            max(config.request_timeout_ms, config.max_poll_interval_ms + 5000) / 1000
        )
        self._timeout_s = config.request_timeout_ms / 1000

    # ---- shared state --------------------------------------------------------------------

    @property
    def rejoin_needed(self) -> bool:
        return self._rejoin_needed or self.state != MemberState.STABLE

    @property
    def joining(self) -> bool:
        """A rejoin is needed, or a join's answer waits to be applied by the next poll()."""
        return self._join_future is not None or self.rejoin_needed

    def request_rejoin(self, reason: str) -> None:
        with self.lock:
            if not self._rejoin_needed:
                log.info("group %s: rejoining: %s", self.group_id, reason)
            self._rejoin_needed = True
            self._rejoin_reason = reason

    def reset_generation(self, reset_member_id: bool) -> None:
        """Forget the generation (and the member id): the partitions are lost."""
        with self.lock:
            member_id = "" if reset_member_id else self.generation.member_id
            self.generation = Generation(member_id=member_id)
            self.state = MemberState.UNJOINED
            self._rejoin_needed = True
            self._needs_join_prepare = True
            self._assignment_snapshot = None

    def fail(self, error: RiverlogError) -> None:
        """A fatal condition (fenced static member): every later poll() raises it."""
        with self.lock:
            self._fatal = error
            self.state = MemberState.UNJOINED

    def raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def member(self) -> GroupMember:
        generation = self.generation
        return GroupMember(
            self.group_id,
            generation.member_id,
            generation.generation_id,
            self.instance_id,
            generation.protocol_name,
        )

    def assignor(self, name: str) -> PartitionAssignor:
        for assignor in self.assignors:
            if assignor.name == name:
                return assignor
        raise RiverlogError(
            f"the group chose assignor {name!r}, which this member did not offer",
            ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        )

    def _set_state(self, target: MemberState) -> None:
        with self.lock:
            check_transition(self.state, target)
            self.state = target

    # ---- hooks ---------------------------------------------------------------------------

    def on_join_prepare(self) -> None:
        raise NotImplementedError

    def on_join_complete(self, generation: Generation, assignment: Assignment) -> None:
        raise NotImplementedError

    # ---- the cycle -----------------------------------------------------------------------

    def ensure_active_group(self, timeout_s: float) -> bool:
        """Join until the member is in a stable generation, or `timeout_s` has passed. The
        JoinGroup/SyncGroup round trip runs on a join thread (it parks on the coordinator until
        every member rejoined), so a poll() returns on time and a later one picks the answer
        up, as Kafka's consumer does; the listener runs here, on the consumer's thread."""
        deadline = time.monotonic() + timeout_s
        while self.joining:
            self.raise_fatal()
            future = self._join_future
            if future is None:
                if self._needs_join_prepare:
                    self._needs_join_prepare = False
                    self.on_join_prepare()
                future = self._join_future = self._start_join()
            if not future.done():
                futures.wait([future], timeout=max(deadline - time.monotonic(), 0.0))
                if not future.done():
                    return False  # still joining: a later poll() picks the answer up
            self._join_future = None
            outcome = future.result()  # fatal errors of the round trip are raised here
            if isinstance(outcome, Joined):
                if outcome.epoch == self._join_epoch:
                    self._heartbeat_reset()
                    self.on_join_complete(outcome.generation, outcome.assignment)
                    self._needs_join_prepare = True
                continue  # a cooperative follow-up may have asked for another round
            if time.monotonic() >= deadline:
                return False
            if outcome is None:
                time.sleep(min(self.config.retry_backoff_ms / 1000, deadline - time.monotonic()))
        return True

    def _start_join(self) -> futures.Future[JoinOutcome]:
        """Consumer thread: build the JoinGroup (the subscription is read here) and run the
        round trip on a new daemon thread (a new one each time, so an abandoned join still
        parked on the coordinator never delays the next)."""
        with self.lock:
            self._set_state(MemberState.PREPARING_REBALANCE)
            self._rejoin_needed = False
            reason = self._rejoin_reason
            epoch = self._join_epoch
        request = JoinRequest(
            group_id=self.group_id,
            member_id=self.generation.member_id,
            group_instance_id=self.instance_id,
            session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=self.config.max_poll_interval_ms,
            protocol_type=self.protocol_type,
            protocols=self._join_protocols(),
            reason=reason,
        )
        future: futures.Future[JoinOutcome] = futures.Future()

        def run() -> None:
            try:
                future.set_result(self._round_trip(request, epoch))
            except BaseException as e:
                future.set_exception(e)

        name = f"riverlog-join-{self.group_id}"
        threading.Thread(target=run, name=name, daemon=True).start()
        return future

    def _join_protocols(self) -> list[tuple[str, bytes]]:
        topics = sorted(self.subs.subscription)
        owned = sorted(self.subs.partitions)
        # The generation only qualifies owned partitions. Without any (always so with the eager
        # protocol) -1 keeps the metadata byte-identical across restarts, so a static member
        # coming back matches its old metadata and gets its assignment with no rebalance.
        generation = self.generation.generation_id if owned else -1
        rack = self.config.client_rack or None
        return [
            (
                assignor.name,
                encode_subscription(
                    Subscription(
                        topics,
                        assignor.subscription_user_data(topics, owned),
                        owned,
                        generation,
                        rack,
                    )
                ),
            )
            for assignor in self.assignors
        ]

    def _round_trip(self, request: JoinRequest, epoch: int) -> JoinOutcome:
        """Join thread: one JoinGroup + SyncGroup. Joined: stable; False: retry at once;
        None: back off. State changes only while `epoch` is current (not left meanwhile)."""
        try:
            result = self.api.join_group(request, self._join_timeout_s)
        except RiverlogError as e:
            return self._failed("JoinGroup", e.code, e.message, epoch)
        if result.error_code != ErrorCode.NONE:
            if result.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                with self.lock:
                    if epoch == self._join_epoch:
                        self.generation = Generation(member_id=result.member_id)
            return self._failed("JoinGroup", result.error_code, result.error_message, epoch)
        with self.lock:
            if epoch != self._join_epoch:
                return False
            self.generation = Generation(
                result.generation_id, result.member_id, result.protocol_name
            )
            self._set_state(MemberState.COMPLETING_REBALANCE)
            if not result.is_leader:
                self._assignment_snapshot = None
        try:
            assignments: dict[str, bytes] = {}
            if result.is_leader and not result.skip_assignment:
                assignments = self._perform_assignment(result)
            sync = self.api.sync_group(
                self.member(), self.protocol_type, assignments, self._timeout_s
            )
        except RiverlogError as e:
            return self._failed("SyncGroup", e.code, e.message, epoch)
        if sync.error_code != ErrorCode.NONE:
            return self._failed("SyncGroup", sync.error_code, sync.error_message, epoch)
        assignment = decode_assignment(sync.assignment) if sync.assignment else Assignment([])
        with self.lock:
            if epoch != self._join_epoch or self.state != MemberState.COMPLETING_REBALANCE:
                return False  # left, or reset by the heartbeat thread meanwhile
            self._set_state(MemberState.STABLE)
            generation = self.generation
            self.rebalances += 1
        log.info(
            "group %s: joined generation %d as %s%s with %d partitions",
            self.group_id,
            generation.generation_id,
            generation.member_id,
            " (leader)" if result.is_leader else "",
            len(assignment.partitions),
        )
        return Joined(generation, assignment, epoch)

    def _heartbeat_reset(self) -> None:
        """A new generation: subclasses restart heartbeat timers."""

    def _failed(self, call: str, code: ErrorCode, message: str, epoch: int) -> bool | None:
        """Handle a failed JoinGroup/SyncGroup: reset what the error says, raise fatal ones."""
        with self.lock:
            if epoch != self._join_epoch:
                return False  # an abandoned join (the member left): nothing to change
            self._rejoin_needed = True
            if self.state != MemberState.UNJOINED:
                self.state = MemberState.UNJOINED
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.reset_generation(reset_member_id=True)
        elif code == ErrorCode.ILLEGAL_GENERATION:
            self.reset_generation(reset_member_id=False)
        elif code == ErrorCode.FENCED_INSTANCE_ID:
            error = error_for(code, message or f"group.instance.id {self.instance_id!r} is fenced")
            self.fail(error)
            raise error
        if code in _RETRY_NOW:
            log.debug("group %s: %s answered %s: rejoining", self.group_id, call, code.name)
            return False
        error = error_for(code, message)
        if not error.retriable:
            raise RiverlogError(f"group {self.group_id!r}: {call}: {error.message}", code)
        log.info("group %s: %s failed (%s): retrying", self.group_id, call, code.name)
        return None

    def _perform_assignment(self, result: JoinResult) -> dict[str, bytes]:
        """The leader's job: decode every member's subscription, look up partition counts,
        run the chosen assignor, encode one assignment per member."""
        assignor = self.assignor(result.protocol_name)
        subscriptions: dict[str, Subscription] = {}
        for m in result.members:
            subscription = decode_subscription(m.metadata)
            subscriptions[m.member_id] = dataclasses.replace(
                subscription, group_instance_id=m.group_instance_id
            )
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        counts = self.topics.partition_counts(topics)
        with self.lock:
            self._assignment_snapshot = dict(counts)
        assignments = assignor.assign(counts, subscriptions)
        return {member: encode_assignment(a) for member, a in assignments.items()}

    def maybe_leave_group(self, reason: str) -> None:
        """LeaveGroup for a dynamic member that is in the group; static members stay (their
        assignment waits for them). The generation is reset either way."""
        with self.lock:
            member = self.member()
            in_group = self.state != MemberState.UNJOINED and member.member_id != ""
            self._join_epoch += 1  # a join in flight is abandoned
            self.generation = Generation()
            self.state = MemberState.UNJOINED
            self._rejoin_needed = True
            self._needs_join_prepare = True
            self._assignment_snapshot = None
        if not in_group or self.instance_id is not None:
            return
        log.info("group %s: member %s leaving: %s", self.group_id, member.member_id, reason)
        try:
            code = self.api.leave_group(member, reason, self._timeout_s)
        except RiverlogError as e:
            code = e.code
        if code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID):
            log.warning("group %s: LeaveGroup answered %s", self.group_id, code.name)
