"""A shard without network for the coordinator's unit tests: outcomes are 'written' at once
(their records replayed, as the shard does after an acks=all append), and every reply is
recorded so a test reads what each member was told."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from riverlog.common.assignors import Subscription, encode_subscription
from riverlog.common.clock import SYSTEM_CLOCK, ManualClock
from riverlog.common.errors import ErrorCode
from riverlog.services.coordinator.config import CoordinatorConfig
from riverlog.services.coordinator.coordinator import GroupCoordinator
from riverlog.services.coordinator.group.member import (
    JoinRequest,
    JoinResponse,
    Protocol,
    SyncRequest,
    SyncResponse,
)
from riverlog.services.coordinator.group.outcome import Outcome
from riverlog.services.coordinator.records import CoordinatorRecord

CONFIG = CoordinatorConfig(
    group_min_session_timeout_ms=10,
    group_initial_rebalance_delay_ms=0,
    offsets_retention_minutes=1,
    offsets_retention_check_interval_ms=1_000,
)


OFFSETS = "__consumer_offsets"


def new_groups() -> GroupCoordinator:
    """An empty group coordinator of the default config, for a shard (`new_state`)."""
    return GroupCoordinator(CoordinatorConfig(), SYSTEM_CLOCK, lambda t: 1)


def consumer_protocol(topics: list[str], name: str = "range") -> tuple[Protocol, ...]:
    return (Protocol(name, encode_subscription(Subscription(topics))),)


@dataclass
class Box:
    """The latest reply a request got (None while parked)."""

    value: Any = None
    count: int = 0

    def __call__(self, value: Any) -> None:
        self.value = value
        self.count += 1


@dataclass
class Harness:
    counts: Mapping[str, int] = field(default_factory=lambda: {"t": 12})
    config: CoordinatorConfig = CONFIG
    fail_writes: ErrorCode = ErrorCode.NONE

    def __post_init__(self) -> None:
        self.clock = ManualClock()
        ids = itertools.count(1)
        self.log: list[CoordinatorRecord] = []
        self.counts = dict(self.counts)
        self.coord = GroupCoordinator(
            self.config,
            self.clock,
            lambda t: self.counts.get(t, 0),
            new_member_id=lambda client: f"{client or 'm'}-{next(ids)}",
        )
        self.coord.loaded()

    def apply(self, outcome: Outcome) -> None:
        error = self.fail_writes
        if outcome.records and error == ErrorCode.NONE:
            for record in outcome.records:
                self.log.append(record)
                self.coord.replay(record.key, record.value)
        if outcome.after is not None:
            outcome.after(error)
        for queued in self.coord.groups.outbox.drain():
            self.apply(queued)

    def leave(self, member_id: str, instance_id: str | None = None, group: str = "g") -> ErrorCode:
        code = self.coord.groups.leave(group, member_id, instance_id, "test")
        self.apply(Outcome())
        return code

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.coord.timer.expire()
        for queued in self.coord.groups.outbox.drain():
            self.apply(queued)

    def join(
        self,
        group: str = "g",
        member_id: str = "",
        *,
        topics: list[str] | None = None,
        protocols: tuple[Protocol, ...] | None = None,
        instance_id: str | None = None,
        session_ms: int = 1_000,
        rebalance_ms: int = 2_000,
        client_id: str = "c",
    ) -> Box:
        box = Box()
        req = JoinRequest(
            group_id=group,
            member_id=member_id,
            protocol_type="consumer",
            protocols=protocols or consumer_protocol(topics or ["t"]),
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            group_instance_id=instance_id,
            client_id=client_id,
        )
        self.apply(self.coord.groups.join(req, box))
        return box

    def join_new(self, group: str = "g", **kw: Any) -> Box:
        """The two-step dynamic join: MEMBER_ID_REQUIRED, then the join with the id."""
        first = self.join(group, **kw)
        assert first.value.error_code == ErrorCode.MEMBER_ID_REQUIRED
        return self.join(group, first.value.member_id, **kw)

    def sync(
        self,
        member_id: str,
        generation: int,
        group: str = "g",
        assignments: dict[str, bytes] | None = None,
        instance_id: str | None = None,
    ) -> Box:
        box = Box()
        req = SyncRequest(
            group, generation, member_id, instance_id, assignments=list((assignments or {}).items())
        )
        self.apply(self.coord.groups.sync(req, box))
        return box

    def state(self, group: str = "g") -> str:
        g = self.coord.group_of(group)
        return g.state.value if g is not None else "Dead"


def join_ok(box: Box) -> JoinResponse:
    assert isinstance(box.value, JoinResponse), box.value
    assert box.value.error_code == ErrorCode.NONE, box.value
    return box.value


def sync_ok(box: Box) -> SyncResponse:
    assert isinstance(box.value, SyncResponse), box.value
    assert box.value.error_code == ErrorCode.NONE, box.value
    return box.value
